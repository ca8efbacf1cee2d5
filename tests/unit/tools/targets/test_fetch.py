"""tools/targets/fetch.py: release tables, the fetch's refusals, extraction
and the workspace, on small wheels made here (no network: pip reads a local
folder, or an index that refuses the connection)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import git
import pytest

from tools.targets import fetch
from tools.targets.fetch import FetchError, glob_pattern, make_workspace, read_release

FAKE_MEMBERS = {
    "fakepkg/__init__.py": b"",
    "fakepkg/data/include/fake/comm/one.cuh": b"// one\n",
    "fakepkg/data/include/fake/comm/two.cuh": b"// two\n",
    "fakepkg/data/include/fake/deep/three.h": b"// three\n",
    "fakepkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n",
    "fakepkg-1.0.dist-info/WHEEL": (
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ),
    "fakepkg-1.0.dist-info/RECORD": b"",
}
WHEEL = "fakepkg-1.0-py3-none-any.whl"


@pytest.fixture
def links(tmp_path, monkeypatch) -> Path:
    """A folder holding the fake wheel; the fetch cache under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "links"
    folder.mkdir()
    with zipfile.ZipFile(folder / WHEEL, "w") as wheel:
        for name, data in FAKE_MEMBERS.items():
            wheel.writestr(name, data)
    return folder


def table(tmp_path: Path, links: Path | None = None, **changes) -> Path:
    sha = hashlib.sha256((links / WHEEL).read_bytes()).hexdigest() if links else "0" * 64
    fields = dict(package="fakepkg", version="1.0", file=WHEEL, sha256=sha,
                  strip="fakepkg/data/", members=["fakepkg/data/include/fake/comm/*.cuh"],
                  harness=["harness.cu"])
    fields.update(changes)
    lines = [f"{key} = {value!r}".replace("'", '"') for key, value in fields.items()]
    folder = tmp_path / "target"
    folder.mkdir(exist_ok=True)
    (folder / "harness.cu").write_text("// our harness\n")
    (folder / "release.toml").write_text("\n".join(lines) + "\n")
    return folder / "release.toml"


def test_a_glob_star_stays_in_its_folder_and_double_star_crosses():
    assert glob_pattern("a/*.cuh").match("a/x.cuh")
    assert not glob_pattern("a/*.cuh").match("a/b/x.cuh")
    assert glob_pattern("a/**").match("a/b/c/x.h")
    assert not glob_pattern("a/?.h").match("a/xy.h")


def test_the_flashinfer_table_pins_the_wheel_and_leaves_vllm_out():
    release = read_release("flashinfer_comm")
    assert (release.package, release.version) == ("flashinfer-python", "0.7.4")
    assert release.sha256 == "a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32"
    assert release.strip == "flashinfer/data/"
    chosen = " ".join(release.members)
    assert "vllm" not in chosen and "ulysses" not in chosen and "custom_all_reduce" not in chosen


@pytest.mark.parametrize(
    "change, said",
    [
        ({"sha256": "abc"}, "sha256: 64 lowercase hex digits, got 'abc'"),
        ({"file": "fakepkg-1.0.tar.gz"}, "file: a wheel (.whl)"),
        ({"members": []}, "members: a non-empty list of strings, got []"),
        ({"harness": ["absent.cu"]}, "harness: absent.cu: no such file beside the table"),
        ({"colour": "red"}, "top level: unknown keys ['colour']"),
    ],
)
def test_a_bad_table_is_one_line_naming_its_key(tmp_path, change, said):
    with pytest.raises(FetchError) as caught:
        read_release(table(tmp_path, **change))
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_the_workspace_holds_the_members_stripped_and_our_harness_in_one_commit(tmp_path, links):
    into = tmp_path / "ws"
    commit = make_workspace(read_release(table(tmp_path, links)), into, links)
    files = sorted(p.relative_to(into).as_posix() for p in into.rglob("*")
                   if p.is_file() and ".git" not in p.parts)
    assert files == [
        "harness/harness.cu", "include/fake/comm/one.cuh", "include/fake/comm/two.cuh"
    ]
    assert (into / "include/fake/comm/two.cuh").read_bytes() == b"// two\n"
    repo = git.Repo(into)
    assert repo.head.commit.hexsha == commit and not repo.head.commit.parents
    assert not repo.is_dirty(untracked_files=True)


def test_a_sha256_that_differs_is_refused_and_nothing_is_made(tmp_path, links):
    release = read_release(table(tmp_path, links, sha256="1" * 64))
    said = f"sha256: {WHEEL} has [0-9a-f]{{64}}, the table pins 1{{64}}"
    with pytest.raises(FetchError, match=said):
        make_workspace(release, tmp_path / "ws", links)
    assert not (tmp_path / "ws").exists()
    assert not list((tmp_path / "cache/faults/fetch").rglob(WHEEL))  # never cached


def test_a_member_glob_matching_nothing_is_refused(tmp_path, links):
    release = read_release(table(tmp_path, links, members=["fakepkg/data/include/none/*.h"]))
    said = r"members: 'fakepkg/data/include/none/\*.h' matches no member"
    with pytest.raises(FetchError, match=said):
        make_workspace(release, tmp_path / "ws", links)
    assert not (tmp_path / "ws").exists()


def test_a_second_fetch_reads_the_cache(tmp_path, links, capsys):
    release = read_release(table(tmp_path, links))
    make_workspace(release, tmp_path / "one", links)
    (links / WHEEL).unlink()  # no registry now: the cache must serve it
    make_workspace(release, tmp_path / "two", links)
    assert f"fetch: {WHEEL} cached at" in capsys.readouterr().out


def test_an_unreachable_registry_is_said_plainly(tmp_path, links, monkeypatch):
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens
    monkeypatch.setenv("PIP_RETRIES", "1")  # one retry: pip warns why
    release = read_release(table(tmp_path, links))
    with pytest.raises(FetchError, match=(
        r"^fakepkg==1.0: the registry cannot be reached "
        r"\(Failed to establish a new connection\); pip download gave up$"
    )):
        fetch.fetch_file(release)


def test_into_must_be_empty(tmp_path, links):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "kept").write_text("mine")
    with pytest.raises(FetchError, match="exists and is not an empty folder"):
        make_workspace(read_release(table(tmp_path, links)), tmp_path / "ws", links)
    assert (tmp_path / "ws" / "kept").read_text() == "mine"
