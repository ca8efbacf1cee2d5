"""tools/targets/registry.py: pinned release files, wheels and sdists, fetched
from an index, sha256-checked, unpacked member by member into one cache; each
refusal one line. No network: the index is a server on this machine serving
small archives made here (or an address where nothing listens)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from hostio import Pin
from tools.targets.registry import FetchError, archive, tree

MEMBERS = {
    "include/fake/comm/one.cuh": b"// one\n",
    "include/fake/comm/deep/two.h": b"// two\n",
    "include/fake/other.h": b"// other\n",
}
SDIST = "fakepkg-1.0.tar.gz"
WHEEL = "fakepkg-1.1-py3-none-any.whl"


def make_sdist(folder: Path) -> Path:
    path = folder / SDIST
    with tarfile.open(path, "w:gz") as packed:
        for name, data in MEMBERS.items():
            info = tarfile.TarInfo(f"fakepkg-1.0/{name}")
            info.size = len(data)
            packed.addfile(info, io.BytesIO(data))
    return path


def make_wheel(folder: Path) -> Path:
    path = folder / WHEEL
    with zipfile.ZipFile(path, "w") as packed:
        for name, data in MEMBERS.items():
            packed.writestr(f"fakepkg/data/{name}", data)
    return path


def pin(path: Path, prefix: str, sha256: str | None = None) -> Pin:
    digest = sha256 or hashlib.sha256(path.read_bytes()).hexdigest()
    return Pin("fakepkg", "1.0", path.name, digest, prefix, "t.toml: release '1.0'")


@pytest.fixture
def index(tmp_path, request):
    """An index on this machine (PEP 691 JSON) listing the two archives (by
    absolute addresses, or relative ones when the test asks "relative"); the
    paths it was asked for."""
    relative = getattr(request, "param", "absolute") == "relative"
    files = tmp_path / "files"
    files.mkdir()
    make_sdist(files), make_wheel(files)
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            if self.path == "/simple/fakepkg/":
                where = "../../files" if relative else f"{base}/files"
                listed = [{"filename": p.name, "url": f"{where}/{p.name}"}
                          for p in files.iterdir()]
                body = json.dumps({"files": listed}).encode()
            elif (files / self.path.removeprefix("/files/")).is_file():
                body = (files / self.path.removeprefix("/files/")).read_bytes()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"{base}/simple/", files, asked
    server.shutdown()


def test_an_sdist_and_a_wheel_unpack_their_members_without_the_prefix(tmp_path, index):
    url, files, _ = index
    cache = tmp_path / "cache"
    sdist = tree(pin(files / SDIST, "fakepkg-1.0"), ["include/fake/comm"], cache, index=url)
    wheel = tree(pin(files / WHEEL, "fakepkg/data"), ["include/fake/other.h"], cache, index=url)
    assert sdist == cache / "trees" / SDIST and wheel == cache / "trees" / WHEEL
    assert sorted(p.relative_to(sdist).as_posix() for p in sdist.rglob("*") if p.is_file()) == [
        "include/fake/comm/deep/two.h", "include/fake/comm/one.cuh"
    ]
    assert [p.relative_to(wheel).as_posix() for p in wheel.rglob("*") if p.is_file()] == [
        "include/fake/other.h"
    ]
    assert (sdist / "include/fake/comm/deep/two.h").read_bytes() == b"// two\n"


@pytest.mark.parametrize("index", ["relative"], indirect=True)
def test_a_relative_url_in_the_index_is_read_from_the_listings_address(tmp_path, index):
    url, files, asked = index
    path = archive(pin(files / SDIST, "fakepkg-1.0"), tmp_path / "cache", index=url)
    assert path.read_bytes() == (files / SDIST).read_bytes()
    assert asked == ["/simple/fakepkg/", f"/files/{SDIST}"]


def test_a_member_unpacked_once_asks_nothing_again(tmp_path, index):
    url, files, asked = index
    cache = tmp_path / "cache"
    tree(pin(files / SDIST, "fakepkg-1.0"), ["include/fake/comm"], cache, index=url)
    assert asked == ["/simple/fakepkg/", f"/files/{SDIST}"]
    (cache / "archives" / SDIST).unlink()  # as on a GPU machine given the trees alone
    tree(pin(files / SDIST, "fakepkg-1.0"), ["include/fake/comm/"], cache, index=url)
    assert len(asked) == 2


def test_a_sha256_that_differs_is_refused_and_never_kept(tmp_path, index):
    url, files, _ = index
    with pytest.raises(FetchError) as caught:
        archive(pin(files / SDIST, "fakepkg-1.0", "1" * 64), tmp_path / "cache", index=url)
    found = hashlib.sha256((files / SDIST).read_bytes()).hexdigest()
    assert str(caught.value) == (
        f"t.toml: release '1.0': sha256: {SDIST} has {found}, the pin is {'1' * 64}:"
        " not the pinned release"
    )
    assert list((tmp_path / "cache/archives").iterdir()) == []


def test_a_file_the_registry_does_not_list_is_refused(tmp_path, index):
    url, _, _ = index
    absent = Pin(
        "fakepkg", "9.9", "fakepkg-9.9.tar.gz", "0" * 64, "fakepkg-9.9", "t.toml: release '9.9'"
    )
    with pytest.raises(FetchError) as caught:
        archive(absent, tmp_path / "cache", index=url)
    assert str(caught.value) == (
        "t.toml: release '9.9': file: the registry lists no fakepkg-9.9.tar.gz for fakepkg"
    )


def test_a_member_the_file_lacks_is_refused_unless_missing_is_ok(tmp_path, index):
    url, files, _ = index
    cache, sdist = tmp_path / "cache", pin(files / SDIST, "fakepkg-1.0")
    with pytest.raises(FetchError) as caught:
        tree(sdist, ["include/none.h"], cache, index=url)
    assert str(caught.value) == (
        f"t.toml: release '1.0': members: {SDIST} has no member fakepkg-1.0/include/none.h"
    )
    folder = tree(sdist, ["include/none.h", "include/fake/other.h"], cache, missing_ok=True,
                  index=url)
    assert [p.name for p in folder.rglob("*") if p.is_file()] == ["other.h"]


def test_an_unreachable_registry_is_said_plainly(tmp_path):
    nowhere = "http://127.0.0.1:9/simple/"  # nothing listens on the discard port
    absent = Pin("fakepkg", "1.0", SDIST, "0" * 64, "fakepkg-1.0", "t.toml: release '1.0'")
    with pytest.raises(FetchError) as caught:
        archive(absent, tmp_path / "cache", index=nowhere)
    assert str(caught.value) == (
        f"fakepkg {SDIST}: the registry cannot be reached at {nowhere}fakepkg/"
        " ([Errno 111] Connection refused)"
    )


def test_a_folder_of_release_files_stands_in_for_the_index(tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    wheel = pin(make_wheel(links), "fakepkg/data")
    folder = tree(wheel, ["include/fake/other.h"], tmp_path / "cache", find_links=links)
    assert (folder / "include/fake/other.h").read_bytes() == b"// other\n"
    with pytest.raises(FetchError) as caught:
        archive(pin(make_sdist(tmp_path), "fakepkg-1.0"), tmp_path / "cache", find_links=links)
    assert str(caught.value) == f"--find-links {links}: no {SDIST}"
