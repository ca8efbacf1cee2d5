"""`afdep-faults amplify`: the order-weakening mutants of the catalog run as
message-passing litmus tests under stress (docs/operators.md,
"Amplification"), the controls first; writes amplify-<machine>.{json,md}."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from faults.amplify.compile import compile_litmus
from faults.amplify.device import Stress
from faults.amplify.plan import (
    chosen_mutants,
    control_runs,
    plan_shapes,
    report_header,
    run_all,
)
from faults.amplify.report import document, harness_verdict, judge, markdown
from faults.amplify.shapes import Read
from hostio import (
    RESULTS_DIR,
    UsageError,
    at_least,
    at_least_one,
    gpu_count,
    positive_seconds,
    results_stem,
    writable_dir,
    write_json,
    write_text,
)
from tools.faults_cli.steps import load

DEFAULT_STRESS = (Stress.NONE, Stress.MEMORY)


READS = {"l2": Read.L2, "cached": Read.CACHED}


def stress_modes(args: argparse.Namespace) -> tuple[Stress, ...]:
    return tuple(dict.fromkeys(Stress(s) for s in args.stress)) if args.stress else DEFAULT_STRESS


def amplify_command(args: argparse.Namespace) -> int:
    from faults.amplify.device import check_stress

    stress, gpus = stress_modes(args), gpu_count()
    if not args.no_run and gpus == 0:
        raise UsageError("amplify: no GPU here (--no-run maps the mutants and compiles only)")
    check_stress(stress, gpus)
    writable_dir(args.results_dir, "amplify: --results-dir")
    catalog = load(args)
    chosen = chosen_mutants(catalog, args.root, args.only, READS[args.read])
    sources = args.root / catalog.target.sources
    controls, shapes = plan_shapes(chosen, gpus)
    started = time.perf_counter()
    for shape in controls + shapes:  # every instantiation compiles before any run
        compile_litmus(shape, sources)
    if args.no_run or not controls:
        runs, geometry = {}, None
        said = "--no-run" if args.no_run else "no chosen mutant has a litmus to run here"
        harness = (None, f"not run ({said}): the mutants are mapped and their litmus compiled")
    else:
        runs, geometry = run_all(args, sources, controls, shapes, stress)
        harness = harness_verdict(control_runs(controls, runs))
    judged = [judge(m, runs, gpus, harness) for m in chosen]
    header = report_header(args, sources, stress, gpus, geometry)
    header["wall_s"] = round(time.perf_counter() - started, 1)
    doc = document(judged, control_runs(controls, runs), harness, header)
    stem = args.results_dir / results_stem("amplify", header["machine"])
    write_json(stem.with_suffix(".json"), doc)
    write_text(stem.with_suffix(".md"), markdown(doc))
    print(markdown(doc), end="")
    print(f"reports: {stem}.json .md")
    return 0 if harness[0] is not False else 1


def add_parser(commands) -> None:
    amplify = commands.add_parser(
        "amplify", help="run the order-weakening mutants as litmus tests under stress"
    )
    amplify.add_argument("--budget-s", type=positive_seconds, default=420.0, help="all runs")
    amplify.add_argument("--launches", type=at_least_one, default=10000, help="per run, at most")
    amplify.add_argument("--iterations", type=at_least_one, default=256, help="steps per launch")
    amplify.add_argument("--spin-limit", type=at_least_one, default=20000, help="flag loads")
    amplify.add_argument("--pairs", type=at_least_one, default=None, help="default: 3/8 of SMs")
    amplify.add_argument(
        "--stress",
        action="append",
        choices=[s.value for s in Stress],
        default=None,
        help="repeatable (default: none and memory); nvlink needs 2 GPUs",
    )
    amplify.add_argument("--seed", type=at_least(0), default=0, help="of the permutations")
    amplify.add_argument(
        "--read",
        choices=list(READS),
        default="l2",
        help="the consumer's payload reads: l2 (ld.global.cg, as the kernels read a peer's "
        "stores) or cached (plain loads: L1 may serve a stale line)",
    )
    amplify.add_argument("--only", default=None, help="a regular expression matching whole ids")
    amplify.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    amplify.add_argument(
        "--no-run", action="store_true", help="map the mutants and compile their litmus only"
    )
    amplify.set_defaults(handler=amplify_command)
