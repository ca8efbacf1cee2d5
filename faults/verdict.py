"""The verdict stage: an outcome against its fault's expectation, through one
table of rules (mutmut's way): the first rule whose condition holds decides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from faults.catalog import Fault, Patch
from faults.parse import Outcome


class Verdict(str, Enum):
    PASSED = "PASSED"
    BROKE = "BROKE"
    KILLED = "KILLED"
    HUNG = "HUNG"
    SURVIVED = "SURVIVED"
    NOT_FIRED = "NOT FIRED"
    WRONG_TREE = "WRONG TREE"
    APPLY_ERROR = "APPLY ERROR"
    BUILD_ERROR = "BUILD ERROR"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    ok: bool  # the expectation was met (a known survivor counts as met, and is reported)
    reason: str


Rule = tuple[str, Callable[[Outcome, int, bool], bool], Verdict, bool, str]

# (expect, condition(outcome, own markers, digest matches), verdict, ok, reason)
RULES: tuple[Rule, ...] = (
    (
        "any",
        lambda o, m, d: m == 0,
        Verdict.NOT_FIRED,
        False,
        "no AFDFAULT marker of this fault: the patched code never ran, so it proves nothing",
    ),
    (
        "any",
        lambda o, m, d: not d,
        Verdict.WRONG_TREE,
        False,
        "the log's digest is not the scratch tree's: another tree ran",
    ),
    (
        "pass",
        lambda o, m, d: o.exit_code == 0 and not o.detected and not o.outer_timeout,
        Verdict.PASSED,
        True,
        "clean run with the fault firing",
    ),
    ("pass", lambda o, m, d: True, Verdict.BROKE, False, "a must-pass fault broke the run"),
    (
        "fail",
        lambda o, m, d: o.outer_timeout,
        Verdict.HUNG,
        False,
        "only the outer timeout ended it: a wait hung without naming its site",
    ),
    (
        "fail",
        lambda o, m, d: o.exit_code not in (0, None) and o.detected,
        Verdict.KILLED,
        True,
        "the run failed and said why",
    ),
    (
        "fail",
        lambda o, m, d: o.exit_code == 0 and not o.detected,
        Verdict.SURVIVED,
        False,
        "the run passed clean with a must-fail fault",
    ),
    (
        "fail",
        lambda o, m, d: True,
        Verdict.BROKE,
        False,
        "exit status and log disagree (a failure with no mismatch, timeout or assertion line)",
    ),
)


def judge(
    fault: Fault,
    outcome: Outcome,
    tree_digest: str,
    *,
    patches: list[Patch],
    guards: dict[str, str | None],
) -> Judgement:
    """`patches`: the fault's patches with its includes'; `guards`: each site's
    guarded site, from the tree that ran (for the survivor hint)."""
    markers = outcome.markers.get(fault.id, 0)
    digest_ok = outcome.digests == [tree_digest]
    for expect, condition, verdict, ok, reason in RULES:
        if expect in ("any", fault.expect) and condition(outcome, markers, digest_ok):
            if verdict is Verdict.SURVIVED:
                ok = fault.survivor_ok is not None
                reason = f"{reason}; hint: {survivor_hint(patches, guards)}"
                if fault.survivor_ok:
                    reason += f"; known survivor: {fault.survivor_ok}"
            return Judgement(verdict, ok, reason)
    raise AssertionError("the last rule of each expectation always holds")


def survivor_hint(patches: list[Patch], guards: dict[str, str | None]) -> str:
    """A skipped wait survives when the data it guards is there anyway: delay
    the guarded site, not the flag (the seed's N3 -> N3b lesson)."""
    delayed = {p.site for p in patches if p.action == "delay"}
    hints = []
    for patch in patches:
        if patch.action != "skip":
            continue
        guarded = guards.get(patch.site)
        if guarded is None:
            hints.append(f"{patch.site} guards no site: delay what produces its data")
        elif guarded in delayed:
            hints.append(
                f"{guarded} (guarded by {patch.site}) is delayed already: "
                "delay it longer, or delay where its data is made"
            )
        else:
            hints.append(f"delay {guarded}, the site {patch.site} guards")
    return "; ".join(hints) or "no wait was skipped: this fault cannot open a race"
