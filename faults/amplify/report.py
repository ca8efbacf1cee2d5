"""Verdicts, bounds and the amplify report (docs/operators.md, "Amplification").

A mutant's litmus runs n steps (observations) under each stress; k of them
were weak. Its rate is k/n, and MC Mutants' reproducibility bound: with k
kills in the budget, the chance that a rerun of the same budget kills at
least once is about 1 - e^-k (kills are Poisson with mean k). A mutant never
killed is UNOBSERVABLE on this machine, its rate under 3/n at 95 % (the rule
of three): the static contract is its only catch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from faults.amplify.device import LitmusRun
from faults.amplify.shapes import Mapped, Shape, placed
from faults.judge.verdict import Verdict

ONLY_CATCH = "the static contract is its only catch"


def reproducibility(kills: int) -> float:
    """P(a rerun of the same budget kills at least once) = 1 - e^-k."""
    return 1.0 - math.exp(-kills)


def rate_upper_bound(kills: int, observations: int) -> float | None:
    """No kill in n observations: the rate is below 3/n at 95 %; else None."""
    return 3.0 / observations if kills == 0 and observations > 0 else None


def run_dict(result: LitmusRun) -> dict:
    n, k = result.observed, result.weak
    return {
        "shape": result.shape.to_dict(),
        "stress": result.stress.value,
        "launches": result.launches,
        "observations": n,
        "kills": k,
        "missed": result.missed,
        "seconds": round(result.seconds, 3),
        "rate": k / n if n else None,
        "rate_upper_95": rate_upper_bound(k, n),
        "reproducibility": reproducibility(k),
    }


class Unjudged(str, Enum):
    """Amplification's own outcomes, where a mutant's litmus gives no verdict:
    no litmus shape maps it, its litmus did not run here, or a control showed
    a weak outcome (the harness is broken, so nothing is judged)."""

    NOT_MAPPED = "NOT MAPPED"
    NOT_RUN = "NOT RUN"
    NOT_JUDGED = "NOT JUDGED"

    def __str__(self) -> str:  # reports print the word, as a Verdict's
        return self.value


@dataclass
class Judged:
    mapped: Mapped
    verdict: Verdict | Unjudged
    reason: str
    runs: list[LitmusRun] = field(default_factory=list)


def judge(
    mapped: Mapped, runs: dict[Shape, list[LitmusRun]], gpus: int, harness: tuple[bool | None, str]
) -> Judged:
    """One mutant's verdict from its shape's runs; `harness` is (ok, why), ok
    None when nothing ran."""
    shape = mapped.shape
    if shape is None:
        return Judged(mapped, Unjudged.NOT_MAPPED, mapped.why)
    if shape.narrowed and gpus < 2:
        why = f"gpu scope is enough within one GPU: a one-GPU litmus cannot show it; {ONLY_CATCH}"
        return Judged(mapped, Verdict.UNOBSERVABLE, why)
    done = runs.get(placed(shape, gpus), [])
    if shape.correct:  # its runs are a control's
        why = f"its litmus is correct code ({shape.label()})"
        return Judged(mapped, Verdict.EQUIVALENT, why, done)
    if harness[0] is None:
        return Judged(mapped, Unjudged.NOT_RUN, harness[1])
    if not harness[0]:
        return Judged(mapped, Unjudged.NOT_JUDGED, harness[1], done)
    if not done or not any(r.launches for r in done):
        return Judged(mapped, Unjudged.NOT_RUN, "the budget was spent before its runs", done)
    kills = sum(r.weak for r in done)
    if kills:
        said = ", ".join(f"{r.weak}/{r.observed} under {r.stress.value}" for r in done)
        return Judged(mapped, Verdict.KILLED, f"weak outcomes {said}", done)
    seen = sum(r.observed for r in done)
    why = f"no weak outcome in {seen} observations on this machine: {ONLY_CATCH}"
    return Judged(mapped, Verdict.UNOBSERVABLE, why, done)


def harness_verdict(controls: list[LitmusRun]) -> tuple[bool, str]:
    """Every control (a correct shape) must show no weak outcome, and some observation."""
    weak = [r for r in controls if r.weak]
    if weak:
        said = "; ".join(f"{r.shape.label()} under {r.stress.value}: {r.weak}" for r in weak)
        return False, f"the harness is broken: a correct litmus showed weak outcomes ({said})"
    if not any(r.observed for r in controls):
        return False, "the harness is broken: no control observed a flag"
    return True, f"{len(controls)} control runs, 0 weak outcomes"


def document(
    judged: list[Judged],
    controls: list[LitmusRun],
    harness: tuple[bool, str],
    header: dict,
) -> dict:
    return {
        **header,
        "harness_ok": harness[0],
        "harness": harness[1],
        "controls": [run_dict(r) for r in controls],
        "mutants": [
            {
                "id": j.mapped.fault_id,
                "family": j.mapped.family.value,
                "site": j.mapped.site,
                "shape": j.mapped.shape.to_dict() if j.mapped.shape else None,
                "verdict": j.verdict.value,
                "reason": j.reason,
                "runs": [run_dict(r) for r in j.runs],
            }
            for j in judged
        ],
    }


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def run_row(name: str, litmus: str, verdict: str, run: dict | None) -> str:
    """One table line: a control's or a mutant's run under one stress (none: not run)."""
    if run is None:
        return f"| {name} | {litmus} | - | - | - | - | - | {verdict} |"
    rate = _number(run["rate"]) if run["kills"] else f"< {_number(run['rate_upper_95'])}"
    return (
        f"| {name} | {litmus} | {run['stress']} | {run['kills']} | {run['observations']} | "
        f"{rate} | {run['reproducibility']:.3f} | {verdict} |"
    )


def litmus_label(shape: dict | None) -> str:
    if shape is None:
        return "-"
    barrier = "" if shape["producer_barrier"] else ", no barrier"
    across = ", GPU 0 -> GPU 1" if shape.get("across_gpus") else ""
    return (
        f"{shape['publish']} / {shape['wait']} "
        f"({shape['producers']} -> {shape['consumers']}{barrier}{across})"
    )


def markdown(doc: dict) -> str:
    lines = [
        f"# Amplification on {doc['machine']}",
        "",
        f"- source digest {doc['source_digest'][:12]}, litmus digest {doc['litmus_digest'][:12]}",
        f"- rank mode: {doc['rank_mode']}; {doc['placement']}",
        f"- stress: {', '.join(doc['stress'])}; {doc['nvlink']}",
        f"- harness: {doc['harness']}",
        "",
        "| mutant | litmus | stress | kills k | observations n | rate | 1-e^-k | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in doc["controls"]:
        lines.append(run_row("control", litmus_label(run["shape"]), "control", run))
    for mutant in doc["mutants"]:
        litmus = litmus_label(mutant["shape"])
        for run in mutant["runs"] or [None]:
            lines.append(run_row(mutant["id"], litmus, mutant["verdict"], run))
    reasons = [f"- `{m['id']}`: {m['verdict']}: {m['reason']}" for m in doc["mutants"]]
    return "\n".join([*lines, "", "## Reasons", "", *reasons]) + "\n"
