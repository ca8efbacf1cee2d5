"""`afdep-faults corpus --target-corpus FILE`: a foreign target's real bugs,
each made at run time from its fetched releases (tools/targets/bug_workspace.py),
committed on a workspace of the base release and our harness, and reviewed
there with the target's catalog (docs/review.md, "Foreign corpora")."""

from __future__ import annotations

import argparse
from dataclasses import replace

from faults.catalog import load_catalog
from hostio import UsageError, gpu_count, machine_name
from tools.faults_cli.steps import chosen_rank_mode, chosen_slots, workdir


def target_corpus_command(args: argparse.Namespace) -> int:
    from faults.corpus.bugs import review_commits
    from faults.corpus.bugs_report import document, passed, summary, write_results
    from faults.corpus.releases import corpus_digest, corpus_files, load_release_corpus
    from tools.targets.bug_workspace import made_bugs
    from tools.targets.registry import CACHE, check_untracked

    if args.dir is not None or args.neutral is not None:
        raise UsageError("corpus --target-corpus: not with DIR or --neutral")
    corpus = load_release_corpus(args.target_corpus, args.only)
    catalog_path = corpus_files(corpus, args.root)
    # The GPUs a run needs in the chosen rank mode (logical: one), said
    # before any workspace is made.
    plain = load_catalog(catalog_path)
    mode = chosen_rank_mode(args, plain)
    needed, gpus = plain.in_rank_mode(mode).gpus_needed, gpu_count()
    if args.run and gpus < needed:
        raise UsageError(f"corpus --run: the target needs {needed} GPUs, this machine has {gpus}")
    if args.workdir is not None:
        check_untracked(args.workdir, "--workdir")
    with workdir(args, "corpus") as work:
        made = made_bugs(corpus, args.root, work.path, args.root / CACHE.name, catalog_path)
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
