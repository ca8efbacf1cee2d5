"""The verdict table, outcome by outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import Fault, Patch, load_catalog
from faults.judge.outcome import Outcome
from faults.judge.verdict import Verdict, judge, judge_control, survivor_hint
from faults.pipeline.parse import parse_outcome
from hostio import ProcessOutcome

REPO = Path(__file__).parents[4]

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
        ("pass", {"outer_timeout": True, "exit_code": None}, Verdict.TIMED_OUT, False),
        (
            "pass",
            {"outer_timeout": True, "exit_code": None, "markers": {}},
            Verdict.TIMED_OUT,
            False,
        ),
        ("pass", {"exit_code": 1, "device_errors": 1}, Verdict.BROKE, False),
        ("pass", {"digests": ["e" * 64]}, Verdict.WRONG_TREE, False),
        ("pass", {"digests": [DIGEST, "e" * 64]}, Verdict.WRONG_TREE, False),
        ("fail", {"exit_code": 1, "mismatches": 8}, Verdict.KILLED, True),
        ("fail", {"exit_code": 1, "assertion_lines": 3}, Verdict.KILLED, True),
        ("fail", {"exit_code": 1, "timeout_lines": 1}, Verdict.KILLED, True),
        ("fail", {"exit_code": None, "outer_timeout": True}, Verdict.HUNG, False),
        ("fail", {"exit_code": None, "outer_timeout": True, "markers": {}}, Verdict.HUNG, False),
        ("fail", {"exit_code": None, "outer_timeout": True, "digests": []}, Verdict.HUNG, False),
        ("fail", {"exit_code": 1, "device_errors": 2}, Verdict.KILLED, True),
        ("fail", {"exit_code": 0, "device_errors": 1}, Verdict.BROKE, False),
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
    judgement = verdict("fail", survivor_ok="it passed on 4 GPUs")
    assert judgement.verdict is Verdict.SURVIVED and judgement.ok
    assert "hint: delay x.source.store, the site x.sink.wait guards" in judgement.reason
    assert "known survivor: it passed on 4 GPUs" in judgement.reason


def test_hint_when_the_guarded_site_is_already_delayed():
    hint = survivor_hint([DELAY, SKIP], GUARDS)
    assert hint.startswith("x.source.store (guarded by x.sink.wait) is delayed already")
    assert survivor_hint([DELAY], GUARDS) == "no wait was skipped: this fault cannot open a race"


@pytest.mark.parametrize(
    "expect, changes, reason",
    [
        (
            "fail",
            {"exit_code": None, "outer_timeout": True, "markers": {}, "timeout_s": 240.0},
            "only the outer timeout (240 s) ended the run: a wait hung without naming its "
            "site; no marker of this fault printed before it",
        ),
        (
            "fail",
            {"exit_code": None, "outer_timeout": True, "timeout_lines": 2},
            "only the outer timeout ended the run: it hung after naming 2 timeout lines",
        ),
        (
            "pass",
            {"exit_code": None, "outer_timeout": True, "markers": {}, "timeout_s": 0.5},
            "the outer timeout (0.5 s) ended the run: a must-pass fault must let it finish; "
            "no marker of this fault printed before it",
        ),
        (
            "fail",
            {"exit_code": 1, "device_errors": 1, "mismatches": 8},
            "the run failed and said why: 8 mismatch lines, 1 device error line",
        ),
        (
            "pass",
            {"exit_code": 1, "device_errors": 1},
            "a must-pass fault broke the run (exit 1; 1 device error line)",
        ),
        ("pass", {"exit_code": -11}, "a must-pass fault broke the run (exit -11)"),
        (
            "fail",
            {"exit_code": 139},
            "exit status and log disagree (exit 139 with no mismatch, timeout, assertion or "
            "device error line)",
        ),
    ],
)
def test_reasons_say_what_happened(expect, changes, reason):
    assert verdict(expect, **changes).reason == reason


@pytest.mark.parametrize(
    "must_fail, changes, expected",
    [
        (False, {}, (Verdict.PASSED, True, "the unpatched tree passes")),
        (
            False,
            {"exit_code": None, "outer_timeout": True, "digests": [], "timeout_s": 60.0},
            (
                Verdict.TIMED_OUT,
                False,
                "the outer timeout (60 s) ended the run of the unpatched tree: the harness hangs",
            ),
        ),
        (
            True,
            {"exit_code": None, "outer_timeout": True},
            (
                Verdict.TIMED_OUT,
                False,
                "the outer timeout ended the run of the forced-fail control: the harness hangs",
            ),
        ),
        (
            True,
            {"exit_code": 1, "device_errors": 1},
            (Verdict.KILLED, True, "the forced failure was detected: 1 device error line"),
        ),
        (
            False,
            {"exit_code": 1, "device_errors": 1},
            (Verdict.BROKE, False, "the unpatched tree fails: the harness is broken"),
        ),
        *[
            (
                True,
                changes,
                (
                    Verdict.SURVIVED,
                    False,
                    "the forced failure was not detected: the harness cannot see a failure, "
                    "so no fault can be judged",
                ),
            )
            for changes in ({}, {"exit_code": 1})  # a clean run; a failure no log line names
        ],
    ],
)
def test_controls(must_fail, changes, expected):
    judgement = judge_control(outcome(**changes), DIGEST, must_fail)
    assert (judgement.verdict, judgement.ok, judgement.reason) == expected


def test_verdicts_are_members_that_print_their_word():
    assert Verdict("FLAKY") is Verdict.FLAKY and Verdict("TIMED OUT") is Verdict.TIMED_OUT
    assert [str(v) for v in (Verdict.NOT_FIRED, Verdict.FLAKY)] == ["NOT FIRED", "FLAKY"]
    assert f"{Verdict.WRONG_TREE} -> {Verdict.TIMED_OUT}" == "WRONG TREE -> TIMED OUT"


def test_a_log_is_read_through_the_targets_patterns(tmp_path):
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    log = tmp_path / "run.log"
    log.write_text(
        "\n".join(
            [
                f'[default0]:"native_source_sha256": "{DIGEST}"',
                "[default1]:AFDFAULT N2 rank=1",
                "[default1]:AFDFAULT N2 rank=1",
                "[default0]:Mismatched x rank=0 token=3: 1 != 2",
                "[default1]:afdep timeout: site=cf.ffn_place.count_wait rank=1 expected=3 seen=2",
                "[default1]:afdep assertion failed: route wide token=3 slot=1 rank=0",
                "[default1]:torch.AcceleratorError: CUDA error: an illegal memory access was "
                "encountered",
                "[default0]:fine",
            ]
        )
        + "\n"
    )
    process = ProcessOutcome(["run"], 1, 2.5, False, str(log), "f" * 64)
    parsed = parse_outcome(process, catalog.target.log, timeout_s=240.0)
    assert parsed == Outcome(
        exit_code=1,
        outer_timeout=False,
        wall_s=2.5,
        mismatches=1,
        timeout_lines=1,
        assertion_lines=1,
        device_errors=1,
        markers={"N2": 2},
        digests=[DIGEST],
        log_path=str(log),
        log_sha256="f" * 64,
        timeout_s=240.0,
    )
    assert parsed.detected


def test_a_timed_out_run_counts_as_fired_and_names_the_summary():
    from faults.judge.verdict import summarize_fault
    from faults.judge.run_result import RunResult

    def run(verdict: Verdict, reason: str = "") -> RunResult:
        return RunResult("F", "c", 0, verdict, verdict is Verdict.KILLED, reason, DIGEST)

    timed_out = summarize_fault(
        fault("pass"), [run(Verdict.PASSED), run(Verdict.TIMED_OUT, "the outer timeout")]
    )
    assert (timed_out.verdict, timed_out.ok, timed_out.fired, timed_out.reason) == (
        Verdict.TIMED_OUT,
        False,
        2,
        "the outer timeout",
    )
    flaky = summarize_fault(fault("fail"), [run(Verdict.KILLED), run(Verdict.HUNG)])
    assert (flaky.verdict, flaky.kill_rate, flaky.reason) == (
        Verdict.FLAKY,
        0.5,
        "killed in 1 of 2 runs",
    )
    hung = summarize_fault(fault("fail"), [run(Verdict.HUNG, "hung"), run(Verdict.SURVIVED)])
    assert (hung.verdict, hung.ok, hung.reason) == (Verdict.HUNG, False, "hung")
