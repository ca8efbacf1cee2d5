"""`afdep-faults corpus --target-corpus FILE`: a foreign target's real bugs,
each made at run time from its fetched releases (faults/corpus/releases.py),
committed on a workspace of the base release and our harness, and reviewed
there with the target's catalog (docs/review.md, "Foreign corpora")."""

from __future__ import annotations

import argparse
import hashlib
import shutil
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from faults.catalog import Catalog, CatalogError, load_catalog
from faults.catalog.refs import without_missing_sites
from faults.corpus.bugs import BugCommit, CorpusError
from faults.review.model import OlderTree
from hostio import UsageError, gpu_count, machine_name
from invariants.sync.sites import parse_tree
from tools.faults_cli.steps import chosen_slots, workdir

AUTHOR = ("faults corpus", "corpus@localhost")


def _tree(release, wanted: list[str], cache: Path, missing_ok: bool = False) -> Path:
    from tools.targets.registry import tree

    return tree(release.pin, wanted, cache, missing_ok=missing_ok)


@dataclass(frozen=True)
class BaseSites:
    """What a bug's base holds for its review: the catalog loaded on it, its
    site names, the digest of its sources; `older`: a base the catalog does
    not load on, the line saying what of the catalog was left out there."""

    catalog: Catalog
    sites: frozenset[str]
    digest: str
    older: str = ""


def base_catalog(corpus, catalog_path: Path, tree: Path) -> tuple[Catalog, str]:
    """The catalog on a base `tree`, and ""; on a base older than the
    catalog's pin (it does not load there), the catalog with what the tree
    lacks left out, as review --older-trees judges an older tree, and the
    line saying so."""
    try:
        return load_catalog(catalog_path, tree_root=tree), ""
    except CatalogError as refused:
        given = load_catalog(catalog_path)  # malformed otherwise: the user's error, raised
        catalog, left_out = without_missing_sites(given, tree / given.target.sources)
        return catalog, str(OlderTree(corpus.catalog, str(refused), left_out))


def base_sites(corpus, bug, catalog_path: Path, tree: Path) -> BaseSites:
    """The catalog on the bug's base `tree`, the bug's site checked there
    (the bug itself may break the site's anchors)."""
    from faults.pipeline.scratch import tree_digest

    catalog, older = base_catalog(corpus, catalog_path, tree)
    found = parse_tree(tree / catalog.target.sources, catalog.target.anchors)[0]
    sites = frozenset(site.name for site in found)
    if bug.bug.site and bug.bug.site not in sites:
        raise CorpusError(
            f"{corpus.path}: bug {bug.bug.name}: site {bug.bug.site}"
            f" is not a site of {corpus.catalog} on its base {bug.base.version}"
        )
    return BaseSites(catalog, sites, tree_digest(tree / catalog.target.sources), older)


def _base_files(corpus, bug, cache: Path) -> tuple[Path, list[str], str]:
    """The base release's tree, the members the workspace takes from it, and
    the bug's file as the bug commit holds it (made before any folder is:
    a refusal is one line)."""
    from faults.corpus.releases import make_bug_text

    # The harness's members an older base lacks are left out (its build fails
    # there, said by the review); the bug's own file must be there.
    held = [bug.base.holds(member) for member in corpus.members]
    _tree(bug.base, held, cache, missing_ok=True)
    base_tree = _tree(bug.base, [bug.file], cache)
    wanted = dict.fromkeys([*corpus.members, bug.file])
    members = [m for m in wanted if (base_tree / bug.base.holds(m)).exists()]
    texts = {bug.base.version: (base_tree / bug.file).read_text()}
    for release in (bug.buggy, bug.fixed):
        tree = _tree(release, [bug.file], cache)
        texts.setdefault(release.version, (tree / bug.file).read_text())
    return base_tree, members, make_bug_text(bug, texts)


def workspace(corpus, bug, root: Path, into: Path, cache: Path, on_base=None):
    """`into` a git repository: its first commit the base release's members
    and our harness, its second the bug's file with its hunks undone; the
    BugCommit, and what `on_base(into)` says of the first commit's tree."""
    import git

    from tools.targets.fetch import fill

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


def corpus_digest(corpus, catalog_path: Path, root: Path) -> str:
    """What makes every bug tree of `corpus`: its file (the releases, their
    sha256 and the hunks), the catalog and our harness; a corpus run in
    shards merges into one document while these stay the same."""
    digest = hashlib.sha256()
    for path in (corpus.path, catalog_path, *(root / name for name in corpus.harness)):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _checked(args: argparse.Namespace):
    from faults.corpus.releases import load_release_corpus

    if args.dir is not None or args.neutral is not None:
        raise UsageError("corpus --target-corpus: not with DIR or --neutral")
    corpus = load_release_corpus(args.target_corpus, args.only)
    catalog = args.root / corpus.catalog
    if not catalog.is_file():
        raise UsageError(f"{corpus.path}: catalog {corpus.catalog}: not a file")
    for name in corpus.harness:
        if not (args.root / name).is_file():
            raise UsageError(f"{corpus.path}: harness {name}: not a file")
    return corpus, catalog


def target_corpus_command(args: argparse.Namespace) -> int:
    from faults.corpus.bugs import review_commits
    from faults.corpus.bugs_report import document, passed, summary, write_results
    from faults.corpus.releases import load_release_corpus
    from tools.faults_cli.steps import chosen_rank_mode
    from tools.targets.registry import CACHE, check_untracked

    corpus, catalog_path = _checked(args)
    # The GPUs a run needs in the chosen rank mode (logical: one), said
    # before any workspace is made.
    plain = load_catalog(catalog_path)
    mode = chosen_rank_mode(args, plain)
    needed, gpus = plain.in_rank_mode(mode).gpus_needed, gpu_count()
    if args.run and gpus < needed:
        raise UsageError(f"corpus --run: the target needs {needed} GPUs, this machine has {gpus}")
    cache = args.root / CACHE.name
    if args.workdir is not None:
        check_untracked(args.workdir, "--workdir")
    with workdir(args, "corpus") as work:
        made = [  # every bug made and its site checked before any review
            workspace(
                corpus,
                bug,
                args.root,
                work.path / bug.bug.name / "clone",
                cache,
                partial(base_sites, corpus, bug, catalog_path),
            )
            for bug in corpus.bugs
        ]
        results = review_commits(
            [replace(commit, older=base.older) for commit, base in made],
            work.path,
            set().union(*(base.sites for _, base in made)),
            run=args.run,
            catalog=catalog_path,
            rank_mode=str(mode),
            slots=chosen_slots(args) if args.run else 1,
            exposure=not args.no_exposure,
            not_run_why="only a run catches it: corpus --run",
        )
        doc = document(
            results,
            machine_name(),
            corpus_digest(corpus, catalog_path, args.root),
            str(mode),
            corpus=corpus.path.stem,
            not_made=corpus.not_made,
            base_digests={commit.bug.name: base.digest for commit, base in made},
        )
        work.failed = doc["missed_unexpectedly"] > 0
    every_bug = {bug.bug.name for bug in load_release_corpus(corpus.path).bugs}
    stem = write_results(doc, args.results_dir, every_bug) if args.results_dir else None
    print(summary(doc) + (f"; reports: {stem}.json .md" if stem else ""))
    return 0 if passed(doc) else 1
