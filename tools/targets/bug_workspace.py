"""A foreign corpus's bug made where its review runs (docs/review.md,
"Foreign corpora"): a git repository whose first commit is the base
release's members, from the release cache (tools/targets/registry.py), and
our harness, laid out as a fetched workspace is (tools/targets/fetch.py), and
whose second is the bug's file with its hunks undone
(faults/corpus/releases.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

from faults.corpus.bases import BaseSites, base_sites
from faults.corpus.bugs import AUTHOR, BugCommit
from faults.corpus.releases import ReleaseBug, ReleaseCorpus, make_bug_text
from tools.targets import registry
from tools.targets.fetch import fill


def _base_files(
    corpus: ReleaseCorpus, bug: ReleaseBug, cache: Path
) -> tuple[Path, list[str], str]:
    """The base release's tree, the members the workspace takes from it, and
    the bug's file as the bug commit holds it (made before any folder is:
    a refusal is one line)."""
    # The harness's members an older base lacks are left out (its build fails
    # there, said by the review); the bug's own file must be there.
    held = [bug.base.holds(member) for member in corpus.members]
    registry.tree(bug.base.pin, held, cache, missing_ok=True)
    base_tree = registry.tree(bug.base.pin, [bug.file], cache)
    wanted = dict.fromkeys([*corpus.members, bug.file])
    members = [m for m in wanted if (base_tree / bug.base.holds(m)).exists()]
    texts = {bug.base.version: (base_tree / bug.file).read_text()}
    for release in (bug.buggy, bug.fixed):
        release_tree = registry.tree(release.pin, [bug.file], cache)
        texts.setdefault(release.version, (release_tree / bug.file).read_text())
    return base_tree, members, make_bug_text(bug, texts)


def workspace(
    corpus: ReleaseCorpus,
    bug: ReleaseBug,
    root: Path,
    into: Path,
    cache: Path,
    on_base: Callable[[Path], BaseSites] | None = None,
) -> tuple[BugCommit, BaseSites | None]:
    """`into` a git repository: its first commit the base release's members
    and our harness, its second the bug's file with its hunks undone; the
    BugCommit, and what `on_base(into)` says of the first commit's tree."""
    import git

    base_tree, members, buggy_text = _base_files(corpus, bug, cache)
    shutil.rmtree(into, ignore_errors=True)  # an earlier (perhaps cut) run's scratch
    fill(into, base_tree, members, [root / name for name in corpus.harness], bug.base.holds)
    repo = git.Repo.init(into)
    actor = git.Actor(*AUTHOR)
    repo.git.add("--all")
    pin = bug.base.pin
    title = f"{pin.package} {pin.version}: {pin.file} (sha256 {pin.sha256})"
    base = repo.index.commit(title, author=actor, committer=actor).hexsha
    said = on_base(into) if on_base is not None else None
    (into / bug.file).write_text(buggy_text)
    repo.git.add("--all")
    message = f"{bug.bug.bug_class}: {bug.bug.title}"
    head = repo.index.commit(message, author=actor, committer=actor).hexsha
    return BugCommit(bug.bug, into, base, head), said


def made_bugs(
    corpus: ReleaseCorpus, root: Path, into: Path, cache: Path, catalog_path: Path
) -> list[tuple[BugCommit, BaseSites]]:
    """Every bug of `corpus` made under `into/<bug>/clone` and its site
    checked on its base (BaseSites), before any review."""
    return [
        workspace(
            corpus,
            bug,
            root,
            into / bug.bug.name / "clone",
            cache,
            partial(base_sites, corpus, bug, catalog_path),
        )
        for bug in corpus.bugs
    ]
