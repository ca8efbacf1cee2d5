"""Pinned release files of a package registry, wheels and sdists alike (the
file the registry's index lists, never built), fetched once, checked against
their sha256 and unpacked member by member into one cache of the repository
(docs/targets.md, "The release cache"). The workspace maker
(tools/targets/fetch.py) and a foreign corpus (tools/targets/bug_workspace.py)
both take their members from here.

    .targets/archives/<file>               the release file (never carried)
    .targets/trees/<file>/<member>         its members, the prefix taken off
    .targets/trees/<file>.members          the members unpacked so far

`.targets/` is a folder of the repository that git ignores; a machine with no
network runs from `.targets/trees` alone (carried with the working tree: the
archives are read only for a member not unpacked yet).

Each refusal is one line naming the pin at fault: the registry unreachable,
no such release file, a sha256 that differs, a member the file lacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from hostio import Pin, UsageError, write_bytes, write_text

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".targets"
INDEX = "https://pypi.org/simple/"  # PEP 691: the index answers in JSON when asked
TIMEOUT_S = 60  # per socket operation, not per download


class FetchError(UsageError):
    """A release file or member that cannot be had: one line naming the pin."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reason(error: Exception) -> str:
    reason = getattr(error, "reason", None) or error
    return " ".join(str(reason).split())


def _url(pin: Pin, index: str) -> str:
    """The file's download address, as the index lists it."""
    listing = index.rstrip("/") + f"/{pin.package}/"
    request = urllib.request.Request(
        listing, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            files = json.load(answer)["files"]
    except urllib.error.HTTPError as error:
        raise FetchError(f"{pin.where}: {listing}: the registry answers {error.code}") from None
    except OSError as error:
        raise FetchError(
            f"{pin.package} {pin.file}: the registry cannot be reached at {listing}"
            f" ({_reason(error)})"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise FetchError(f"{pin.where}: {listing}: not a JSON index (PEP 691)") from None
    for entry in files:
        if entry.get("filename") == pin.file:  # PEP 691: `url` may be relative to the listing
            return urllib.parse.urljoin(listing, entry["url"])
    raise FetchError(f"{pin.where}: file: the registry lists no {pin.file} for {pin.package}")


def _download(pin: Pin, partial: Path, find_links: Path | None, index: str) -> None:
    if find_links is not None:  # a folder of release files instead of the index
        if not (find_links / pin.file).is_file():
            raise FetchError(f"--find-links {find_links}: no {pin.file}")
        shutil.copyfile(find_links / pin.file, partial)
        return
    url = _url(pin, index)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer, partial.open("wb") as out:
            shutil.copyfileobj(answer, out)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise FetchError(
            f"{pin.package} {pin.file}: the registry cannot be reached at {url}"
            f" ({_reason(error)})"
        ) from None


def archive(pin: Pin, cache: Path = CACHE, *, find_links: Path | None = None,
            index: str = INDEX) -> Path:
    """The release file, from the cache or the registry, its sha256 checked;
    a file that differs is never kept."""
    path = Path(cache) / "archives" / pin.file
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of this process's own: two processes fetching the same file
        # at once (two test workers) each write theirs, and the last rename wins.
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        _download(pin, partial, find_links, index)
        partial.replace(path)
        print(f"fetch: {pin.file} downloaded to {path}")
    found = file_sha256(path)
    if found != pin.sha256:
        path.unlink()
        raise FetchError(
            f"{pin.where}: sha256: {pin.file} has {found}, the pin is {pin.sha256}:"
            " not the pinned release"
        )
    return path


def _is_zip(path: Path) -> bool:
    return path.name.endswith((".whl", ".zip"))


def _names(path: Path) -> list[str]:
    """The archive's regular files (a wheel is a zip, an sdist a tar)."""
    if _is_zip(path):
        with zipfile.ZipFile(path) as zipped:
            return [info.filename for info in zipped.infolist() if not info.is_dir()]
    with tarfile.open(path) as tarred:
        return [member.name for member in tarred.getmembers() if member.isfile()]


def landing(pin: Pin, name: str) -> PurePosixPath:
    """Where an archive's member lands in a tree: its name without the prefix."""
    path = PurePosixPath(name[len(pin.prefix) + 1 :] if pin.prefix else name)
    if path.is_absolute() or ".." in path.parts:
        raise FetchError(f"{pin.where}: {pin.file}: member {name} would land outside the tree")
    return path


def _extract(pin: Pin, path: Path, names: list[str], into: Path) -> None:
    with (zipfile.ZipFile if _is_zip(path) else tarfile.open)(path) as packed:
        for name in names:
            target = into / landing(pin, name)
            # whole or not at all: another process may read it while this one unpacks
            if isinstance(packed, zipfile.ZipFile):
                write_bytes(target, packed.read(name))
            else:
                write_bytes(target, packed.extractfile(name).read())


def tree(pin: Pin, wanted: list[str] | tuple[str, ...], cache: Path = CACHE, *,
         missing_ok: bool = False, find_links: Path | None = None, index: str = INDEX) -> Path:
    """The folder holding `wanted` (paths under the pin's prefix: a file, or
    a folder and all under it), each unpacked once; the archive is read, and
    the registry asked, only for a member not unpacked yet. `missing_ok`: a
    member the file lacks (an older release) is left out, not an error."""
    folder = Path(cache) / "trees" / pin.file
    stamps = folder.parent / f"{pin.file}.members"
    done = set(stamps.read_text().splitlines()) if stamps.is_file() else set()
    missing = [member.strip("/") for member in wanted if member.strip("/") not in done]
    if not missing:
        return folder
    path = archive(pin, cache, find_links=find_links, index=index)
    names = _names(path)
    for member in missing:
        under = f"{pin.prefix}/{member}" if pin.prefix else member
        chosen = [n for n in names if n == under or n.startswith(under + "/")]
        if not chosen and not missing_ok:
            raise FetchError(f"{pin.where}: members: {pin.file} has no member {under}")
        _extract(pin, path, chosen, folder)
        done.add(member)
    write_text(stamps, "".join(f"{member}\n" for member in sorted(done)))
    print(f"fetch: {len(missing)} members of {pin.file} unpacked under {folder}")
    return folder


def check_untracked(path: Path, what: str) -> None:
    """`path`, where another project's files are to be written, is outside
    this repository or a path of it that git ignores: they never land where a
    commit could take them."""
    path = Path(path).resolve()
    if not path.is_relative_to(REPO):
        return
    ignored = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "-q", str(path.relative_to(REPO))],
        capture_output=True,
    )
    if ignored.returncode == 1:  # 0: ignored; 128: no git repository here
        raise FetchError(
            f"{what} {path}: inside the repository and not ignored by git"
            " (another project's files never land where a commit could take them)"
        )
