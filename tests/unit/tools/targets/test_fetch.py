"""tools/targets/fetch.py: release tables, the workspace and its refusals, on
small wheels made here (no network: the release files come from a local
folder); the download itself is tests/unit/tools/targets/test_registry.py's."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import git
import pytest

from tools.targets.fetch import FetchError, make_workspace, read_release
from tools.targets.registry import REPO

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
def links(tmp_path) -> Path:
    """A folder holding the fake wheel."""
    folder = tmp_path / "links"
    folder.mkdir()
    with zipfile.ZipFile(folder / WHEEL, "w") as wheel:
        for name, data in FAKE_MEMBERS.items():
            wheel.writestr(name, data)
    return folder


def table(tmp_path: Path, links: Path | None = None, **changes) -> Path:
    sha = hashlib.sha256((links / WHEEL).read_bytes()).hexdigest() if links else "0" * 64
    fields = dict(package="fakepkg", version="1.0", file=WHEEL, sha256=sha,
                  prefix="fakepkg/data", members=["include/fake/comm"],
                  harness=["harness.cu"])
    fields.update(changes)
    lines = [f"{key} = {value!r}".replace("'", '"') for key, value in fields.items()]
    folder = tmp_path / "target"
    folder.mkdir(exist_ok=True)
    (folder / "harness.cu").write_text("// our harness\n")
    (folder / "release.toml").write_text("\n".join(lines) + "\n")
    return folder / "release.toml"


def fetched(tmp_path: Path, release, into: Path, links: Path) -> str:
    """The workspace made with the cache under tmp_path."""
    return make_workspace(release, into, links, cache=tmp_path / "cache")


def test_the_flashinfer_table_pins_the_wheel_and_leaves_vllm_out():
    release = read_release("flashinfer_comm")
    assert release.pin.spec == "flashinfer-python==0.7.4"
    assert release.pin.sha256 == "a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32"
    assert (release.pin.prefix, release.pin.where) == ("flashinfer/data", str(release.path))
    chosen = " ".join(release.members)
    assert "vllm" not in chosen and "ulysses" not in chosen and "custom_all_reduce" not in chosen
    assert "include/flashinfer/comm" not in release.members  # a folder would take them


@pytest.mark.parametrize(
    "change, said",
    [
        ({"sha256": "abc"}, "sha256: 64 lowercase hex digits, got 'abc'"),
        ({"prefix": ""}, "prefix: a non-empty string, got ''"),
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
    commit = fetched(tmp_path, read_release(table(tmp_path, links)), into, links)
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
    said = f"release.toml: sha256: {WHEEL} has [0-9a-f]{{64}}, the pin is 1{{64}}"
    with pytest.raises(FetchError, match=said):
        fetched(tmp_path, release, tmp_path / "ws", links)
    assert not (tmp_path / "ws").exists()
    assert not list((tmp_path / "cache").rglob(WHEEL))  # never cached


def test_a_member_the_file_lacks_is_refused(tmp_path, links):
    release = read_release(table(tmp_path, links, members=["include/none.h"]))
    said = f"release.toml: members: {WHEEL} has no member fakepkg/data/include/none.h$"
    with pytest.raises(FetchError, match=said):
        fetched(tmp_path, release, tmp_path / "ws", links)
    assert not (tmp_path / "ws").exists()


def test_a_second_fetch_needs_only_the_unpacked_trees(tmp_path, links):
    """As on a GPU machine given .targets/trees alone: no registry, no archive."""
    release = read_release(table(tmp_path, links))
    fetched(tmp_path, release, tmp_path / "one", links)
    (links / WHEEL).unlink()
    (tmp_path / "cache/archives" / WHEEL).unlink()
    fetched(tmp_path, release, tmp_path / "two", links)
    assert (tmp_path / "two/include/fake/comm/one.cuh").read_bytes() == b"// one\n"


@pytest.mark.parametrize("where", ["docs/fetched", "tools/targets/flashinfer_comm/ws"])
def test_a_workspace_where_a_commit_could_take_it_is_refused(tmp_path, links, where):
    into = REPO / where
    with pytest.raises(FetchError) as caught:
        fetched(tmp_path, read_release(table(tmp_path, links)), into, links)
    assert str(caught.value) == (
        f"--into {into}: inside the repository and not ignored by git"
        " (another project's files never land where a commit could take them)"
    )
    assert not into.exists()


def test_a_workspace_in_the_ignored_cache_is_made(tmp_path, links):
    into = REPO / ".targets" / f"test-ws-{tmp_path.name}"
    try:
        fetched(tmp_path, read_release(table(tmp_path, links)), into, links)
        assert (into / "include/fake/comm/two.cuh").is_file()
    finally:
        shutil.rmtree(into, ignore_errors=True)


def test_into_must_be_empty(tmp_path, links):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "kept").write_text("mine")
    with pytest.raises(FetchError, match="exists and is not an empty folder"):
        fetched(tmp_path, read_release(table(tmp_path, links)), tmp_path / "ws", links)
    assert (tmp_path / "ws" / "kept").read_text() == "mine"
