"""The mutants an amplify run takes, which litmus shapes it needs and in what
order (controls first), every shape run under every stress in its share of
the budget, and the report's header (docs/operators.md, "Amplification")."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from faults.amplify.compile import litmus_digest
from faults.amplify.device import AmplifyError, Budget, Geometry, LitmusRun, Stress
from faults.amplify.report import harness_verdict
from faults.amplify.shapes import Mapped, Read, Shape, amplified, control_of, placed
from faults.catalog import Catalog
from faults.pipeline.scratch import tree_digest
from hostio import (
    machine_name,
)


def chosen_mutants(catalog: Catalog, root: Path, only: str | None, read: Read) -> list[Mapped]:
    """The catalog's order-weakening mutants whose ids `only` (--only)
    matches whole (all when None), each litmus reading the payload by `read`."""
    try:
        pattern = re.compile(only) if only is not None else None
    except re.error as error:
        raise AmplifyError(f"amplify: --only {only!r}: not a regular expression: {error}") from None
    try:
        mapped = amplified(catalog, root)
    except ValueError as error:
        raise AmplifyError(f"amplify: {error}") from None
    chosen = [m for m in mapped if pattern is None or pattern.fullmatch(m.fault_id)]
    if not chosen:
        raise AmplifyError(f"amplify: --only {only!r} matches no order-weakening mutant")
    return [m if m.shape is None else replace(m, shape=replace(m.shape, read=read)) for m in chosen]


def runnable(shape: Shape | None, gpus: int) -> bool:
    """A shape whose weak outcome this machine could show."""
    return shape is not None and not shape.correct and not (shape.narrowed and gpus < 2)


def plan_shapes(chosen: list[Mapped], gpus: int) -> tuple[list[Shape], list[Shape]]:
    """(controls, mutant shapes), each distinct, in first-seen order: the
    control of every mutant shape's groups, and every correct shape a mutant maps to."""
    mutant_shapes = list(
        dict.fromkeys(placed(m.shape, gpus) for m in chosen if runnable(m.shape, gpus))
    )
    correct = [m.shape for m in chosen if m.shape is not None and m.shape.correct]
    controls = list(dict.fromkeys([control_of(s) for s in mutant_shapes] + correct))
    return controls, mutant_shapes


def run_all(args, sources: Path, controls, shapes, stress) -> tuple[dict, Geometry]:
    """Every shape under every stress, controls first, each its share of
    --budget-s; no mutant shape runs once a control showed a weak outcome."""
    from faults.amplify.device import device_geometry, run_shape

    geometry = device_geometry(controls[0], sources, args.pairs, stress)
    share = args.budget_s / ((len(controls) + len(shapes)) * len(stress))
    budget = Budget(args.launches, args.iterations, args.spin_limit, share)
    runs: dict[Shape, list[LitmusRun]] = {}
    for index, shape in enumerate(controls + shapes):
        if shape in shapes and not harness_verdict(control_runs(controls, runs))[0]:
            break  # a broken harness judges nothing
        runs[shape] = [
            run_shape(shape, s, geometry, budget, sources, args.seed + index) for s in stress
        ]
        print(f"ran {shape.label()}: " + ", ".join(_said(r) for r in runs[shape]), flush=True)
    return runs, geometry


def control_runs(controls: list[Shape], runs: dict) -> list[LitmusRun]:
    return [r for c in controls for r in runs.get(c, [])]


def _said(result: LitmusRun) -> str:
    return f"{result.stress.value} {result.weak}/{result.observed} ({result.launches} launches)"


def report_header(args, sources: Path, stress, gpus: int, geometry: Geometry | None) -> dict:
    if Stress.NVLINK in stress:
        nvlink = "NVLink stress: scratch on GPU 1, hammered from GPU 0 through peer access"
    elif gpus < 2:
        nvlink = f"NVLink stress: not available ({gpus} GPU{'' if gpus == 1 else 's'}: it needs 2)"
    else:
        nvlink = "NVLink stress: not asked (--stress nvlink)"
    return {
        "machine": machine_name(),
        "rank_mode": "one process; the litmus CTAs on GPU 0"
        + (", a narrowed scope's producers on GPU 0 and consumers on GPU 1" if gpus >= 2 else ""),
        "placement": placement(geometry, args),
        "source_digest": tree_digest(sources),
        "litmus_digest": litmus_digest(),
        "gpus": gpus,
        "stress": [s.value for s in stress],
        "nvlink": nvlink,
        "geometry": geometry.to_dict() if geometry else None,
        "budget": {
            "seconds": args.budget_s,
            "launches": args.launches,
            "iterations": args.iterations,
            "spin_limit": args.spin_limit,
            "seed": args.seed,
        },
    }


def placement(geometry: Geometry | None, args) -> str:
    if geometry is None:
        return "placement: none (not run)"
    return (
        f"placement: {geometry.pairs} producer/consumer CTA pairs (consumer slot j runs "
        f"instance perm[j], a permutation drawn per launch), {geometry.stress_ctas} stress CTAs "
        f"in the same launch; {geometry.sms} SMs x {geometry.per_sm} resident per SM; "
        f"at most {args.launches} launches x {args.iterations} steps per run"
    )
