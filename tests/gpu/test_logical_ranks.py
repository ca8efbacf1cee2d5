"""The one-GPU mode on one GPU (`pytest -m gpu`): logical ranks in one
process match the reference bitwise at every shape, a wait that cannot
complete times out naming its site (it never hangs), and a geometry whose
kernels cannot all be resident is refused before any launch
(docs/synchronization.md, "One GPU, logical ranks")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from afdep.config import KNOBS, PROTOCOL_FIELDS
from afdep.jit import source_digest
from afdep.vocab import RESULT, parse_log
from hostio import RankMode, run_logged
from tools.driver.launch import driver_command

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
PYTHONPATH = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this tree first
COMMON = ["--capacity", "2048", "--top-k", "8", "--hidden-size", "2048", "--steps", "2"]
SHAPES = {  # name: (ranks, ffn ranks)
    "1A:1F": (2, 1),
    "2A:1F": (3, 1),
    "3A:1F": (4, 1),
    "2A:2F": (4, 2),
    "1A:3F": (4, 3),
}
# Payload-first at 1 token, count-first at 128 and 2048: both protocols each run.
MIXED = {"AFDEP_COUNT_FIRST_MIN_BUCKET": "128"}


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without the shell's protocol knobs (they change what
    runs and the residency figures), this tree first on PYTHONPATH, and `extra`."""
    protocol = {name for name, knob in KNOBS.items() if knob.field in PROTOCOL_FIELDS}
    env = {k: v for k, v in os.environ.items() if k not in protocol}
    return {**env, "PYTHONPATH": PYTHONPATH, **(extra or {})}


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0).replace("NVIDIA ", "").split()[0]


def sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


def drive(tmp_path: Path, shape: str, args: list[str], *, env=None, timeout_s: float = 300):
    ranks, ffn_ranks = SHAPES[shape]
    command = driver_command(
        RankMode.LOGICAL,
        ranks,
        [*COMMON, "--ffn-ranks", str(ffn_ranks), "--experts-per-ffn", "32", *args],
    )
    outcome = run_logged(
        command,
        tmp_path / "driver.log",
        timeout_s=timeout_s,
        env=child_env(env),
    )
    text = Path(outcome.log_path).read_text(errors="replace")
    return outcome, parse_log(text), text


def assert_clean_pass(outcome, facts, text, shape: str) -> dict:
    ranks, ffn_ranks = SHAPES[shape]
    result = facts.final_result
    assert outcome.exit_code == 0 and not outcome.outer_timeout, text[-3000:]
    assert facts.mismatches == 0 and not facts.timeouts and not facts.assertions
    assert result["ok"] and result["mismatches"] == 0 and result["checks"] > 0
    assert result["mode"] == "logical"
    assert result["rank_mode"] == f"1x{gpu_name()}, {ranks} logical ranks"
    roles = ["attention"] * (ranks - ffn_ranks) + ["ffn"] * ffn_ranks
    assert [rank["role"] for rank in result["ranks"]] == roles
    assert [rank["rank"] for rank in result["ranks"]] == list(range(ranks))
    assert facts.digests == [source_digest()]
    assert f'[default0]:{RESULT} {{"ok": true' in text  # the summary, as rank 0 tees it
    return result


@pytest.mark.parametrize("execution", ["eager", "graph"])
@pytest.mark.parametrize("shape", ["1A:1F", "3A:1F"])
def test_logical_ranks_match_the_reference(tmp_path, shape, execution):
    args = ["--payload", "bf16", f"--{execution}", "--tokens", "1", "128", "2048"]
    outcome, facts, text = drive(tmp_path, shape, args, env=MIXED)
    result = assert_clean_pass(outcome, facts, text, shape)
    assert {p for rank in result["ranks"] for p in rank["protocols"]} == {
        "payload-first",
        "count-first",
    }


@pytest.mark.parametrize("shape", ["2A:1F", "2A:2F", "1A:3F"])
def test_every_other_shape_matches_the_reference(tmp_path, shape):
    args = ["--payload", "bf16", "--eager", "--tokens", "1", "128", "2048"]
    assert_clean_pass(*drive(tmp_path, shape, args, env=MIXED), shape)


def test_arm_attention_at_three_attention_ranks(tmp_path):
    # The source and the FFN wait on each other within one dispatch: both must run at once.
    env = {"AFDEP_COUNT_FIRST_MIN_BUCKET": "1", "AFDEP_COUNT_FIRST_ARM": "attention"}
    args = ["--payload", "bf16", "--graph", "--tokens", "8", "512"]
    assert_clean_pass(*drive(tmp_path, "3A:1F", args, env=env), "3A:1F")


def test_a_per_role_knob_outside_the_protocol_passes_and_a_protocol_knob_fails(tmp_path):
    args = ["--eager", "--tokens", "8", "--role-env", "ffn:AFDEP_TIMEOUT_MS=5000"]
    assert_clean_pass(*drive(tmp_path / "timeout", "3A:1F", args), "3A:1F")
    args = ["--eager", "--tokens", "8", "--role-env", "ffn:AFDEP_COUNT_FIRST_UNGATE=1"]
    outcome, facts, text = drive(tmp_path / "ungate", "3A:1F", args, timeout_s=120)
    assert outcome.exit_code == 1 and not outcome.outer_timeout
    assert facts.agreement_ranks == [0, 1, 2, 3], text[-3000:]


def test_a_wait_that_cannot_complete_times_out_on_one_gpu(tmp_path):
    # The FFN rank sends nothing: only the attention combine waits, so one site
    # times out (one context: the first trap ends every logical rank's kernels).
    args = ["--eager", "--tokens", "128", "--test-skip-dispatch-rank", "1"]
    outcome, facts, text = drive(
        tmp_path, "1A:1F", args, env={"AFDEP_TIMEOUT_MS": "2000"}, timeout_s=120
    )
    assert not outcome.outer_timeout and outcome.exit_code == 1
    assert {site for site, _ in facts.timeouts} == {"cb.attention_combine.row_wait"}, text[-3000:]
    for rank in (0, 1):  # every logical rank reports the end, tagged as torchrun tags it
        assert f'[default{rank}]:{RESULT} {{"ok": false, "rank": {rank}' in text


def test_a_geometry_that_cannot_be_resident_is_refused(tmp_path):
    num_sms = -(-sm_count() // 3)  # 3A:1F: the attention ranks alone hold every SM
    ranks, ffn_ranks = SHAPES["3A:1F"]
    command = driver_command(
        RankMode.LOGICAL,
        ranks,
        [*COMMON, "--ffn-ranks", "1", "--experts-per-ffn", "32", "--num-sms", str(num_sms)],
    )
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    refusal = (
        f"afdep drive: error: one-GPU mode: 3A:1F needs 3×{num_sms} (attention) + "
        f"1×1 (ffn) = {3 * num_sms + 1} CTAs resident at once; "
        f"the GPU has {sm_count()} SMs: lower --num-sms"
    )
    assert [line for line in done.stderr.splitlines() if "error" in line] == [refusal]
    assert RESULT not in done.stdout  # refused before any step


@pytest.mark.parametrize("world_size", [2, 4])
def test_logical_rank_pair_steps_in_process(world_size):
    from invariants.data.inputs import make_source_inputs
    from tools.driver.pair import LogicalRankPair

    geometry = {"num_experts": 32, "hidden": 512, "capacity": 256, "top_k": 8}
    pair = LogicalRankPair(world_size, num_sms=7, ffn_ranks=1, **geometry)
    try:
        for step, num_tokens in enumerate([0, 3, 256]):
            sources = [
                make_source_inputs(
                    rank=a, step=step, seed=7, payload="bf16", num_tokens=num_tokens, **geometry
                )
                for a in range(world_size - 1)
            ]
            checks, mismatches = pair.step(sources)
            assert checks > 0 and mismatches == []
    finally:
        pair.close()


def test_result_lines_parse_as_json(tmp_path):
    args = ["--payload", "fp8", "--eager", "--collect-view", "--tokens", "128"]
    outcome, facts, text = drive(tmp_path, "2A:2F", args)
    assert_clean_pass(outcome, facts, text, "2A:2F")
    line = next(line for line in text.splitlines() if RESULT in line)
    assert json.loads(line.split(f"{RESULT} ", 1)[1])["config"]["mode"] == "logical"
