"""The correctness driver on real GPUs (`pytest -m gpu`): bitwise results,
route assertions on every rank, and a wait that times out naming its site."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from afdep.jit import source_digest
from afdep.vocab import RouteKind, parse_log
from hostio import run_logged
from tools.driver.launch import DRIVER, torchrun_command
from tools.driver.skew import launch_delays

pytestmark = pytest.mark.gpu
COMMON = ["--capacity", "2048", "--top-k", "8", "--num-experts", "128", "--steps", "2"]


def drive(tmp_path: Path, args: list[str], *, timeout_s: float = 240, env=None):
    outcome = run_logged(
        torchrun_command(2, DRIVER, args),
        tmp_path / "driver.log",
        timeout_s=timeout_s,
        env={**os.environ, **(env or {})},
    )
    facts = parse_log(Path(outcome.log_path).read_text(errors="replace"))
    return outcome, facts


@pytest.mark.parametrize(
    "payload, execution, extra",
    [
        ("bf16", "eager", []),
        ("bf16", "graph", []),
        ("fp8", "eager", []),
        ("fp8", "graph", ["--hidden-size", "7168"]),
        ("bf16", "graph", ["--collect-view"]),
        ("fp8", "eager", ["--collect-view", "--num-sms", "7"]),
    ],
)
def test_bitwise_equal_to_reference(tmp_path, payload, execution, extra):
    args = [*COMMON, "--payload", payload, f"--{execution}", "--tokens", "1", "128", "2048", *extra]
    outcome, facts = drive(tmp_path, args)
    result = facts.final_result
    assert outcome.exit_code == 0, Path(outcome.log_path).read_text()[-3000:]
    assert facts.mismatches == 0 and not facts.timeouts and not facts.assertions
    assert result["ok"] and result["mismatches"] == 0 and result["checks"] > 0
    assert [rank["role"] for rank in result["ranks"]] == ["attention", "ffn"]  # the wire's words
    assert facts.digests == [source_digest()]
    # The default launch skew, seeded by --seed 0: one line per step and rank.
    schedule = [
        (step, rank, launch_delays(0, step, 2)[rank]) for step in range(6) for rank in (0, 1)
    ]
    assert sorted(facts.skews) == schedule


@pytest.mark.parametrize("execution", ["eager", "graph"])
@pytest.mark.parametrize("kind", list(RouteKind))
def test_invalid_route_asserts_on_every_rank(tmp_path, kind, execution):
    args = [
        *COMMON,
        "--steps",
        "3",
        "--tokens",
        "128",
        "--invalid-route",
        kind.value,
        "--invalid-execution",
        execution,
    ]
    outcome, facts = drive(tmp_path, args, timeout_s=90)
    assert not outcome.outer_timeout and outcome.wall_s < 60
    assert outcome.exit_code not in (0, None)
    expected_token, expected_slot = (
        (128, 0) if kind == RouteKind.DUMMY else (0, 1 if kind == RouteKind.DUPLICATE else 0)
    )
    seen = {(k, t, s, rank) for k, t, s, rank in facts.route_asserts}
    assert {(kind, expected_token, expected_slot, rank) for rank in (0, 1)} <= seen, seen
    assert facts.mismatches == 0


@pytest.mark.parametrize(
    "skipped_rank, site", [(0, "pf.ffn_expand.done_wait"), (1, "cb.attention_combine.row_wait")]
)
def test_wait_that_cannot_complete_times_out_naming_its_site(tmp_path, skipped_rank, site):
    args = [*COMMON, "--tokens", "128", "--test-skip-dispatch-rank", str(skipped_rank)]
    outcome, facts = drive(tmp_path, args, timeout_s=90, env={"AFDEP_TIMEOUT_MS": "2000"})
    assert not outcome.outer_timeout and outcome.exit_code not in (0, None)
    assert site in {s for s, _ in facts.timeouts}, facts.timeouts
