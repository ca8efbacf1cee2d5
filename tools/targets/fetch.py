"""Fetch a target's sources from the package registry into a workspace
(docs/targets.md, "Fetching a workspace"):

    python -m tools.targets.fetch TARGET --into DIR [--find-links DIR] [--index URL]

TARGET is a release table (a `release.toml`, or the name of a folder under
tools/targets/ holding one): a package, its version, the one release file
to take (a wheel or an sdist) and its sha256, the folder in it that holds the
members, the members (paths under that folder: a file, or a folder and all
under it), and our harness files beside the table (none yet: a workspace to
onboard from). The members come from the
release cache (tools/targets/registry.py: `.targets/` in the repository,
sha256-checked, a second fetch reads no network). DIR then holds the members,
our harness under harness/, and is a git repository of one commit, so a
review can diff refs of it. The other project's code is never copied into
this one: only the table names it, and DIR is refused where a commit of this
repository could take it.

Each refusal is one line (exit 2): the registry unreachable, no such
release file, a sha256 that differs, a member that is not in the file, a DIR
that is not empty.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import read_toml
from hostio import SHA256, OneLineParser, Pin, UsageError, entry_point, folder_problem
from tools.targets.registry import CACHE, INDEX, FetchError, check_untracked, tree

TARGETS = Path(__file__).resolve().parent  # tools/targets/: a folder per target
TABLE_NAME = "release.toml"
HARNESS_FOLDER = "harness"  # where our harness files land in a workspace
TABLE_KEYS = ("package", "version", "file", "sha256", "prefix", "members", "harness")


@dataclass(frozen=True)
class Release:
    """One release table: the file to fetch and what of it to keep."""

    path: Path  # the table
    pin: Pin  # the release file ("flashinfer/data" the folder holding the members)
    members: tuple[str, ...]  # paths under the prefix: a file, or a folder
    harness: tuple[str, ...]  # our files, relative to the table's folder


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
    for key in ("package", "version", "file", "sha256", "prefix"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise _table_error(path, key, f"a non-empty string, got {raw.get(key)!r}")
    if not SHA256.match(raw["sha256"]):
        raise _table_error(path, "sha256", f"64 lowercase hex digits, got {raw['sha256']!r}")
    # No harness yet: a workspace to onboard from (`init`), the harness written after.
    harness = _strings(path, raw, "harness") if "harness" in raw else ()
    for name in harness:
        if not (path.parent / name).is_file():
            raise _table_error(path, "harness", f"{name}: no such file beside the table")
    fields = {key: raw[key] for key in ("package", "version", "file", "sha256")}
    pin = Pin(**fields, prefix=raw["prefix"].strip("/"), where=str(path))
    return Release(path, pin, members=_strings(path, raw, "members"), harness=harness)


# ----------------------------------------------------------------- workspace
def check_into(into: Path) -> None:
    """`into` is a folder to make, or an empty one, where no commit of this
    repository could take it."""
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise FetchError(f"--into {into}: exists and is not an empty folder")
    check_untracked(into, "--into")
    problem = folder_problem(into)
    if problem is not None:
        raise FetchError(f"--into {into}: {problem}")


def fill(
    into: Path, members_tree: Path, members: Iterable[str], harness: Iterable[Path], where=str
) -> None:
    """`into` given the members (paths under `members_tree`: files or folders;
    `where(member)`: the path that holds it there) and our harness files
    under harness/: a workspace's first commit."""
    for member in members:
        source = members_tree / where(member)
        if source.is_dir():
            shutil.copytree(source, into / member, dirs_exist_ok=True)
        else:
            (into / member).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / member)
    for path in harness:
        (into / HARNESS_FOLDER).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, into / HARNESS_FOLDER / path.name)
        print(f"fetch: our {path.name} -> {HARNESS_FOLDER}/{path.name}")


def commit_workspace(release: Release, into: Path) -> str:
    """`into` made a git repository of one commit holding everything in it."""
    import git

    repo = git.Repo.init(into)
    with repo.config_writer() as config:  # no user's identity is needed or used
        config.set_value("user", "name", "faults fetch")
        config.set_value("user", "email", "faults-fetch@localhost")
    repo.git.add("--all")
    pin = release.pin
    ours = ", and our harness" if release.harness else ""
    message = f"{pin.spec}: {pin.file} (sha256 {pin.sha256}), members of {release.path.name}{ours}\n"
    return repo.index.commit(message).hexsha


def make_workspace(release: Release, into: Path, find_links: Path | None = None,
                   cache: Path = CACHE, index: str = INDEX) -> str:
    """The workspace of `release` in `into`: its members, our harness, one
    commit. It is made beside `into` and renamed, so a fetch that fails
    leaves no half workspace."""
    check_into(into)
    members = tree(release.pin, release.members, cache, find_links=find_links, index=index)
    into.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into.parent, prefix=f".{into.name}.") as folder:
        made = Path(folder) / into.name
        fill(made, members, release.members, [release.path.parent / n for n in release.harness])
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
    top.add_argument("--index", default=INDEX, help=f"the registry's index (default {INDEX})")
    return top


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.find_links is not None and not args.find_links.is_dir():
            raise FetchError(f"--find-links {args.find_links}: not a directory")
        make_workspace(read_release(args.target), args.into.resolve(), args.find_links,
                       index=args.index)
    except UsageError as error:
        print(f"python -m tools.targets.fetch: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
