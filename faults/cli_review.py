"""The `afdep-faults` commands about changes: review, corpus and compare
(docs/architecture.md, "The pre-merge review", "The bug corpus")."""

from __future__ import annotations

import argparse
from pathlib import Path

from faults.catalog import load_catalog
from faults.cli_steps import chosen_rank_mode, load, workdir
from hostio import UsageError, at_least_one, gpu_count, machine_name, writable_dir, write_text


def review_command(args: argparse.Namespace) -> int:
    from faults.report.sarif import write_sarif
    from faults.review import check_refs, markdown, review, run_review
    from faults.review.diff import in_repo, top_prefix
    from faults.review.findings import RULES, TOOL, findings

    plain = load_catalog(args.catalog)
    mode = chosen_rank_mode(args, plain)
    needed = plain.in_rank_mode(mode).gpus_needed
    check_refs(args.root, args.base, args.change)
    if args.run and gpu_count() < needed:
        raise UsageError(
            f"review --run: the target needs {needed} GPUs, this machine has {gpu_count()}"
        )
    with workdir(args, "review") as work:
        result, catalog = review(
            args.root,
            args.base,
            args.change,
            args.catalog,
            generated=not args.no_generated,
            workdir=work.path,
            rank_mode=mode,
            older_trees=args.older_trees,
        )
        if args.run:
            result.runs = run_review(
                result.touched,
                catalog if args.no_exposure else catalog.with_exposure(),
                result.tree,
                args.root,
                args.base,
                work.path / "runs",
                slots=args.slots,
            )
            work.failed = not result.runs.ok
    text = markdown(result)
    if args.report:
        write_text(args.report, text)
    if args.sarif:
        prefix = top_prefix(args.root)
        inside = in_repo(args.catalog, args.root)  # outside: its findings name no file
        harness = prefix / inside if inside else None
        touched = {"sitesTouched": [cover.site.name for cover in result.touched]}
        write_sarif(args.sarif, TOOL, RULES, findings(result, prefix, harness), touched)
    print(text)
    return 0 if result.ok else 1


def corpus_command(args: argparse.Namespace) -> int:
    from faults.corpus import load_corpus, run_corpus
    from faults.corpus_report import document, write_results
    from faults.scratch import tree_digest

    check_corpus_words(args)
    if args.neutral is not None:
        return neutral_command(args)
    catalog = load(args)
    bugs = load_corpus(args.dir, args.only)
    needed = catalog.gpus_needed
    if args.run and gpu_count() < needed:
        raise UsageError(
            f"corpus --run: the target needs {needed} GPUs, this machine has {gpu_count()}"
        )
    with workdir(args, "corpus") as work:
        results = run_corpus(
            args.root,
            catalog.target.sources,
            bugs,
            work.path,
            run=args.run,
            rank_mode=str(catalog.rank_mode),
            slots=args.slots,
            exposure=not args.no_exposure,
        )
        digest = tree_digest(args.root / catalog.target.sources)
        doc = document(results, machine_name(), digest, str(catalog.rank_mode))
        work.failed = doc["caught"] < len(results)
    every_bug = {bug.name for bug in load_corpus(args.dir, None)}
    stem = write_results(doc, args.results_dir, every_bug) if args.results_dir else None
    where = f"; reports: {stem}.json .md" if stem else ""
    print(f"{doc['caught']} of {doc['bugs']} bugs caught{where}")
    return 0 if doc["caught"] == doc["bugs"] and doc["static_expected_caught_statically"] else 1


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
    from faults.neutral import commits_in, load_expectations, review_commits
    from faults.neutral_report import document, passed, summary, write_results
    from faults.scratch import tree_digest

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


def compare_command(args: argparse.Namespace) -> int:
    from faults.report.compare import markdown, read_notes, read_side, rows

    if args.out:
        writable_dir(args.out.parent, "--out's folder")
    summarize = shard_summarizer(args)
    left = read_side(args.left, "--left", summarize)
    right = read_side(args.right, "--right", summarize)
    compared = rows(left, right, summarize)
    notes = read_notes(args.notes, compared) if args.notes else None
    text = markdown(left, right, compared, notes)
    if args.out:
        write_text(args.out, text)
    print(text, end="")
    return 0


def shard_summarizer(args: argparse.Namespace):
    """A fault's verdict over its runs from several shards, judged as the sweep
    judges one fault's runs (the catalog, loaded when first needed)."""
    from faults.engine import RunResult
    from faults.verdict import summarize_fault

    catalogs = []

    def summarize(fault_id: str, runs: list[dict]) -> str:
        if not catalogs:
            catalogs.append(load(args))
        catalog = catalogs[0]
        if fault_id not in catalog.faults:
            raise UsageError(f"compare: fault {fault_id} of several shards is not in the catalog")
        results = [RunResult(**run) for run in runs]
        return summarize_fault(catalog.fault(fault_id), results).verdict.value

    return summarize


SLOTS_HELP = "with --run: controls and must-pass faults this many at a time (must-fail: one)"
NO_EXPOSURE_HELP = "with --run: leave out the configs' real-size twins"


def add_review_commands(commands) -> None:
    """review, corpus and compare, on the top parser's subcommands."""
    review = commands.add_parser(
        "review", help="what BASE..CHANGE does to the synchronization (static unless --run)"
    )
    review.add_argument("base", metavar="BASE", help="the ref the change is reviewed against")
    review.add_argument(
        "change", metavar="CHANGE", nargs="?", default=None, help="a ref (default: working tree)"
    )
    review.add_argument(
        "--run",
        action="store_true",
        help="run the change's tree, then the covering faults (without it: the static review)",
    )
    review.add_argument("--report", type=Path, default=None, help="write the Markdown here")
    review.add_argument("--slots", type=at_least_one, default=1, help=SLOTS_HELP)
    review.add_argument("--sarif", type=Path, default=None, help="write the findings as SARIF")
    review.add_argument("--no-exposure", action="store_true", help=NO_EXPOSURE_HELP)
    review.add_argument(
        "--older-trees",
        action="store_true",
        help="judge a tree whose own catalog this review cannot take by --catalog, "
        "what it names that the tree lacks left out (the history's commits)",
    )
    review.set_defaults(handler=review_command)
    corpus = commands.add_parser(
        "corpus", help="review every bug commit of a corpus, or every real commit of a range"
    )
    corpus.add_argument(
        "dir", type=Path, nargs="?", help="a folder of *.patch files with their headers"
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
    corpus.add_argument("--slots", type=at_least_one, default=1, help=SLOTS_HELP)
    corpus.add_argument("--no-exposure", action="store_true", help=NO_EXPOSURE_HELP)
    corpus.set_defaults(handler=corpus_command)
    compare = commands.add_parser("compare", help="two sets of sweep reports, side by side")
    compare.add_argument("--left", type=Path, nargs="+", required=True, help="sweep JSON reports")
    compare.add_argument("--right", type=Path, nargs="+", required=True, help="sweep JSON reports")
    compare.add_argument("--out", type=Path, default=None, help="write the Markdown here")
    compare.add_argument(
        "--notes", type=Path, default=None, help="TOML: [why] fault id = why the sides differ"
    )
    compare.set_defaults(handler=compare_command)
