"""The nightly sweep: the catalog's faults and one generated from every site,
over the catalog's configs, in parallel over GPU groups, controls first.

    python -m faults.sweep [--catalog catalogs/afdep.toml] [--repeat N]

Writes `sweep-<machine>.json`, `.md` and `.xml` (JUnit), keeps a SQLite
history and reports what changed since the last sweep of the catalog: verdict
changes, new survivors, new sites without a catalog fault. Per fault: its
verdict over configs and repeats (FLAKY when a must-fail fault is killed only
sometimes, with its kill rate and the repeats that rate needs for 99 %
confidence), the mutation score and the firing rate. With fewer GPUs than the
target needs, every fault is applied and built, and the runs that need GPUs
are listed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from faults.catalog import Catalog, CatalogError, load_catalog
from faults.engine import Engine, RunResult, sweep
from faults.generate import is_generated, with_generated
from faults.history import History
from faults.pytest_plugin import gpu_group
from faults.report import catalog_sha256, engine_share, stage_seconds, summary_line
from faults.report.markdown import junit, markdown
from faults.scratch import UserTreeGuard
from faults.sites import parse_tree
from faults.verdict import FaultSummary, summarize_fault
from hostio import at_least_one, gpu_count, machine_name, write_json, write_text

DEFAULT_CATALOG = Path("catalogs/afdep.toml")


def covered_by_catalog(catalog: Catalog) -> set[str]:
    """Sites some hand-written fault patches."""
    return {
        p.site
        for f in catalog.faults.values()
        if not is_generated(f.id)
        for p in f.patches
        if p.site
    }


def scores(summaries: list[FaultSummary]) -> tuple[float | None, float]:
    """Mutation score (killed / must-fail that fired) and firing rate."""
    must_fail = [s for s in summaries if s.expect == "fail" and s.fired]
    killed = sum(s.verdict == "KILLED" for s in must_fail)
    mutation = round(killed / len(must_fail), 4) if must_fail else None
    fired = sum(bool(s.fired) for s in summaries)
    return mutation, round(fired / len(summaries), 4) if summaries else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m faults.sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--no-generated", action="store_true")
    parser.add_argument("--config", action="append", default=None)
    parser.add_argument("--only", default=None, help="regular expression over fault ids")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--slots",
        type=at_least_one,
        default=1,
        help="must-pass faults run this many at a time per GPU group (must-fail: one)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="reports go here (default: docs/results with GPUs, else the workdir)",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        help="SQLite history (default: <results-dir>/sweep-history.sqlite)",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        catalog = load_catalog(args.catalog, tree_root=args.root)
    except CatalogError as error:
        print(f"catalog error: {error}", file=sys.stderr)
        return 2
    if not args.no_generated:
        catalog = with_generated(catalog, args.root)
    configs = [catalog.config(n) for n in args.config] if args.config else list(catalog.configs)
    fault_ids = [f for f in catalog.faults if not args.only or re.search(args.only, f)]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="afdep-sweep-"))
    gpus = gpu_count()
    # A config that needs more GPUs than this machine has is listed, not run.
    too_big = [c for c in configs if catalog.gpus_for(c) > gpus]
    configs = [c for c in configs if c not in too_big]
    runnable = bool(configs)
    if not runnable:
        configs, too_big = too_big, []
    else:
        fault_ids = [f for f in fault_ids if catalog.configs_for(f, [c.name for c in configs])]
    results_dir = args.results_dir or (
        Path("docs/results") if runnable and catalog.target.gpus else workdir
    )
    machine = machine_name()
    sources = Path(args.root) / catalog.target.sources
    sites = [s.name for s in parse_tree(sources)[0]]
    started = time.perf_counter()
    controls: list[RunResult] = []
    results: list[RunResult] = []
    built: list[dict] = []  # without the GPUs the target needs: each fault applied and built
    from rich.progress import Progress

    with UserTreeGuard(sources) as guard, Progress(transient=True) as progress:
        task = progress.add_task("faults", total=len(fault_ids))
        say = lambda line: progress.console.print(
            line,
            soft_wrap=True,
            markup=False,  # noqa: E731
            highlight=False,
        )
        if not runnable:
            engine = Engine(catalog, args.root, workdir)
            for fault_id in fault_ids:
                prepared = engine.prepare(fault_id, fault_id)
                state = prepared.error.verdict.value if prepared.error else "built"
                say(
                    f"{fault_id} tree={prepared.digest[:8]} {state}"
                    f" (apply {prepared.apply_s:.2f} s, build {prepared.build_s:.2f} s)"
                )
                built.append(
                    {
                        "fault": fault_id,
                        "state": state,
                        "tree_digest": prepared.digest,
                        "apply_s": round(prepared.apply_s, 3),
                        "build_s": round(prepared.build_s, 3),
                        "reason": prepared.error.reason if prepared.error else "",
                    }
                )
                progress.advance(task)
        else:
            group_size = max(catalog.gpus_for(c) for c in configs)
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")  # the caller's mask holds
            count = max(gpus // group_size, 1) if group_size else 1
            engines = [
                Engine(
                    catalog,
                    args.root,
                    workdir / f"group{i}",
                    env=(
                        {"CUDA_VISIBLE_DEVICES": ",".join(gpu_group(i, group_size, visible, gpus))}
                        if group_size
                        else {}
                    ),
                )
                for i in range(count)
            ]

            def on_results(found) -> None:
                for result in found:
                    say(summary_line(result))
                if found and found[0].fault in fault_ids:
                    progress.advance(task)

            names = [c.name for c in configs]
            for config in too_big:
                say(f"not run here: config {config.name} needs {catalog.gpus_for(config)} GPUs")
            controls, results = sweep(
                engines, fault_ids, names, args.repeat, on_results, slots=args.slots
            )
            if not all(r.ok for r in controls):
                say("HARNESS BROKEN: a control is wrong, no fault is judged")
    wall = time.perf_counter() - started
    document = build_document(
        built=built,
        catalog=catalog,
        args=args,
        digest=guard.before,
        machine=machine,
        controls=controls,
        results=results,
        fault_ids=fault_ids,
        configs=configs,
        sites=sites,
        runnable=runnable,
        wall=wall,
        too_big=too_big,
    )
    history = History(args.history or results_dir / "sweep-history.sqlite")
    summaries = [FaultSummary(**s) for s in document["faults"]]
    # History is kept per target, so a catalog moved or edited keeps its past.
    document["changes"] = vars(
        history.changes(catalog.target.name, summaries, sites, covered_by_catalog(catalog))
    )
    # A sweep whose controls failed judged nothing: it is no baseline.
    if runnable and document["harness_ok"]:
        history.record(
            catalog=catalog.target.name,
            digest=guard.before,
            machine=machine,
            summaries=summaries,
            sites=sites,
        )
    elif runnable:
        print("history not recorded: the harness is broken, no fault was judged")
    history.close()
    stem = results_dir / f"sweep-{machine}"
    write_json(stem.with_suffix(".json"), document)
    write_text(stem.with_suffix(".md"), markdown(document))
    write_text(stem.with_suffix(".xml"), junit(document))
    print(markdown(document))
    print(f"reports: {stem}.json .md .xml; logs and trees: {workdir}")
    if not runnable:
        return 0 if all(b["state"] == "built" for b in built) else 1
    return 0 if document["ok"] else 1


def build_document(
    *,
    built,
    catalog,
    args,
    digest,
    machine,
    controls,
    results,
    fault_ids,
    configs,
    sites,
    runnable,
    wall,
    too_big=(),
) -> dict:
    summaries = []
    harness_ok = all(r.ok for r in controls) if runnable else False
    if harness_ok:  # with a wrong control no fault ran: nothing to summarize
        for fault_id in fault_ids:
            mine = [r for r in results if r.fault == fault_id]
            summaries.append(summarize_fault(catalog.fault(fault_id), mine))
    mutation, firing = scores(summaries)
    stages = stage_seconds(controls + results)
    document = {
        "tool": "faults.sweep",
        "catalog": str(args.catalog),
        "catalog_sha256": catalog_sha256(args.catalog),
        "machine": machine,
        "native_source_sha256": digest,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpus_needed": {c.name: catalog.gpus_for(c) for c in configs},
        "runnable": runnable,
        "harness_ok": harness_ok,
        "ok": harness_ok and all(s.ok for s in summaries),
        "mutation_score": mutation,
        "firing_rate": firing,
        "wall_s": round(wall, 2),
        "slots": args.slots,
        "stage_seconds": stages,
        "engine_share": engine_share(stages),
        "sites": sites,
        "controls": [r.to_dict() for r in controls],
        "results": [r.to_dict() for r in results],
        "faults": [vars(s) for s in summaries],
        "built": built,
        "configs_not_run": {c.name: f"needs {catalog.gpus_for(c)} GPUs" for c in too_big},
        "gpu_runs_needed": []
        if runnable
        else [
            f"{f}:{c.name}"
            for f in fault_ids
            for c in catalog.configs_for(f, [c.name for c in configs])
        ],
    }
    return document


if __name__ == "__main__":
    sys.exit(main())
