"""The verdict table, outcome by outcome."""

from __future__ import annotations

import pytest

from faults.catalog import Fault, Patch
from faults.parse import Outcome
from faults.verdict import Verdict, judge, survivor_hint

DIGEST = "d" * 64
SKIP = Patch("F", site="x.sink.wait", action="skip")
DELAY = Patch("F", site="x.source.store", action="delay", ns=5)
GUARDS = {"x.sink.wait": "x.source.store", "x.source.store": None}


def outcome(**changes) -> Outcome:
    base = dict(
        exit_code=0,
        outer_timeout=False,
        wall_s=1.0,
        mismatches=0,
        timeout_lines=0,
        assertion_lines=0,
        markers={"F": 3},
        digests=[DIGEST],
    )
    return Outcome(**{**base, **changes})


def fault(expect: str, survivor_ok: str | None = None) -> Fault:
    return Fault("F", "t", expect, (SKIP,), survivor_ok=survivor_ok)


def verdict(expect, patches=(SKIP,), survivor_ok=None, **changes):
    return judge(
        fault(expect, survivor_ok), outcome(**changes), DIGEST, patches=list(patches), guards=GUARDS
    )


@pytest.mark.parametrize(
    "expect, changes, expected, ok",
    [
        ("pass", {}, Verdict.PASSED, True),
        ("pass", {"markers": {"G": 4}}, Verdict.NOT_FIRED, False),
        ("pass", {"exit_code": 1, "mismatches": 2}, Verdict.BROKE, False),
        ("pass", {"timeout_lines": 1, "exit_code": 1}, Verdict.BROKE, False),
        ("pass", {"outer_timeout": True, "exit_code": None}, Verdict.BROKE, False),
        ("pass", {"digests": ["e" * 64]}, Verdict.WRONG_TREE, False),
        ("pass", {"digests": [DIGEST, "e" * 64]}, Verdict.WRONG_TREE, False),
        ("fail", {"exit_code": 1, "mismatches": 8}, Verdict.KILLED, True),
        ("fail", {"exit_code": 1, "assertion_lines": 3}, Verdict.KILLED, True),
        ("fail", {"exit_code": 1, "timeout_lines": 1}, Verdict.KILLED, True),
        ("fail", {"exit_code": None, "outer_timeout": True}, Verdict.HUNG, False),
        ("fail", {}, Verdict.SURVIVED, False),
        ("fail", {"exit_code": 139}, Verdict.BROKE, False),
        ("fail", {"markers": {}, "exit_code": 1, "mismatches": 1}, Verdict.NOT_FIRED, False),
        ("fail", {"digests": [], "exit_code": 1, "mismatches": 1}, Verdict.WRONG_TREE, False),
    ],
)
def test_rules(expect, changes, expected, ok):
    judgement = verdict(expect, **changes)
    assert (judgement.verdict, judgement.ok) == (expected, ok)


def test_known_survivor_is_ok_and_reported_with_the_hint():
    judgement = verdict("fail", survivor_ok="the seed saw it pass")
    assert judgement.verdict is Verdict.SURVIVED and judgement.ok
    assert "hint: delay x.source.store, the site x.sink.wait guards" in judgement.reason
    assert "known survivor: the seed saw it pass" in judgement.reason


def test_hint_when_the_guarded_site_is_already_delayed():
    hint = survivor_hint([DELAY, SKIP], GUARDS)
    assert hint.startswith("x.source.store (guarded by x.sink.wait) is delayed already")
    assert survivor_hint([DELAY], GUARDS) == "no wait was skipped: this fault cannot open a race"
