"""Scratch trees: the only place faults are applied. A scratch tree is a copy
of the user's working tree (tracked and untracked-but-not-ignored files) or an
archive of a git ref; the user's tree is never written, and a guard checks its
digest before and after. A tree a target's faults patch holds its anchored
sites written in as comment sites (target_scratch), so every stage after it
reads an annotated tree, whatever its patches do to the anchors' text."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import FaultsError
from faults.catalog.model import Target
from faults.judge.verdict import ContractFlags, Judgement
from faults.generate.annotate import annotate
from invariants.sync.sites import SourceTree

SKIP_PARTS = {".git", "__pycache__", ".jit", ".hypothesis", ".ruff_cache", ".pytest_cache"}


class UserTreeChanged(RuntimeError):
    """The user's sources changed while the engine ran: it must never write them."""


def tree_digest(root: Path) -> str:
    """sha256 over every file under `root`: sorted relative path, NUL, bytes, NUL
    (the same rule afdep.jit.source_digest uses, so logs can be matched)."""
    digest = hashlib.sha256()
    root = Path(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _git_files(root: Path) -> list[str] | None:
    try:
        import git

        repo = git.Repo(root, search_parent_directories=False)
    except Exception:  # not a repository (or no gitpython): copy the directory
        return None
    listed = repo.git.ls_files("--cached", "--others", "--exclude-standard", "-z")
    return [name for name in listed.split("\0") if name]


def copy_working_tree(root: Path, dest: Path) -> Path:
    """Copy `root` into `dest` (absent, or an empty folder)."""
    root, dest = Path(root), Path(dest)
    names = _git_files(root)
    if names is None:
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*SKIP_PARTS), dirs_exist_ok=True)
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = root / name
        if not source.is_file() or SKIP_PARTS.intersection(Path(name).parts):
            continue  # deleted in the working tree, or a cache
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def archive_ref(root: Path, ref: str, dest: Path) -> Path:
    """Extract the tree of git `ref` (a commit, branch or tag) into `dest`."""
    import git

    repo = git.Repo(root, search_parent_directories=True)
    # The root may lie below the repository's top: archive that subtree only.
    below = Path(root).resolve().relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
    buffer = io.BytesIO()
    repo.archive(buffer, treeish=ref if below == "." else f"{ref}:{below}", format="tar")
    buffer.seek(0)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=buffer) as archive:
        archive.extractall(dest, filter="data")
    return dest


class ScratchExists(FaultsError):
    """A scratch tree's folder already holds something: a reused --workdir."""


def make_scratch(root: Path, dest: Path, *, ref: str | None = None) -> Path:
    """A scratch tree at `dest`, which must not hold anything yet: a folder
    left by an earlier command is never merged into, nor deleted."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ScratchExists(f"{dest}: already exists; give a fresh --workdir")
    return archive_ref(root, ref, dest) if ref else copy_working_tree(root, dest)


def target_scratch(
    root: Path, dest: Path, target: Target, *, ref: str | None = None
) -> SourceTree:
    """A scratch tree (make_scratch) for `target`'s faults: its anchored
    sites written in as comment sites (annotate); `target.annotated()` reads
    it. Its sources, parsed once for every stage after (each write through it)."""
    sources = SourceTree(make_scratch(root, dest, ref=ref) / target.sources)
    if target.anchors:
        annotate(sources, target.anchors)
    return sources


class UserTreeGuard:
    """`with UserTreeGuard(sources): ...` fails loudly if `sources` changed."""

    def __init__(self, sources: Path) -> None:
        self.sources = Path(sources)
        self.before = ""

    def __enter__(self) -> UserTreeGuard:
        self.before = tree_digest(self.sources)
        return self

    def __exit__(self, *exc) -> None:
        after = tree_digest(self.sources)
        if after != self.before and exc[0] is None:
            raise UserTreeChanged(
                f"{self.sources} changed during the run: digest {self.before[:12]} -> {after[:12]}"
            )


@dataclass(frozen=True)
class Prepared:
    """A scratch tree with one fault (or none) applied and built, made of
    what its stages gave (Engine._prepare)."""

    label: str
    tree: Path
    sources: SourceTree  # the tree's sources as applied, parsed once
    digest: str = ""
    apply_s: float = 0.0
    build_s: float = 0.0
    error: Judgement | None = None
    # ERASED when the compiler erased the fault (faults/pipeline/erasure.py): then it is not run.
    erased: Judgement | None = None
    sass_s: float = 0.0
    erased_unknown: str = ""  # why the erasure check could not decide, if so
    contract: ContractFlags | None = None  # the static contract of this tree, asked once

    @property
    def guards(self) -> dict[str, str | None]:
        """Each site's guarded site, for a survivor's hint."""
        return self.sources.guards()

    @property
    def decided(self) -> Judgement | None:
        """The verdict of every config when the tree is not run: it did not
        apply or build, or the compiler erased the fault."""
        return self.error or self.erased
