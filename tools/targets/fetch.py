"""Fetch a target's sources from the package registry into a workspace
(docs/targets.md, "Fetching a workspace"):

    python -m tools.targets.fetch TARGET --into DIR [--find-links DIR]

TARGET is a release table (a `release.toml`, or the name of a folder under
tools/targets/ holding one): a package, its version, the one release file
to take and its sha256, the members to extract (globs: `*` stays inside a
folder, `**` crosses folders), the prefix they lose on landing, and our
harness files beside the table. The file comes through pip's own client and
configured index (`pip download --no-deps --only-binary=:all:`), is checked
against the sha256, and is kept under ~/.cache/faults/fetch/<sha256>/, so a
second fetch reads no network. DIR then holds the members, our harness
under harness/, and is a git repository of one commit, so a review can
diff refs of it. The other project's code is never copied into this one:
only the table names it.

Each refusal is one line (exit 2): the registry unreachable, no such
release file, a sha256 that differs, a member that is not in the file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from faults.catalog.errors import read_toml
from hostio import OneLineParser, UsageError, entry_point, folder_problem

TARGETS = Path(__file__).resolve().parent  # tools/targets/: a folder per target
TABLE_NAME = "release.toml"
HARNESS_FOLDER = "harness"  # where our harness files land in a workspace
TABLE_KEYS = ("package", "version", "file", "sha256", "strip", "members", "harness")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What pip says when it reaches no index at all (urllib3, requests, socket errors).
UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Max retries exceeded|Name or service not known"
    r"|Temporary failure in name resolution|Network is unreachable|Connection refused"
    r"|ConnectTimeoutError|ReadTimeoutError|ProxyError|SSLError|Could not fetch URL"
)
NO_RELEASE = re.compile(r"No matching distribution found|Could not find a version that satisfies")
PIP_TIMEOUT_S = 900  # ~100 MB wheels on a slow mirror


class FetchError(UsageError):
    """A fetch that cannot be done: one line naming the table, file or member at fault."""


@dataclass(frozen=True)
class Release:
    """One release table: the file to fetch and what of it to keep."""

    path: Path  # the table
    package: str
    version: str
    file: str  # the release file's name, as the registry lists it
    sha256: str
    strip: str  # the prefix a member loses when it lands ("flashinfer/data/")
    members: tuple[str, ...]  # globs over the file's member names
    harness: tuple[str, ...]  # our files, relative to the table's folder

    @property
    def spec(self) -> str:
        return f"{self.package}=={self.version}"


def _table_error(path: Path, key: str, message: str) -> FetchError:
    return FetchError(f"{path}: {key}: {message}")


def _strings(path: Path, raw: dict, key: str) -> tuple[str, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _table_error(path, key, f"a non-empty list of strings, got {value!r}")
    return tuple(value)


def read_release(target: str | Path) -> Release:
    """The release table `target` names (a path, or a folder name under tools/targets/)."""
    path = Path(target)
    if not path.suffix and not path.exists():
        path = TARGETS / str(target) / TABLE_NAME
    elif path.is_dir():
        path = path / TABLE_NAME
    if not path.is_file():
        raise FetchError(f"target {target}: no release table at {path}")
    raw = read_toml(path, lambda error: FetchError(f"{path}: cannot read it: {error}"))
    unknown = sorted(set(raw) - set(TABLE_KEYS))
    if unknown:
        raise _table_error(path, "top level", f"unknown keys {unknown}; known: {TABLE_KEYS}")
    for key in ("package", "version", "file", "sha256"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise _table_error(path, key, f"a non-empty string, got {raw.get(key)!r}")
    if not SHA256.match(raw["sha256"]):
        raise _table_error(path, "sha256", f"64 lowercase hex digits, got {raw['sha256']!r}")
    if not raw["file"].endswith(".whl"):
        raise _table_error(path, "file", f"a wheel (.whl): pip builds an sdist, got {raw['file']}")
    strip = raw.get("strip", "")
    if not isinstance(strip, str):
        raise _table_error(path, "strip", f"a string, got {strip!r}")
    harness = _strings(path, raw, "harness")
    for name in harness:
        if not (path.parent / name).is_file():
            raise _table_error(path, "harness", f"{name}: no such file beside the table")
    fields = {key: raw[key] for key in ("package", "version", "file", "sha256")}
    return Release(path, **fields, strip=strip, members=_strings(path, raw, "members"),
                   harness=harness)


# ------------------------------------------------------------------ download
def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "faults" / "fetch"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pip_download(release: Release, dest: Path, find_links: Path | None) -> Path:
    """The release file, downloaded by pip into `dest`; the registry's silence,
    or a release it does not hold, as a FetchError."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--dest", str(dest)]
    if find_links is not None:  # a folder of release files instead of the index
        command += ["--no-index", "--find-links", str(find_links)]
    command.append(release.spec)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FetchError(f"{release.spec}: pip download took over {PIP_TIMEOUT_S} s") from None
    said = done.stdout + done.stderr
    if done.returncode != 0:
        last = next((ln for ln in reversed(said.splitlines()) if ln.strip()), "no output")
        unreachable = UNREACHABLE.search(said)
        if unreachable:  # pip's last line then blames the release, not the network
            raise FetchError(
                f"{release.spec}: the registry cannot be reached ({unreachable[0]}); "
                "pip download gave up"
            )
        if NO_RELEASE.search(said):
            raise FetchError(f"{release.spec}: the registry has no such release: {last.strip()}")
        raise FetchError(f"{release.spec}: pip download failed: {last.strip()}")
    got = dest / release.file
    if not got.is_file():
        files = sorted(p.name for p in dest.iterdir())
        raise FetchError(f"{release.spec}: pip gave {files}, not the table's file {release.file}")
    return got


def fetch_file(release: Release, find_links: Path | None = None, say=print) -> Path:
    """The release file, from the cache or the registry, its sha256 checked."""
    kept = cache_root() / release.sha256 / release.file
    if kept.is_file():
        say(f"fetch: {release.file} cached at {kept}")
    else:
        say(f"fetch: downloading {release.file} ({release.spec}) with pip")
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent, prefix=".download.") as folder:
            got = pip_download(release, Path(folder), find_links)
            _check_sha256(release, got)
            os.replace(got, kept)
        return kept
    _check_sha256(release, kept)
    return kept


def _check_sha256(release: Release, path: Path) -> None:
    actual = file_sha256(path)
    if actual != release.sha256:
        raise FetchError(
            f"{release.path}: sha256: {release.file} has {actual}, the table pins "
            f"{release.sha256}: not the pinned release"
        )
    print(f"fetch: verified sha256 {actual[:16]}... of {release.file}")


# ------------------------------------------------------------------- extract
def glob_pattern(glob: str) -> re.Pattern[str]:
    """A member glob as a regular expression: `**` any path, `*` and `?` within one name."""
    parts = re.split(r"(\*\*|\*|\?)", glob)
    wild = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wild.get(part, re.escape(part)) for part in parts) + r"\Z")


def chosen_members(release: Release, names: list[str]) -> list[str]:
    """The file's members the globs choose; a glob that chooses none is an error."""
    chosen: dict[str, None] = {}
    for glob in release.members:
        pattern = glob_pattern(glob)
        matched = [name for name in names if pattern.match(name) and not name.endswith("/")]
        if not matched:
            raise FetchError(
                f"{release.path}: members: {glob!r} matches no member of {release.file}"
            )
        chosen.update(dict.fromkeys(matched))
    return list(chosen)


def landing(release: Release, member: str) -> PurePosixPath:
    """Where a member lands in the workspace: its name without the strip prefix."""
    name = member.removeprefix(release.strip) if member.startswith(release.strip) else member
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise FetchError(f"{release.file}: member {member} would land outside the workspace")
    return path


def extract(release: Release, archive: Path, into: Path) -> list[PurePosixPath]:
    """The chosen members written under `into`; their landed paths."""
    with zipfile.ZipFile(archive) as wheel:
        members = chosen_members(release, wheel.namelist())
        landed = []
        for member in members:
            path = landing(release, member)
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            (into / path).write_bytes(wheel.read(member))
            landed.append(path)
    print(f"fetch: extracted {len(landed)} members of {release.file}")
    return landed


# ----------------------------------------------------------------- workspace
def check_into(into: Path) -> None:
    """`into` is a folder to make, or an empty one."""
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise FetchError(f"--into {into}: exists and is not an empty folder")
    problem = folder_problem(into)
    if problem is not None:
        raise FetchError(f"--into {into}: {problem}")


def commit_workspace(release: Release, into: Path) -> str:
    """`into` made a git repository of one commit holding everything in it."""
    import git

    repo = git.Repo.init(into)
    with repo.config_writer() as config:  # no user's identity is needed or used
        config.set_value("user", "name", "faults fetch")
        config.set_value("user", "email", "faults-fetch@localhost")
    repo.git.add("--all")
    message = (
        f"{release.spec}: {release.file} (sha256 {release.sha256}), members of "
        f"{release.path.name}, and our harness\n"
    )
    return repo.index.commit(message).hexsha


def make_workspace(release: Release, into: Path, find_links: Path | None = None) -> str:
    """The workspace of `release` in `into`: its members, our harness, one
    commit. It is made beside `into` and renamed, so a fetch that fails
    leaves no half workspace."""
    check_into(into)
    archive = fetch_file(release, find_links)
    into.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into.parent, prefix=f".{into.name}.") as folder:
        made = Path(folder) / into.name
        extract(release, archive, made)
        (made / HARNESS_FOLDER).mkdir()
        for name in release.harness:
            shutil.copy2(release.path.parent / name, made / HARNESS_FOLDER / Path(name).name)
            print(f"fetch: our {name} -> {HARNESS_FOLDER}/{Path(name).name}")
        commit = commit_workspace(release, made)
        if into.exists():
            into.rmdir()  # empty: check_into said so
        os.replace(made, into)
    print(f"fetch: {into} is a git repository at {commit[:12]}")
    return commit


def parser() -> OneLineParser:
    top = OneLineParser(prog="python -m tools.targets.fetch", description=__doc__.split("\n\n")[0])
    top.add_argument("target", help="a release.toml, or a folder name under tools/targets/")
    top.add_argument("--into", type=Path, required=True, help="the workspace (absent or empty)")
    top.add_argument(
        "--find-links", type=Path, default=None, help="a folder of release files (no index)"
    )
    return top


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.find_links is not None and not args.find_links.is_dir():
            raise FetchError(f"--find-links {args.find_links}: not a directory")
        make_workspace(read_release(args.target), args.into.resolve(), args.find_links)
    except UsageError as error:
        print(f"python -m tools.targets.fetch: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
