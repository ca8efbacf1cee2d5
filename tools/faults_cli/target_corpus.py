"""`afdep-faults corpus --target-corpus FILE`: a foreign target's real bugs,
each made at run time from its fetched releases (faults/corpus/releases.py),
committed on a workspace of the base release and our harness, and reviewed
there with the target's catalog (docs/review.md, "Foreign corpora")."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from hostio import UsageError, gpu_count, machine_name
from tools.faults_cli.steps import workdir

HARNESS_FOLDER = "harness"  # where our harness files land in a workspace (as fetch.py's)
AUTHOR = ("faults corpus", "corpus@localhost")


def _tree(corpus, release, wanted: list[str], cache: Path, missing_ok: bool = False) -> Path:
    from tools.targets.members import members

    where = (corpus.package, release.file, release.sha256, release.prefix)
    return members(*where, wanted, cache, missing_ok=missing_ok)


def workspace(corpus, bug, root: Path, into: Path, cache: Path):
    """`into` a git repository: its first commit the base release's members
    and our harness, its second the bug's file with its hunks undone."""
    import git

    from faults.corpus.bugs import BugCommit
    from faults.corpus.releases import make_bug_text

    # The harness's members an older base lacks are left out (its build fails
    # there, said by the review); the bug's own file must be there.
    _tree(corpus, bug.base, list(corpus.members), cache, missing_ok=True)
    base_tree = _tree(corpus, bug.base, [bug.file], cache)
    members = [m for m in dict.fromkeys([*corpus.members, bug.file]) if (base_tree / m).exists()]
    texts = {bug.base.version: (base_tree / bug.file).read_text()}
    for release in (bug.buggy, bug.fixed):
        tree = _tree(corpus, release, [bug.file], cache)
        texts.setdefault(release.version, (tree / bug.file).read_text())
    buggy_text = make_bug_text(bug, texts)  # before any folder is made: a refusal is one line
    shutil.rmtree(into, ignore_errors=True)  # an earlier (perhaps cut) run's scratch
    for member in members:
        source = base_tree / member
        if source.is_dir():
            shutil.copytree(source, into / member)
        else:
            (into / member).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / member)
    for name in corpus.harness:
        (into / HARNESS_FOLDER).mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, into / HARNESS_FOLDER / Path(name).name)
    repo = git.Repo.init(into)
    actor = git.Actor(*AUTHOR)
    repo.git.add("--all")
    title = f"{corpus.package} {bug.base.version}: {bug.base.file} (sha256 {bug.base.sha256})"
    base = repo.index.commit(title, author=actor, committer=actor).hexsha
    (into / bug.file).write_text(buggy_text)
    repo.git.add("--all")
    head = repo.index.commit(
        f"{bug.bug.bug_class}: {bug.bug.title}", author=actor, committer=actor
    ).hexsha
    return BugCommit(bug.bug, into, base, head)


def catalog_sites(catalog_path: Path, tree: Path) -> set[str]:
    """The site names the catalog's sources hold in `tree` (its anchored
    sites too, where the catalog declares any)."""
    from faults.catalog import load_catalog
    from invariants.sync.sites import parse_tree

    catalog = load_catalog(catalog_path, tree_root=tree)
    # Anchored sites are the catalog's (docs/catalog.md); a catalog without them has none.
    anchors = getattr(catalog.target, "anchors", ())
    return {site.name for site in parse_tree(tree / catalog.target.sources, anchors)[0]}


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
    from faults.catalog import load_catalog
    from faults.corpus.bugs import CorpusError, review_commits
    from faults.corpus.bugs_report import document, passed, summary, write_results
    from faults.corpus.releases import load_release_corpus
    from faults.pipeline.scratch import tree_digest
    from tools.faults_cli.steps import chosen_rank_mode
    from tools.targets.members import CACHE

    corpus, catalog_path = _checked(args)
    cache = args.root / CACHE
    with workdir(args, "corpus") as work:
        commits = [
            workspace(corpus, bug, args.root, work.path / bug.bug.name / "clone", cache)
            for bug in corpus.bugs
        ]
        sites = {}
        for commit in commits:  # every site checked before any review
            known = sites.setdefault(commit.repo, catalog_sites(catalog_path, commit.repo))
            if commit.bug.site and commit.bug.site not in known:
                raise CorpusError(
                    f"{corpus.path}: bug {commit.bug.name}: site {commit.bug.site}"
                    f" is not a site of {corpus.catalog} on its base"
                )
        catalog = load_catalog(catalog_path, tree_root=commits[0].repo)
        rank_mode = str(chosen_rank_mode(args, catalog))
        needed, gpus = catalog.gpus_needed, gpu_count()
        if args.run and gpus < needed:
            raise UsageError(
                f"corpus --run: the target needs {needed} GPUs, this machine has {gpus}"
            )
        known_sites = set().union(*sites.values())
        results = review_commits(
            commits,
            work.path,
            known_sites,
            run=args.run,
            catalog=catalog_path,
            rank_mode=rank_mode,
            slots=args.slots,
            exposure=not args.no_exposure,
            not_run_why="only a run catches it: corpus --run",
        )
        # The digest of what the first workspace's sources hold: the base
        # release's, which every bug of one base shares.
        digest = tree_digest(commits[0].repo / catalog.target.sources)
        doc = document(
            results,
            machine_name(),
            digest,
            rank_mode,
            corpus=corpus.path.stem,
            not_made=corpus.not_made,
        )
        work.failed = doc["missed_unexpectedly"] > 0
    every_bug = {bug.bug.name for bug in load_release_corpus(corpus.path).bugs}
    stem = write_results(doc, args.results_dir, every_bug) if args.results_dir else None
    print(summary(doc) + (f"; reports: {stem}.json .md" if stem else ""))
    return 0 if passed(doc) else 1
