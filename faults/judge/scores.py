"""The sweep's scores: the mutation score and firing rate over its faults, and
the score per family of must-fail faults (docs/architecture.md, "Mutation
operators")."""

from __future__ import annotations

from faults.catalog.model import Family
from faults.judge.verdict import FaultSummary, Verdict


def scores(summaries: list[FaultSummary]) -> tuple[float | None, float | None]:
    """Mutation score (killed / must-fail that fired) and firing rate."""
    must_fail = [
        s for s in summaries if s.expect == "fail" and s.fired and s.verdict is not Verdict.ERASED
    ]
    killed = sum(s.verdict == Verdict.KILLED for s in must_fail)
    mutation = round(killed / len(must_fail), 4) if must_fail else None
    fired = sum(bool(s.fired) for s in summaries)
    return mutation, round(fired / len(summaries), 4) if summaries else None


# How a must-fail fault's summary counts in its family's score: the verdicts a
# judged run can end in, each its own column (docs/architecture.md, "Mutation
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
    for row in families.values():
        judged = sum(row[column] for column in SCORED.values())
        row["score"] = round(row["killed"] / judged, 4) if judged else None
    return families
