"""Members of pinned release files of a package registry (wheels and sdists
alike: the file the registry's index lists, never built), fetched once,
checked against their sha256 and unpacked member by member into a cache, so
that a machine with no network runs from the cache alone (docs/review.md,
"Foreign corpora"). tools/targets/fetch.py makes a target's one workspace
through pip, which takes wheels only; a foreign corpus needs single files of
older releases, some only sdists, and a cache a GPU machine can be given.

    .targets/archives/<file>                 the release file (not carried)
    .targets/trees/<file>/<member>           its members, the prefix taken off

The cache is a folder of the repository that git ignores (`.targets/`); a GPU
machine gets `.targets/trees` carried with the working tree.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import urllib.request
import zipfile
from pathlib import Path

CACHE = ".targets"
INDEX = "https://pypi.org/simple/{package}/"  # PEP 691: the index as JSON
TIMEOUT_S = 60


class FetchError(ValueError):
    """A release that cannot be had: the registry unreachable, a digest that
    differs, a member the archive lacks."""


def _url(package: str, file: str) -> str:
    request = urllib.request.Request(
        INDEX.format(package=package), headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            files = json.load(answer)["files"]
    except (OSError, ValueError, KeyError) as error:
        raise FetchError(f"{package}: the registry cannot be reached ({error})") from None
    for entry in files:
        if entry.get("filename") == file:
            return entry["url"]
    raise FetchError(f"{package}: the registry lists no file {file}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive(package: str, file: str, sha256: str, cache: Path) -> Path:
    """The release file, from the cache or the registry, its sha256 checked."""
    path = Path(cache) / "archives" / file
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(path.suffix + ".part")
        try:
            with urllib.request.urlopen(_url(package, file), timeout=TIMEOUT_S) as answer:
                with partial.open("wb") as out:
                    shutil.copyfileobj(answer, out)
        except OSError as error:
            raise FetchError(f"{package} {file}: cannot be downloaded ({error})") from None
        partial.replace(path)
    found = _sha256(path)
    if found != sha256:
        path.unlink()
        raise FetchError(f"{package} {file}: sha256 {found}, the pin says {sha256}")
    return path


def _names(path: Path) -> list[str]:
    """The archive's regular files (a wheel is a zip, an sdist a tar)."""
    if path.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as zipped:
            return [info.filename for info in zipped.infolist() if not info.is_dir()]
    with tarfile.open(path) as tarred:
        return [member.name for member in tarred.getmembers() if member.isfile()]


def _extract(path: Path, names: list[str], prefix: str, into: Path) -> None:
    opener = zipfile.ZipFile if path.name.endswith((".whl", ".zip")) else tarfile.open
    with opener(path) as packed:
        for name in names:
            target = into / name[len(prefix) + 1 :]
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(packed, zipfile.ZipFile):
                data = packed.read(name)
            else:
                data = packed.extractfile(name).read()
            target.write_bytes(data)


def members(
    package: str,
    file: str,
    sha256: str,
    prefix: str,
    wanted: list[str],
    cache: Path,
    *,
    missing_ok: bool = False,
) -> Path:
    """The folder holding `wanted` (paths under `prefix` in the release file:
    a file or a folder), each unpacked once; the registry is asked only when
    one is not in the cache yet. `missing_ok`: a member the file lacks (an
    older release) is left out, not an error."""
    tree = Path(cache) / "trees" / file
    stamps = tree.parent / f"{file}.members"
    done = set(stamps.read_text().splitlines()) if stamps.is_file() else set()
    missing = [member for member in wanted if member not in done]
    if not missing:
        return tree
    path = archive(package, file, sha256, cache)
    names = _names(path)
    for member in missing:
        under = f"{prefix}/{member}"
        chosen = [n for n in names if n == under or n.startswith(under + "/")]
        if not chosen and not missing_ok:
            raise FetchError(f"{package} {file}: no member {under}")
        _extract(path, chosen, prefix, tree)
        done.add(member)
    stamps.write_text("".join(f"{member}\n" for member in sorted(done)))
    return tree
