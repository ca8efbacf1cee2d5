"""Bug commits made from a package's released versions: a real fix, found by
diffing the release that had the bug with the one that fixed it, undone on a
base release (docs/review.md, "Foreign corpora").

A foreign corpus (a TOML file) names versions and hunks, never the code:

    package = "<the registry's name>"
    catalog = "catalogs/<target>.toml"   # the target's catalog, in this repository
    harness = ["<path>", ...]           # this repository's files the catalog runs
    members = ["include", ...]          # the base release's folders the workspace holds

    [release."<version>"]
    file = "<the registry's file name>"
    sha256 = "<its digest>"
    prefix = "<the folder in the archive that holds the members>"
    moved = { "<member>" = "<where this file holds it>" }   # optional

    [[bug]]
    name, class, site (or "" with `why`), catch, why, title, upstream,
    buggy, fixed, base (versions), file (under the prefix), hunks = [n, ...]

The hunks are those of the unified diff (difflib, DIFF_CONTEXT lines of
context) of `file` from `buggy` to `fixed`, numbered from 1 in its order; the
bug is the base's `file` with exactly those hunks undone. A hunk's fixed
lines (context and added) must be found exactly once in the base, at any
line (a later release moves code), never fuzzily: else the bug cannot be
made, and the error names the bug, the file and the hunk.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import read_toml
from faults.corpus.bugs import Bug, BugClass, Catch, CorpusError, word_of
from hostio import SHA256, Pin

DIFF_CONTEXT = 3  # difflib's and diff -u's: the hunk numbers depend on it
TOP_KEYS = ("package", "catalog", "harness", "members")
RELEASE_KEYS = ("file", "sha256", "prefix")
# Optional: members this release's file holds elsewhere (an sdist's 3rdparty/
# folder where a wheel has the folder at the top), taken from there.
RELEASE_MOVED = "moved"
BUG_KEYS = (
    "name",
    "class",
    "site",
    "catch",
    "why",
    "title",
    "upstream",
    "buggy",
    "fixed",
    "base",
    "file",
    "hunks",
)
# A real fix that no bug commit can undo alone: said in the report, never faked.
NOT_MADE_KEYS = ("name", "class", "buggy", "fixed", "file", "upstream", "why")


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff: its lines (ends kept) in the buggy file
    (context and removed) and in the fixed one (context and added)."""

    number: int
    buggy: tuple[str, ...]
    fixed: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    """One released file of the package (its pin), and the members it holds
    at another path (member, where)."""

    pin: Pin
    moved: tuple[tuple[str, str], ...] = ()

    @property
    def version(self) -> str:
        return self.pin.version

    def holds(self, member: str) -> str:
        """Where this release's file holds `member` (under the prefix): a
        moved member, or a path under one, at its moved path."""
        for path, where in self.moved:
            if member == path or member.startswith(path + "/"):
                return where + member[len(path) :]
        return member


@dataclass(frozen=True)
class ReleaseBug:
    """A corpus bug and how to make it: `file` of `base` with `hunks` of the
    diff buggy..fixed undone."""

    bug: Bug
    buggy: Release
    fixed: Release
    base: Release
    file: str
    hunks: tuple[int, ...]


@dataclass(frozen=True)
class ReleaseCorpus:
    path: Path
    package: str
    catalog: str
    harness: tuple[str, ...]
    members: tuple[str, ...]
    bugs: list[ReleaseBug]
    not_made: tuple[dict, ...] = ()  # NOT_MADE_KEYS each


def diff_hunks(buggy: str, fixed: str) -> list[Hunk]:
    """The hunks of the unified diff buggy -> fixed, as `diff -u` and difflib
    group them (DIFF_CONTEXT lines of context)."""
    before, after = buggy.splitlines(keepends=True), fixed.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    hunks = []
    for number, group in enumerate(matcher.get_grouped_opcodes(DIFF_CONTEXT), 1):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        hunks.append(Hunk(number, tuple(before[i1:i2]), tuple(after[j1:j2])))
    return hunks


def _where(lines: list[str], block: tuple[str, ...]) -> list[int]:
    """Every line index at which `block` starts in `lines`."""
    width = len(block)
    return [i for i in range(len(lines) - width + 1) if tuple(lines[i : i + width]) == block]


def revert_hunks(base: str, buggy: str, fixed: str, numbers: tuple[int, ...], what: str) -> str:
    """`base` with the hunks `numbers` of buggy -> fixed undone: each hunk's
    fixed lines, found exactly once in `base`, become its buggy lines.
    `what` names the bug and file in an error ("bug B: include/x.cuh")."""
    hunks = diff_hunks(buggy, fixed)
    lines = base.splitlines(keepends=True)
    spans = []
    for number in numbers:
        if not 1 <= number <= len(hunks):
            raise CorpusError(f"{what}: hunk {number}: the diff has {len(hunks)} hunks")
        hunk = hunks[number - 1]
        found = _where(lines, hunk.fixed)
        if len(found) != 1:
            where = "not found" if not found else f"found {len(found)} times"
            raise CorpusError(f"{what}: hunk {number}: its fixed lines are {where} in the base")
        spans.append((found[0], found[0] + len(hunk.fixed), hunk))
    spans.sort(key=lambda span: span[0])
    for (_, end, hunk), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            raise CorpusError(f"{what}: hunks {hunk.number} and {other.number} overlap in the base")
    for start, end, hunk in reversed(spans):
        lines[start:end] = hunk.buggy
    return "".join(lines)


def _strings(where: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CorpusError(f"{where}: {key} must be a list of paths")
    return tuple(value)


def _release(path: Path, package: str, version: str, table: object) -> Release:
    where = f"{path}: release {version!r}"
    if not isinstance(table, dict):
        raise CorpusError(f"{where}: not a table")
    for key in RELEASE_KEYS:
        if not isinstance(table.get(key), str) or not table[key]:
            raise CorpusError(f"{where}: {key} missing or not a string")
    unknown = sorted(set(table) - {*RELEASE_KEYS, RELEASE_MOVED})
    if unknown:
        raise CorpusError(f"{where}: unknown key {unknown[0]}")
    if not SHA256.match(table["sha256"]):
        raise CorpusError(f"{where}: sha256 is not 64 lowercase hex digits")
    moved = table.get(RELEASE_MOVED, {})
    if not isinstance(moved, dict) or not all(
        isinstance(path, str) and path for pair in moved.items() for path in pair
    ):
        raise CorpusError(f"{where}: {RELEASE_MOVED} must map members to paths")
    pairs = tuple((member.strip("/"), path.strip("/")) for member, path in moved.items())
    prefix = table["prefix"].strip("/")
    return Release(Pin(package, version, table["file"], table["sha256"], prefix, where), pairs)


def _bug(path: Path, number: int, entry: object, releases: dict[str, Release]) -> ReleaseBug:
    name = entry.get("name") if isinstance(entry, dict) else None
    where = f"{path}: bug {name}" if isinstance(name, str) else f"{path}: bug #{number}"
    if not isinstance(entry, dict):
        raise CorpusError(f"{where}: not a table")
    for key in BUG_KEYS:
        if key not in entry:
            raise CorpusError(f"{where}: lacks {key}")
        kind = list if key == "hunks" else str
        if not isinstance(entry[key], kind):
            raise CorpusError(f"{where}: {key} must be a {kind.__name__}")
    unknown = sorted(set(entry) - set(BUG_KEYS))
    if unknown:
        raise CorpusError(f"{where}: unknown key {unknown[0]}")
    hunks = entry["hunks"]
    if not hunks or not all(type(h) is int and h > 0 for h in hunks):
        raise CorpusError(f"{where}: hunks must be hunk numbers from 1")
    for key in ("buggy", "fixed", "base"):
        if entry[key] not in releases:
            raise CorpusError(f"{where}: {key} {entry[key]!r} has no [release] entry")
    if not entry["why"].strip():
        raise CorpusError(f"{where}: why is empty (say why the catch is expected)")
    bug = Bug(
        name,
        path,
        word_of(BugClass, entry["class"], where, "class"),
        entry["site"],
        word_of(Catch, entry["catch"], where, "catch"),
        entry["title"],
        why=entry["why"],
        upstream=entry["upstream"],
    )
    pick = {key: releases[entry[key]] for key in ("buggy", "fixed", "base")}
    # The bug's file is read and written at its own path in every release.
    moved = next((r for r in pick.values() if r.holds(entry["file"]) != entry["file"]), None)
    if moved is not None:
        raise CorpusError(
            f"{where}: file {entry['file']!r} is moved in release {moved.version!r};"
            " a bug's file must lie at its own path"
        )
    return ReleaseBug(bug, **pick, file=entry["file"], hunks=tuple(hunks))


def _not_made(path: Path, entry: object, releases: dict[str, Release]) -> dict:
    name = entry.get("name") if isinstance(entry, dict) else None
    where = f"{path}: not_made {name}"
    if not isinstance(entry, dict) or set(entry) != set(NOT_MADE_KEYS):
        raise CorpusError(f"{where}: needs exactly the keys {', '.join(NOT_MADE_KEYS)}")
    word_of(BugClass, entry["class"], where, "class")
    for key in ("buggy", "fixed"):
        if entry[key] not in releases:
            raise CorpusError(f"{where}: {key} {entry[key]!r} has no [release] entry")
    return {key: entry[key] for key in NOT_MADE_KEYS}


def load_release_corpus(path: Path, only: str | None = None) -> ReleaseCorpus:
    """The corpus at `path`, every entry checked (one line naming the bug
    and key at fault); `only`: a regular expression the names match whole."""
    path = Path(path)
    data = read_toml(path, lambda error: CorpusError(f"{path}: cannot be read: {error}"))
    for key in TOP_KEYS:
        if key not in data:
            raise CorpusError(f"{path}: lacks {key}")
    tables = data.get("release") or {}
    if not isinstance(tables, dict):
        raise CorpusError(f"{path}: release must be a table of [release.\"<version>\"] tables")
    releases = {v: _release(path, str(data["package"]), v, t) for v, t in tables.items()}
    entries = data.get("bug") or []
    bugs = [_bug(path, number, entry, releases) for number, entry in enumerate(entries, 1)]
    names = [b.bug.name for b in bugs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CorpusError(f"{path}: bug {twice[0]}: named twice")
    try:
        pattern = re.compile(only) if only else None
    except re.error as error:
        raise CorpusError(f"--only {only!r}: not a regular expression ({error})") from None
    not_made = tuple(_not_made(path, entry, releases) for entry in data.get("not_made") or [])
    chosen = [b for b in bugs if pattern is None or pattern.fullmatch(b.bug.name)]
    if not chosen:
        raise CorpusError(f"{path}: no bug" + (f" matches {only!r}" if only else ""))
    return ReleaseCorpus(
        path,
        str(data["package"]),
        str(data["catalog"]),
        _strings(str(path), "harness", data["harness"]),
        _strings(str(path), "members", data["members"]),
        chosen,
        not_made,
    )


def make_bug_text(bug: ReleaseBug, texts: dict[str, str]) -> str:
    """The bug's file as the bug commit holds it; `texts`: the file in the
    buggy, fixed and base releases, by version."""
    what = f"bug {bug.bug.name}: {bug.file}"
    base = texts[bug.base.version]
    return revert_hunks(base, texts[bug.buggy.version], texts[bug.fixed.version], bug.hunks, what)


def corpus_files(corpus: ReleaseCorpus, root: Path) -> Path:
    """The catalog the corpus names, under `root`, with its harness files
    there too (one line naming the one missing); the catalog's path."""
    catalog = root / corpus.catalog
    if not catalog.is_file():
        raise CorpusError(f"{corpus.path}: catalog {corpus.catalog}: not a file")
    for name in corpus.harness:
        if not (root / name).is_file():
            raise CorpusError(f"{corpus.path}: harness {name}: not a file")
    return catalog


def corpus_digest(corpus: ReleaseCorpus, catalog_path: Path, root: Path) -> str:
    """What makes every bug tree of `corpus`: its file (the releases, their
    sha256 and the hunks), the catalog and our harness; a corpus run in
    shards merges into one document while these stay the same."""
    digest = hashlib.sha256()
    for path in (corpus.path, catalog_path, *(root / name for name in corpus.harness)):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()
