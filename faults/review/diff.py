"""What the review reads from git: the refs it is given, checked before any
work, and the lines the change adds or alters under the catalog's sources."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog.errors import FaultsError

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


class ReviewError(FaultsError):
    """A review that cannot start: not a git repository, or a ref git does not know."""


def git_repo(root: Path):
    """The repository holding `root` (from any of its subdirectories)."""
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ReviewError(f"{root} is not inside a git repository") from None


def check_refs(root: Path, base: str, change: str | None) -> None:
    """Both refs name commits, and not one commit: said in one line before any work."""
    import git

    repo = git_repo(root)
    commits = []
    for argument, ref in (("BASE", base), ("CHANGE", change)):
        if ref is None:
            continue
        try:
            commits.append(repo.commit(ref))
        except (git.BadName, ValueError):
            raise ReviewError(f"unknown git ref {ref!r} given as {argument}") from None
    if len(commits) == 2 and commits[0] == commits[1]:
        raise ReviewError(f"BASE {base} and CHANGE {change} are one commit: nothing to review")


def in_repo(path: Path, root: Path) -> Path | None:
    """`path` from the repository's root, or None for a file outside it."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return None


def top_prefix(root: Path) -> Path:
    """`root` relative to its repository's top ("." when it is the top): git
    and code-review tools name paths from the top."""
    repo = git_repo(root)
    return Path(root).resolve().relative_to(Path(repo.working_tree_dir).resolve())


def changed_lines(
    repo_root: Path, base: str, change: str | None, sources: str
) -> dict[str, set[int]]:
    """Per file under `sources`: the CHANGE-side lines the diff adds or alters;
    a pure deletion marks the line before it (git's `+N,0`), so the site
    around it counts."""
    repo = git_repo(repo_root)
    sources = str(top_prefix(repo_root) / sources)
    revisions = [base] + ([change] if change else [])
    names = repo.git.diff(*revisions, "--name-only", "--", sources).splitlines()
    changed: dict[str, set[int]] = {}
    for name in names:
        text = repo.git.diff(*revisions, "--unified=0", "--", name)
        lines: set[int] = set()
        for match in HUNK.finditer(text):
            start, count = int(match[1]), int(match[2] or 1)
            lines.update(range(start, start + count) if count else {max(start, 1)})
        changed[str(Path(name).relative_to(sources))] = lines
    return changed
