"""`afdep-faults corpus DIR` (every bug commit of a corpus) and `corpus
--neutral REV_RANGE` (every real commit that must be approved)
(docs/review.md, "The bug corpus")."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostio import UsageError, at_least_one, gpu_count, machine_name
from tools.faults_cli.steps import NO_EXPOSURE_HELP, SLOTS_HELP, chosen_slots, load, workdir


def corpus_command(args: argparse.Namespace) -> int:
    from faults.corpus.bugs import load_corpus, run_corpus
    from faults.corpus.bugs_report import document, passed, summary, write_results
    from faults.pipeline.scratch import tree_digest

    if args.target_corpus is not None:
        from tools.faults_cli.target_corpus import target_corpus_command

        return target_corpus_command(args)
    check_corpus_words(args)
    if args.neutral is not None:
        return neutral_command(args)
    catalog = load(args)
    bugs = load_corpus(args.dir, args.only)
    needed, gpus = catalog.gpus_needed, gpu_count()
    if args.run and gpus < needed:
        raise UsageError(f"corpus --run: the target needs {needed} GPUs, this machine has {gpus}")
    not_run_why = (
        f"only a run catches it: the target's runs need {needed} GPUs, this machine has {gpus}"
        if gpus < needed
        else "only a run catches it: corpus --run"
    )
    with workdir(args, "corpus") as work:
        results = run_corpus(
            args.root,
            catalog.target,
            bugs,
            work.path,
            run=args.run,
            rank_mode=str(catalog.rank_mode),
            slots=chosen_slots(args) if args.run else 1,
            exposure=not args.no_exposure,
            not_run_why=not_run_why,
        )
        digest = tree_digest(args.root / catalog.target.sources)
        doc = document(results, machine_name(), digest, str(catalog.rank_mode))
        work.failed = doc["missed_unexpectedly"] > 0  # a bug not run is no failed run
    every_bug = {bug.name for bug in load_corpus(args.dir, None)}
    stem = write_results(doc, args.results_dir, every_bug) if args.results_dir else None
    where = f"; reports: {stem}.json .md" if stem else ""
    not_run = f" ({not_run_why})" if doc["not_run"] else ""
    print(f"{summary(doc)}{not_run}{where}")
    return 0 if passed(doc) else 1


def check_corpus_words(args: argparse.Namespace) -> None:
    """DIR (bug patches) or --neutral REV_RANGE (real commits), with the
    options of the one chosen."""
    if args.dir is not None and args.neutral is not None:
        raise UsageError("corpus: DIR or --neutral REV_RANGE, not both")
    if args.dir is None and args.neutral is None:
        raise UsageError("corpus: give DIR (a folder of bug patches) or --neutral REV_RANGE")
    if args.neutral is None and args.expect is not None:
        raise UsageError("corpus --expect: only with --neutral")
    if args.neutral is not None and (args.run or args.only):
        raise UsageError("corpus --neutral: the review is static; --run and --only are DIR's")


def neutral_command(args: argparse.Namespace) -> int:
    from faults.corpus.neutral import commits_in, load_expectations, review_commits
    from faults.corpus.neutral_report import document, passed, summary, write_results
    from faults.pipeline.scratch import tree_digest

    sources = load(args).target.sources
    expectations = load_expectations(args.expect)
    commits, outside = commits_in(args.root, args.neutral, sources)
    with workdir(args, "neutral") as work:
        results = review_commits(args.root, commits, work.path, expectations)
        doc = document(
            results,
            outside,
            machine=machine_name(),
            digest=tree_digest(args.root / sources),
            sources=sources,
            rev_range=args.neutral,
            expectations=str(args.expect) if args.expect else None,
        )
        work.failed = not passed(doc)
    stem = write_results(doc, args.results_dir) if args.results_dir else None
    print(summary(doc) + (f"; reports: {stem}.json .md" if stem else ""))
    return 0 if passed(doc) else 1


def add_parser(commands) -> None:
    corpus = commands.add_parser(
        "corpus", help="review every bug commit of a corpus, or every real commit of a range"
    )
    corpus.add_argument(
        "dir", type=Path, nargs="?", help="a folder of *.patch files with their headers"
    )
    corpus.add_argument(
        "--target-corpus",
        type=Path,
        default=None,
        metavar="FILE",
        help="instead: a foreign target's real bugs, made from its fetched releases (TOML)",
    )
    corpus.add_argument(
        "--neutral",
        metavar="REV_RANGE",
        default=None,
        help="instead: every commit of REV_RANGE (A..B; a ref alone: its history), "
        "each expected to be approved",
    )
    corpus.add_argument(
        "--expect",
        type=Path,
        default=None,
        help="with --neutral: [[commit]] sha, expect (ok / changes-needed), why",
    )
    corpus.add_argument("--run", action="store_true", help="also run each review's faults")
    corpus.add_argument("--only", default=None, help="a regular expression matching whole names")
    corpus.add_argument("--results-dir", type=Path, default=None)
    corpus.add_argument("--slots", type=at_least_one, default=None, help=SLOTS_HELP)
    corpus.add_argument("--no-exposure", action="store_true", help=NO_EXPOSURE_HELP)
    corpus.set_defaults(handler=corpus_command)
