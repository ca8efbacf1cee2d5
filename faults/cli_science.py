"""The `afdep-faults` commands of fault science: `sweep --seeds K` (each
scheduled fault once per seed) and `replay RUN_ID` (docs/architecture.md,
"Seeded schedules and replay"), `rejudge` and `merge` (a sweep's shards made
one report)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

from faults.catalog import Catalog
from faults.catalog_types import RankMode
from faults.cli_steps import load, workdir
from faults.report import catalog_sha256
from faults.seeds import RunId, describe, parse_run_id, with_seed
from hostio import (
    UsageError,
    at_least,
    at_least_one,
    gpu_count,
    writable_dir,
    write_json,
    write_text,
)


def sweep_seeds(args: argparse.Namespace) -> tuple[int, ...]:
    """--seeds K from --seed-base S: S .. S+K-1 (none: the faults as written)."""
    seeds = getattr(args, "seeds", None)
    return tuple(range(args.seed_base, args.seed_base + seeds)) if seeds else ()


def read_sweep(path: Path, named: str = "replay: --from") -> dict:
    """A sweep's JSON report, or a UsageError naming the file (after `named`)."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{named} {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{named} {path}: not a JSON report ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise UsageError(f"{named} {path}: not a sweep report (no results list)")
    return document


def rest_of(args: argparse.Namespace) -> None:
    """--rest-of REPORT: the faults an earlier shard's budget left (its
    `unrun`) become --only and, with no --config, its configs become the
    configs; refused before any work for a report that is not a sweep's, of
    another catalog, or that left nothing, or beside --only."""
    if args.rest_of is None:
        return
    named = f"sweep: --rest-of {args.rest_of}"
    if args.only:
        raise UsageError(f"{named}: --only chooses the faults too; give one of them")
    document = read_sweep(args.rest_of, "sweep: --rest-of")
    ours = catalog_sha256(args.catalog)
    theirs = str(document.get("catalog_sha256"))
    if theirs != ours:
        raise UsageError(
            f"{named}: a sweep of another catalog (sha256 {theirs[:12]}, {args.catalog} is "
            f"{ours[:12]})"
        )
    if not document.get("unrun"):
        raise UsageError(f"{named}: its budget left no fault unrun")
    args.only = [re.escape(fault) for fault in document["unrun"]]
    if args.config is None:
        args.config = list(document.get("gpus_needed") or {}) or None


def recorded_id(result: dict) -> str:
    """A report's result's run id (faults/seeds.py's form)."""
    return f"{result.get('fault')}@{result.get('config')}#{result.get('repeat')}"


def recorded_run(document: dict, run: RunId, path: Path) -> dict:
    """The result of `run` in the report, or a UsageError naming both."""
    for result in document["results"]:
        if isinstance(result, dict) and recorded_id(result) == str(run):
            return result
    raise UsageError(f"replay: run id {run} is not in {path}")


def replay_catalog(args: argparse.Namespace, document: dict, run: RunId) -> Catalog:
    """The catalog as the sweep saw it: its rank mode (unless --rank-mode says),
    the exposure twins, and the run's fault seeded as it was."""
    if args.rank_mode == "auto" and document.get("rank_mode"):
        args.rank_mode = document["rank_mode"]
    catalog = load(args).with_exposure()
    if run.fault not in catalog.faults:
        raise UsageError(f"replay: run id {run}: no fault {run.fault!r} in {args.catalog}")
    catalog.config(run.config)  # an unknown config is named before any tree is made
    return catalog if run.seed is None else with_seed(catalog, run.fault, run.seed)


def replay_command(args: argparse.Namespace) -> int:
    from faults.engine import Engine

    try:
        run = parse_run_id(args.run_id)
    except ValueError as error:
        raise UsageError(f"replay: {error}") from None
    document = read_sweep(args.source)
    recorded = recorded_run(document, run, args.source)
    catalog = replay_catalog(args, document, run)
    config = catalog.config(run.config)
    if args.out is not None:
        writable_dir(args.out.parent, "replay: --out's folder")
    needed = catalog.gpus_for(config)
    if not args.no_run and gpu_count() < needed:
        raise UsageError(
            f"replay: config {config.name} needs {needed} GPUs, this machine has {gpu_count()}"
        )
    with workdir(args, "replay") as work:
        engine = Engine(catalog, args.root, work.path)
        with engine.guard():
            if args.no_run:
                replayed = applied_only(engine, run.label)
            else:
                [result] = engine.evaluate(run.label, [config], 1)
                replayed = {**result.to_dict(), "repeat": run.repeat}
        comparison = compare(run, recorded, replayed, args.source)
        work.failed = not comparison["reproduced"]
    text = replay_markdown(comparison)
    if args.out is not None:
        write_json(args.out.with_suffix(".json"), comparison)
        write_text(args.out.with_suffix(".md"), text)
    print(text, end="")
    return 0 if comparison["reproduced"] else 1


def applied_only(engine, label: str) -> dict:
    """--no-run: the tree applied (not built), its digest and schedule only."""
    from faults.apply import ApplyError, apply_fault
    from faults.scratch import make_scratch, tree_digest

    tree = engine.workdir / label / "tree"
    if tree.exists():  # a --workdir reused: this command's own old scratch tree
        shutil.rmtree(tree)
    make_scratch(engine.root, tree)
    try:
        apply_fault(tree, engine.catalog, label)
    except ApplyError as error:
        raise UsageError(f"replay: {error}") from None
    seed, schedule = describe(engine.catalog, label)
    digest = tree_digest(tree / engine.catalog.target.sources)
    return {"tree_digest": digest, "schedule": schedule, "seed": seed, "verdict": None}


def compare(run: RunId, recorded: dict, replayed: dict, source: Path) -> dict:
    """Both sides and whether the replay reproduced the run: the same schedule,
    the same tree and (when it ran) the same verdict."""
    same_schedule = recorded.get("schedule", "") == replayed["schedule"]
    same_tree = recorded.get("tree_digest") == replayed["tree_digest"]
    ran = replayed["verdict"] is not None
    same_verdict = ran and recorded.get("verdict") == replayed["verdict"]
    return {
        "run_id": str(run),
        "from": str(source),
        "recorded": recorded,
        "replayed": replayed,
        "same_schedule": same_schedule,
        "same_tree": same_tree,
        "same_verdict": same_verdict if ran else None,
        "reproduced": same_schedule and same_tree and (same_verdict or not ran),
    }


def _cell(text) -> str:
    return "-" if text in (None, "") else str(text).replace("|", "/").splitlines()[0][:200]


def replay_markdown(comparison: dict) -> str:
    """The recorded run and its replay side by side, then the one-line answer."""
    recorded, replayed = comparison["recorded"], comparison["replayed"]
    rows = [
        ("schedule", recorded.get("schedule"), replayed["schedule"], comparison["same_schedule"]),
        (
            "tree digest",
            (recorded.get("tree_digest") or "")[:12],
            replayed["tree_digest"][:12],
            comparison["same_tree"],
        ),
        ("verdict", recorded.get("verdict"), replayed["verdict"], comparison["same_verdict"]),
        ("reason", recorded.get("reason"), replayed.get("reason"), None),
    ]
    lines = [
        f"# Replay of {comparison['run_id']}",
        "",
        f"from {comparison['from']}",
        "",
        "| | recorded | replayed | same |",
        "|---|---|---|---|",
    ]
    for name, left, right, same in rows:
        said = "" if same is None else ("yes" if same else "NO")
        lines.append(f"| {name} | {_cell(left)} | {_cell(right)} | {said} |")
    checks = {"schedule": "same_schedule", "tree": "same_tree", "verdict": "same_verdict"}
    said = [name for name, key in checks.items() if comparison[key] is not None]
    if comparison["reproduced"]:
        answer = "reproduced: " + ", ".join(f"the same {name}" for name in said)
    else:
        differ = [name for name in said if not comparison[checks[name]]]
        answer = "NOT reproduced: another " + ", another ".join(differ)
    return "\n".join([*lines, "", answer]) + "\n"


def rejudge_command(args: argparse.Namespace) -> int:
    """Each report's runs judged again from their outcomes (faults/rejudge.py);
    every report is judged before any is rewritten, so a refusal leaves all
    as they were."""
    from faults.rejudge import RejudgeError, rejudge
    from faults.report.markdown import junit, markdown

    documents = [(path, read_sweep(path, "rejudge:")) for path in args.reports]
    for path, _ in documents:
        writable_dir(path.parent, f"rejudge: {path}'s folder")
    catalog = load(args)
    judged = []
    with workdir(args, "rejudge") as work:
        for i, (path, document) in enumerate(documents):
            try:
                again = rejudge(document, catalog, args.root, work.path / str(i), args.drop_changed)
                judged.append((path, *again))
            except RejudgeError as error:
                raise UsageError(f"rejudge: {path}: {error}") from None
    for path, document, changes in judged:
        write_json(path, document)
        write_text(path.with_suffix(".md"), markdown(document))
        if path.with_suffix(".xml").exists():
            write_text(path.with_suffix(".xml"), junit(document))
        print(f"{path}: {len(changes)} verdict(s) changed")
        for change in changes:
            print(f"  {change}")
        for fault, was in document["rejudged"][-1]["dropped"].items():
            print(f"  dropped {fault} (was {was['verdict']}): {was['why']}")
    return 0


def merge_command(args: argparse.Namespace) -> int:
    """The shards made one report (faults/merge.py); refused, naming the
    shard, before anything is written. Exit 0 when every fault met its
    expectation and none is left unrun, else 1 (the catalog's faults in no
    shard are said, not judged: merging --only shards is a sweep of those)."""
    from faults.merge import MergeError, merged
    from faults.sweep import report_stem, write_report

    if len({path.resolve() for path in args.reports}) != len(args.reports):
        raise UsageError("merge: a shard is named twice")
    shards = [(path, read_sweep(path, "merge:")) for path in args.reports]
    writable_dir(args.results_dir, "merge: --results-dir")
    first = shards[0][1]
    stem = report_stem(args.results_dir, first)
    for path in args.reports:
        if path.resolve() == stem.with_suffix(".json").resolve():
            raise UsageError(f"merge: --results-dir {args.results_dir}: would overwrite {path}")
    if args.rank_mode == "auto" and first.get("rank_mode") in {str(m) for m in RankMode}:
        args.rank_mode = first["rank_mode"]  # the shards' faults, as their mode made them
    try:
        document = merged(shards, load(args), rerun_wins=args.rerun_wins)
    except MergeError as error:
        raise UsageError(f"merge: {error}") from None
    write_report(args.results_dir, document)
    print(
        f"{len(shards)} shards merged: {len(document['faults'])} faults judged, "
        f"{len(document['unrun'])} not run, {len(document['not_selected'])} in no shard, "
        f"mutation score {document['mutation_score']}; "
        f"reports: {stem}.json .md .xml"
    )
    return 0 if document["ok"] else 1


def add_science_commands(commands) -> None:
    """`replay`, and `--seeds` / `--seed-base` on `sweep`."""
    sweep = commands.choices["sweep"]
    sweep.add_argument(
        "--seeds",
        type=at_least_one,
        default=None,
        help="run each fault with a scheduled delay once per seed (its own tree)",
    )
    sweep.add_argument(
        "--seed-base", type=at_least(0), default=0, help="the first seed of --seeds (default 0)"
    )
    sweep.add_argument(
        "--rest-of",
        type=Path,
        default=None,
        metavar="REPORT",
        help="the faults an earlier shard's budget left (its JSON report), under its configs "
        "unless --config",
    )
    replay = commands.add_parser(
        "replay", help="run one run of a sweep report again, its schedule applied as recorded"
    )
    replay.add_argument("run_id", metavar="RUN_ID", help="<fault>[~s<seed>]@<config>#<repeat>")
    replay.add_argument(
        "--from", dest="source", type=Path, required=True, help="the sweep's JSON report"
    )
    replay.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    replay.add_argument(
        "--no-run", action="store_true", help="apply only: compare the schedule and tree digest"
    )
    replay.set_defaults(handler=replay_command)
    again = commands.add_parser(
        "rejudge", help="sweep reports' runs judged again by today's rules, from their outcomes"
    )
    again.add_argument("reports", metavar="REPORT", type=Path, nargs="+", help="sweep JSON reports")
    again.add_argument(
        "--drop-changed",
        action="store_true",
        help="a fault whose tree changed since it ran leaves the report (to run again), "
        "instead of refusing it",
    )
    again.set_defaults(handler=rejudge_command)
    merge = commands.add_parser("merge", help="a sweep's shards made one report")
    merge.add_argument("reports", metavar="SHARD", type=Path, nargs="+", help="sweep JSON reports")
    merge.add_argument("--results-dir", type=Path, required=True)
    merge.add_argument(
        "--rerun-wins",
        action="store_true",
        help="a run in two shards is the later shard's (a re-run), each replaced one listed",
    )
    merge.set_defaults(handler=merge_command)
