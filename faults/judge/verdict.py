"""The verdict stage: an outcome against its fault's expectation, through one
table of rules (mutmut's way): the first rule whose condition holds decides.
A must-fail fault that ran clean is UNOBSERVABLE, not SURVIVED, when the
static contract flags its tree (docs/operators.md, "Mutation operators")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from faults.catalog import Fault, Patch
from faults.generate.mutate import family_hint
from faults.judge.outcome import Outcome
from faults.operators import ORDER_FAMILIES

# The static contract's violations in the tree that ran, one line (None: it
# holds); asked only of a must-fail fault that ran clean. A check that cannot
# be made raises, and the survivor says why.
ContractFlags = Callable[[], str | None]
NO_CONTRACT = (
    "no static contract is configured for this target ([target.contract]), "
    "so a survivor is neither EQUIVALENT nor UNOBSERVABLE"
)


class Verdict(str, Enum):
    PASSED = "PASSED"
    BROKE = "BROKE"
    KILLED = "KILLED"
    HUNG = "HUNG"
    TIMED_OUT = "TIMED OUT"
    SURVIVED = "SURVIVED"
    # A must-fail fault that ran clean whose tree the static contract flags:
    # the hardware did not show the bug, the contract catches it.
    UNOBSERVABLE = "UNOBSERVABLE"
    # A mutant that weakens order, ran clean, and whose tree still meets the
    # static contract: it took away nothing the contract requires (a fence
    # before a store that is itself a release): an equivalent mutant.
    EQUIVALENT = "EQUIVALENT"
    # Decided before any run: the fault's tree, its markers left out, compiles
    # to the clean tree's SASS (faults/pipeline/erasure.py): nothing the hardware executes changed.
    ERASED = "ERASED"
    FLAKY = "FLAKY"  # a fault over repeats: killed in some runs, not all
    NOT_FIRED = "NOT FIRED"
    WRONG_TREE = "WRONG TREE"
    APPLY_ERROR = "APPLY ERROR"
    BUILD_ERROR = "BUILD ERROR"

    def __str__(self) -> str:  # reports and summary lines print the word
        return self.value


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    ok: bool  # the expectation was met (a known survivor counts as met, and is reported)
    reason: str


def _outer_timeout(outcome: Outcome) -> str:
    limit = "" if outcome.timeout_s is None else f" ({outcome.timeout_s:g} s)"
    return f"the outer timeout{limit} ended the run"


def _unmarked(markers: int) -> str:
    return "" if markers else "; no marker of this fault printed before it"


def _hung(outcome: Outcome, markers: int) -> str:
    said = outcome.named_failures()
    what = f"it hung after naming {said}" if said else "a wait hung without naming its site"
    return f"only {_outer_timeout(outcome)}: {what}{_unmarked(markers)}"


def _timed_out(outcome: Outcome, markers: int) -> str:
    return f"{_outer_timeout(outcome)}: a must-pass fault must let it finish{_unmarked(markers)}"


def _broke_must_pass(outcome: Outcome, markers: int) -> str:
    said = f"; {outcome.named_failures()}" if outcome.detected else ""
    return f"a must-pass fault broke the run (exit {outcome.exit_code}{said})"


def _killed(outcome: Outcome, markers: int) -> str:
    return f"the run failed and said why: {outcome.named_failures()}"


def _disagree(outcome: Outcome, markers: int) -> str:
    said = (
        outcome.named_failures()
        if outcome.detected
        else "no mismatch, timeout, assertion or device error line"
    )
    return f"exit status and log disagree (exit {outcome.exit_code} with {said})"


def _clean(outcome: Outcome, markers: int, digest_ok: bool) -> bool:
    """It exited 0 and its log names no failure."""
    return outcome.exit_code == 0 and not outcome.detected


def _failed_saying_why(outcome: Outcome, markers: int, digest_ok: bool) -> bool:
    return outcome.exit_code not in (0, None) and outcome.detected


Reason = str | Callable[[Outcome, int], str]
Rule = tuple[str, Callable[[Outcome, int, bool], bool], Verdict, bool, Reason]

# (expect, condition(outcome, own markers, digest matches), verdict, ok, reason).
# The outer timeout comes first: a run killed before its markers or its digest
# printed says nothing about them, so it is never NOT FIRED or WRONG TREE.
RULES: tuple[Rule, ...] = (
    ("fail", lambda o, m, d: o.outer_timeout, Verdict.HUNG, False, _hung),
    ("pass", lambda o, m, d: o.outer_timeout, Verdict.TIMED_OUT, False, _timed_out),
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
    ("pass", _clean, Verdict.PASSED, True, "clean run with the fault firing"),
    ("pass", lambda o, m, d: True, Verdict.BROKE, False, _broke_must_pass),
    ("fail", _failed_saying_why, Verdict.KILLED, True, _killed),
    ("fail", _clean, Verdict.SURVIVED, False, "the run passed clean with a must-fail fault"),
    ("fail", lambda o, m, d: True, Verdict.BROKE, False, _disagree),
)


def judge(
    fault: Fault,
    outcome: Outcome,
    tree_digest: str,
    *,
    patches: list[Patch],
    guards: dict[str, str | None],
    contract: ContractFlags | None = None,
) -> Judgement:
    """`patches`: the fault's patches with its includes'; `guards`: each site's
    guarded site, from the tree that ran (for the survivor hint); `contract`:
    the static contract's violations in that tree, asked only of a survivor."""
    markers = outcome.markers.get(fault.id, 0)
    digest_ok = outcome.digests == [tree_digest]
    for expect, condition, verdict, ok, reason in RULES:
        if expect in ("any", fault.expect) and condition(outcome, markers, digest_ok):
            reason = reason if isinstance(reason, str) else reason(outcome, markers)
            if verdict is Verdict.SURVIVED:
                return _survived(fault, reason, patches, guards, contract)
            return Judgement(verdict, ok, reason)
    raise AssertionError("the last rule of each expectation always holds")


def _survived(
    fault: Fault,
    reason: str,
    patches: list[Patch],
    guards: dict[str, str | None],
    contract: ContractFlags | None,
) -> Judgement:
    """A must-fail fault that ran clean: a known survivor says why; otherwise
    a mutant that weakens order (ORDER_FAMILIES) whose tree the static contract
    flags is UNOBSERVABLE. A hand-written fault or a skipped wait that survives
    stays SURVIVED, flagged or not: its runs were meant to show it."""
    hint = family_hint(fault.family) or survivor_hint(patches, guards)
    if fault.survivor_ok:
        return Judgement(
            Verdict.SURVIVED, True, f"{reason}; hint: {hint}; known survivor: {fault.survivor_ok}"
        )
    if fault.family not in ORDER_FAMILIES:
        return Judgement(Verdict.SURVIVED, False, f"{reason}; hint: {hint}")
    if contract is None:  # nothing can tell equivalence from blindness
        return Judgement(Verdict.SURVIVED, False, f"{reason}; hint: {hint}; {NO_CONTRACT}")
    try:
        flags = contract()
    except Exception as error:  # no contract, no equivalence: judged as with no checker
        unchecked = f"the static contract was not checked: {type(error).__name__}: {error}"
        return Judgement(Verdict.SURVIVED, False, f"{reason}; hint: {hint}; {unchecked}")
    if flags:
        return Judgement(
            Verdict.UNOBSERVABLE,
            True,
            f"{reason}, but the static contract flags its tree: {flags}; hint: {hint}",
        )
    return Judgement(
        Verdict.EQUIVALENT,
        True,
        f"{reason}, and the static contract still holds on its tree: the order it "
        "weakens is kept another way (a fence or a release of the scope, a barrier)",
    )


def judge_control(outcome: Outcome, digest: str, must_fail: bool) -> Judgement:
    """A control run: the unpatched tree must pass clean; the forced failure
    must be detected (exit non-zero with a line the target's log patterns name).
    The outer timeout comes first, as for faults."""
    if outcome.outer_timeout:
        control = "the forced-fail control" if must_fail else "the unpatched tree"
        return Judgement(
            Verdict.TIMED_OUT, False, f"{_outer_timeout(outcome)} of {control}: the harness hangs"
        )
    if outcome.digests != [digest]:
        return Judgement(Verdict.WRONG_TREE, False, "the log's digest is not the scratch tree's")
    if must_fail:
        if outcome.exit_code not in (0, None) and outcome.detected:
            detected = f"the forced failure was detected: {outcome.named_failures()}"
            return Judgement(Verdict.KILLED, True, detected)
        return Judgement(
            Verdict.SURVIVED,
            False,
            "the forced failure was not detected: the harness cannot see a failure, "
            "so no fault can be judged",
        )
    if outcome.exit_code == 0 and not outcome.detected:
        return Judgement(Verdict.PASSED, True, "the unpatched tree passes")
    return Judgement(Verdict.BROKE, False, "the unpatched tree fails: the harness is broken")


def survivor_hint(patches: list[Patch], guards: dict[str, str | None]) -> str:
    """A skipped wait survives when the data it guards is there anyway: delay
    the guarded site, not the flag (docs/history.md: N3 and N3b)."""
    delayed = {p.site for p in patches if p.action == "delay"}
    hints = [
        f"the text patch in {p.file} ran and changed nothing visible: hold back the data "
        "its site orders (delay the producers' stores, not the publisher) so the window opens"
        for p in patches
        if p.file is not None
    ]
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


ERRORS = (Verdict.APPLY_ERROR, Verdict.BUILD_ERROR, Verdict.WRONG_TREE)


@dataclass(frozen=True)
class FaultSummary:
    """A fault over all its configs and repeats."""

    fault: str
    expect: str
    verdict: Verdict
    ok: bool
    runs: int
    fired: int
    killed: int
    kill_rate: float | None  # must-fail faults that fired: killed / fired
    repeats_for_99: int | None  # repeats a kill rate this low needs for 99 % confidence
    reason: str
    family: str | None = None  # the generated fault's family (faults.generate.mutate.Family's word)
    markers: dict[str, int] = field(default_factory=dict)  # config -> this fault's markers

    def __post_init__(self) -> None:  # a summary read back from a JSON report holds the word
        object.__setattr__(self, "verdict", Verdict(self.verdict))


def repeats_for_confidence(kill_rate: float, confidence: float = 0.99) -> int | None:
    """n >= ln(1 - confidence) / ln(1 - p): runs that kill at rate p at least once
    with that confidence (None when p = 0: no number of runs will do)."""
    if kill_rate <= 0:
        return None
    if kill_rate >= 1:
        return 1
    return math.ceil(math.log(1 - confidence) / math.log(1 - kill_rate))


def summarize_fault(fault: Fault, results: list) -> FaultSummary:
    """Configs where the fault's code never ran (NOT FIRED) do not count against
    it when another config fired it: a protocol's sites run only under it.
    `results`: RunResults (their verdicts are Verdicts)."""
    errors = [r.verdict for r in results if r.verdict in ERRORS]
    fired = [r for r in results if r.verdict is not Verdict.NOT_FIRED]
    killed = sum(r.verdict is Verdict.KILLED for r in fired)
    base = dict(
        fault=fault.id,
        expect=fault.expect,
        runs=len(results),
        fired=len(fired),
        killed=killed,
        family=fault.family.value if fault.family else None,
        markers=own_markers(fault.id, results),
    )
    unrated = dict(kill_rate=None, repeats_for_99=None)
    erased = [r for r in results if r.verdict is Verdict.ERASED]
    if erased and not errors:  # decided before any run: no config ran it
        return FaultSummary(
            **base, **unrated, verdict=Verdict.ERASED, ok=erased[0].ok, reason=erased[0].reason
        )
    if errors:
        return FaultSummary(
            **base, **unrated, verdict=errors[0], ok=False, reason=_first_reason(results, errors[0])
        )
    if not fired:
        return FaultSummary(
            **base,
            **unrated,
            verdict=Verdict.NOT_FIRED,
            ok=False,
            reason="no config ran the patched code",
        )
    if fault.expect == "pass":
        broke = [r for r in fired if r.verdict is not Verdict.PASSED]
        verdict = broke[0].verdict if broke else Verdict.PASSED
        return FaultSummary(
            **base, **unrated, verdict=verdict, ok=not broke, reason=_first_reason(results, verdict)
        )
    rate = killed / len(fired)
    verdict, ok = _must_fail_verdict(fault, fired)
    reason = _must_fail_reason(results, fired, verdict)
    return FaultSummary(
        **base,
        verdict=verdict,
        ok=ok,
        kill_rate=round(rate, 4),
        repeats_for_99=repeats_for_confidence(rate),
        reason=reason,
    )


def killing_configs(fired: list) -> list[str]:
    """The configs under which every run that fired killed: a config the
    fault shows under deterministically (its repeats agree)."""
    by_config: dict[str, list] = {}
    for result in fired:
        by_config.setdefault(result.config, []).append(result.verdict is Verdict.KILLED)
    return [config for config, kills in by_config.items() if all(kills)]


def _must_fail_verdict(fault: Fault, fired: list) -> tuple[Verdict, bool]:
    """KILLED when some config kills it in every run (the tests that run that
    config catch it); FLAKY when runs kill it but no config every time."""
    if killing_configs(fired):
        return Verdict.KILLED, True
    if any(r.verdict is Verdict.KILLED for r in fired):
        return Verdict.FLAKY, False
    # Never killed: a hang or a broken run says more than a clean one; a
    # clean run the static contract flagged is UNOBSERVABLE, one it passed
    # EQUIVALENT.
    seen = {r.verdict for r in fired}
    worst = (Verdict.HUNG, Verdict.BROKE, Verdict.UNOBSERVABLE, Verdict.EQUIVALENT)
    verdict = next((v for v in worst if v in seen), Verdict.SURVIVED)
    ok = verdict in (Verdict.UNOBSERVABLE, Verdict.EQUIVALENT) or (
        verdict is Verdict.SURVIVED and fault.survivor_ok is not None
    )
    return verdict, ok


def _must_fail_reason(results: list, fired: list, verdict: Verdict) -> str:
    killed = sum(r.verdict is Verdict.KILLED for r in fired)
    if verdict is Verdict.FLAKY:
        return f"killed in {killed} of {len(fired)} runs"
    reason = _first_reason(results, verdict)
    clean = sorted({r.config for r in fired if r.verdict is not Verdict.KILLED})
    if verdict is Verdict.KILLED and clean:
        return f"{reason}; not killed under {', '.join(clean)}"
    return reason


def own_markers(fault_id: str, results: list) -> dict[str, int]:
    """Config -> the markers this fault's own patches printed, over its repeats."""
    counts: dict[str, int] = {}
    for result in results:
        if result.outcome is not None:
            seen = result.outcome.get("markers", {}).get(fault_id, 0)
            counts[result.config] = counts.get(result.config, 0) + seen
    return counts


def _first_reason(results: list, verdict: Verdict) -> str:
    return next((r.reason for r in results if r.verdict is verdict), "")
