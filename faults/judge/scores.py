"""The sweep's scores: the mutation score and firing rate over its faults, and
the score per family of must-fail faults (docs/operators.md, "Mutation
operators")."""

from __future__ import annotations

from faults.judge.verdict import FaultSummary, Verdict
from faults.operators import Family

# How a must-fail fault's summary counts in its family's score: the verdicts a
# judged run can end in, each its own column (docs/operators.md, "Mutation
# operators"); NOT FIRED and the apply, build and tree errors judged nothing.
SCORED = {
    Verdict.KILLED: "killed",
    Verdict.SURVIVED: "survived",
    Verdict.UNOBSERVABLE: "unobservable",
    Verdict.FLAKY: "flaky",
    Verdict.HUNG: "hung",
    Verdict.BROKE: "broke",
}
# Outside the score too: NOT FIRED judged nothing; an EQUIVALENT mutant took
# away nothing the contract requires; an ERASED one changed no machine code.
# The rest (APPLY/BUILD ERROR, WRONG TREE): errors.
UNJUDGED = {
    Verdict.NOT_FIRED: "not_fired",
    Verdict.EQUIVALENT: "equivalent",
    Verdict.ERASED: "erased",
}
HAND_WRITTEN = "catalog"  # the family column of a hand-written fault


def mutation_score(must_fail: list[FaultSummary]) -> float | None:
    """killed / (killed + survived + unobservable + flaky + hung + broke) over
    `must_fail`, None when none was judged: the one computation of the
    sweep's score and of each family's."""
    verdicts = [Verdict(s.verdict) for s in must_fail]
    judged = sum(verdict in SCORED for verdict in verdicts)
    killed = sum(verdict is Verdict.KILLED for verdict in verdicts)
    return round(killed / judged, 4) if judged else None


def scores(summaries: list[FaultSummary]) -> tuple[float | None, float | None]:
    """The mutation score over every must-fail fault (as each family's,
    mutation_score: EQUIVALENT, ERASED, NOT FIRED and errors outside it) and
    the firing rate (faults that fired / faults)."""
    mutation = mutation_score([s for s in summaries if s.expect == "fail"])
    fired = sum(bool(s.fired) for s in summaries)
    return mutation, round(fired / len(summaries), 4) if summaries else None


def family_scores(summaries: list[FaultSummary]) -> dict[str, dict]:
    """Per family of must-fail faults (hand-written ones under "catalog"): each
    verdict's count, and score = killed / (killed + survived + unobservable +
    flaky + hung + broke), None when nothing was judged. NOT FIRED, EQUIVALENT
    and errors are counted beside it, outside the score."""
    families: dict[str, dict] = {}
    order = [family.value for family in Family] + [HAND_WRITTEN]
    must_fail = [s for s in summaries if s.expect == "fail"]
    for summary in sorted(must_fail, key=lambda s: order.index(s.family or HAND_WRITTEN)):
        row = families.setdefault(
            summary.family or HAND_WRITTEN,
            {"faults": 0, **dict.fromkeys([*SCORED.values(), *UNJUDGED.values()], 0), "errors": 0},
        )
        verdict = Verdict(summary.verdict)
        row["faults"] += 1
        row[SCORED.get(verdict) or UNJUDGED.get(verdict) or "errors"] += 1
    for name, row in families.items():
        row["score"] = mutation_score([s for s in must_fail if (s.family or HAND_WRITTEN) == name])
    return families
