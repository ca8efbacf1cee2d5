"""validate's rank modes: the command each mode builds, the automatic
choice, the logical judging of route rows, the results' names, every logical
row accepted by the driver and resident on an H200 (docs/synchronization.md,
"One GPU, logical ranks")."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from afdep.config import Settings
from afdep.residency import expansion_ctas, residency
from afdep.vocab import Arm, Protocol, RouteKind, digest_line, parse_log
from afdep.workspace import Geometry
from hostio import ProcessOutcome, RankMode
from tests.unit.tools.validate.test_matrix import geometry_of
from tools.driver.driver import parse_args
from tools.driver.launch import outcome_record
from tools.driver.logical import resolve_rank_mode
from tools.driver.parts import failure_line
from tools.driver.ranklog import rank_prefix
from tools.validate.judge import judge
from tools.validate.matrix import (
    Expect,
    Group,
    Run,
    matrix_2gpu,
    matrix_4gpu,
    matrix_split_knobs,
)
from tools.validate.modes import mode_for_choice, mode_machine, results_name, run_command
from tools.validate.validation import main

DIGEST = "b" * 64
RUNS = {run.name: run for run in matrix_2gpu(50) + matrix_4gpu() + matrix_split_knobs()}
H200_SMS = 132


@pytest.mark.parametrize(
    "name, ranks", [("bf16-eager-h2048-sms24", 2), ("3a1f-cf-bf16-graph", 4), ("2a2f-disagree", 4)]
)
def test_logical_command_is_the_driver_with_the_runs_ranks(name, ranks):
    run = RUNS[name]
    assert run_command(run, RankMode.LOGICAL) == [
        sys.executable,
        "-m",
        "tools.driver",
        "--mode",
        "logical",
        "--ranks",
        str(ranks),
        *run.args,
    ]


def test_per_gpu_command_is_torchrun_on_the_runs_gpus():
    run = RUNS["1a3f-pf-fp8-eager"]
    assert run_command(run, RankMode.PER_GPU) == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=4",
        "--tee",
        "3",
        "-m",
        "tools.driver",
        *run.args,
    ]


def test_the_timed_row_keeps_its_checks_without_bench_iters_in_logical_mode():
    run = RUNS["bf16-graph-h2048-sms24"]
    assert run.args[-2:] == ["--bench-iters", "50"]
    assert run_command(run, RankMode.PER_GPU)[-2:] == ["--bench-iters", "50"]
    assert run_command(run, RankMode.LOGICAL)[7:] == run.args[:-2]


@pytest.mark.parametrize(
    "choice, gpus, mode",
    [
        ("auto", 0, None),
        ("auto", 1, RankMode.LOGICAL),
        ("auto", 2, RankMode.PER_GPU),
        ("auto", 8, RankMode.PER_GPU),
        ("per-gpu", 1, None),
        ("per-gpu", 4, RankMode.PER_GPU),
        ("logical", 0, None),
        ("logical", 4, RankMode.LOGICAL),
    ],
)
def test_the_mode_a_choice_takes_on_a_machine(choice, gpus, mode):
    assert mode_for_choice(choice, gpus) is mode


ROUTE_4 = Run("r", [], Expect.ROUTE, Group.FOUR_GPU, nproc=4, route=RouteKind.WIDE)


def route_record(**changes) -> dict:
    """A logical route run as the driver ends it: rank 2 asserted, every rank failed."""
    base = {
        "outer_timeout": False,
        "wall_s": 8.0,
        "digests": [DIGEST],
        "exit_code": 1,
        "route_asserts": [("wide", 5, 2, 2)],
        "failed_ranks": [0, 1, 2, 3],
    }
    return {**base, **changes}


def test_a_logical_route_row_needs_one_ranks_assertion_every_ranks_failure_and_exit_1():
    assert judge(ROUTE_4, route_record(), DIGEST, RankMode.LOGICAL) == []
    assert judge(ROUTE_4, route_record(exit_code=0), DIGEST, RankMode.LOGICAL) == [
        "exit 0: the failure was not detected"
    ]
    assert judge(ROUTE_4, route_record(exit_code=2), DIGEST, RankMode.LOGICAL) == [
        "exit 2: a trap ends the logical driver with exit 1"
    ]
    assert judge(ROUTE_4, route_record(route_asserts=[]), DIGEST, RankMode.LOGICAL) == [
        "no `afdep assertion failed: route wide` line from any rank"
    ]
    assert judge(ROUTE_4, route_record(failed_ranks=[0, 2]), DIGEST, RankMode.LOGICAL) == [
        "no failed-rank AFDEP_RESULT line from ranks [1, 3]"
    ]
    wrong_kind = route_record(route_asserts=[("dummy", 5, 2, 2)])
    assert judge(ROUTE_4, wrong_kind, DIGEST, RankMode.LOGICAL) == [
        "no `afdep assertion failed: route wide` line from any rank"
    ]


def test_one_ranks_assertion_is_not_enough_with_a_rank_per_gpu():
    assert judge(ROUTE_4, route_record(), DIGEST, RankMode.PER_GPU) == [
        "no `afdep assertion failed: route wide` line from ranks [0, 1, 3]"
    ]


def test_a_logical_trap_judged_from_its_log(tmp_path):
    """log -> facts -> record -> verdict, with the driver's own failure lines."""
    error = RuntimeError("CUDA error: unspecified launch failure")
    lines = [
        f"{rank_prefix(0)}{digest_line(DIGEST)}",
        "afdep assertion failed: route wide token=5 slot=2 rank=0",
        *(f"{rank_prefix(r)}{failure_line(r, error, DIGEST)}" for r in range(2)),
    ]
    process = ProcessOutcome([], 1, 6.0, False, str(tmp_path / "x.log"), "0" * 64)
    record = outcome_record(process, parse_log("\n".join(lines) + "\n"))
    run = Run("r", [], Expect.ROUTE, Group.FAILURES, route=RouteKind.WIDE)
    assert record["failed_ranks"] == [0, 1]
    assert judge(run, record, DIGEST, RankMode.LOGICAL) == []
    assert judge(run, record, DIGEST, RankMode.PER_GPU) == [
        "no `afdep assertion failed: route wide` line from ranks [1]"
    ]


def test_results_are_filed_by_mode_and_never_mixed():
    assert mode_machine(RankMode.LOGICAL, "2xH200") == "1xH200"
    assert mode_machine(RankMode.PER_GPU, "2xH200") == "2xH200"
    assert results_name(RankMode.LOGICAL, "1xH200") == "validate-1xH200-logical.json"
    assert results_name(RankMode.PER_GPU, "2xH200") == "validate-2xH200.json"


def test_a_bad_rank_mode_is_one_line_naming_it(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--rank-mode", "bogus"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "afdep validate: error: argument --rank-mode: invalid choice: 'bogus' "
        "(choose from 'auto', 'per-gpu', 'logical')\n"
    )


def logical_geometry(run: Run) -> tuple[Geometry, tuple[Protocol, ...], Settings]:
    config = Settings.from_env(run.env)
    protocols = (Protocol.PAYLOAD_FIRST,) + ((Protocol.COUNT_FIRST,) if config.min_bucket else ())
    arm_attention = Protocol.COUNT_FIRST in protocols and config.arm == Arm.ATTENTION
    return replace(geometry_of(run), arm_attention=arm_attention), protocols, config


def test_every_row_is_accepted_by_the_logical_driver_and_resident_on_an_h200():
    most = 0
    for run in RUNS.values():
        args = parse_args(run_command(run, RankMode.LOGICAL)[3:])
        resolve_rank_mode(args, {})  # raises UsageError for what logical mode refuses
        assert (args.mode, args.ranks) == (RankMode.LOGICAL, run.nproc)
        g, protocols, config = logical_geometry(run)
        caps = {
            Protocol.COUNT_FIRST: config.epilogue_sms,
            Protocol.PAYLOAD_FIRST: config.expand_sms,
        }
        grids = {
            p: expansion_ctas(g, p, protocols, caps[p], H200_SMS, shared=True) for p in protocols
        }
        fit = residency(g, protocols, grids, H200_SMS)
        assert fit.fits, fit.refusal()
        most = max(most, fit.total)
    assert most == 132  # the FFN's expansion takes every SM the other ranks leave


@pytest.fixture
def one_gpu(monkeypatch, tmp_path):
    """validate on a machine it takes for 1xH200: every driver run is a fake
    that logs this tree's digest and a passing result; the commands it got
    are kept in the returned list."""
    import tempfile

    import tools.validate.validation
    from afdep.jit import source_digest
    from afdep.vocab import result_line

    digest, commands = source_digest(), []

    def fake_run(command, log_path, *, timeout_s, env=None):
        commands.append(command)
        Path(log_path).write_text(
            f"{digest_line(digest)}\n{result_line({'ok': True, 'checks': 4})}\n"
        )
        return ProcessOutcome(command, 0, 0.1, False, str(log_path), "0" * 64)

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(tools.validate.validation, "run_logged", fake_run)
    monkeypatch.setattr(tools.validate.validation, "gpu_count", lambda: 1)
    monkeypatch.setattr(tools.validate.validation, "machine_name", lambda: "1xH200")
    return commands


def test_one_gpu_runs_a_four_rank_row_logically_into_the_logical_file(one_gpu, tmp_path, capsys):
    name = "3a1f-pf-bf16-eager"
    assert main(["--only", f"^{name}$", "--results-dir", str(tmp_path / "results")]) == 0
    assert one_gpu == [run_command(RUNS[name], RankMode.LOGICAL)]
    path = tmp_path / "results" / "validate-1xH200-logical.json"
    document = json.loads(path.read_text())
    assert (document["machine"], document["mode"], document["rank_mode"]) == (
        "1xH200",
        "logical",
        "1xH200, 4 logical ranks",
    )
    assert document["runs"][name]["rank_mode"] == "1xH200, 4 logical ranks"
    assert not (tmp_path / "results" / "validate-1xH200.json").exists()
    out = capsys.readouterr().out.splitlines()
    assert "rank mode logical" in out[0]
    assert out[1].startswith(f"{name} [1xH200, 4 logical ranks] exit=0 ")
    assert out[-1].startswith(f"wrote {path} (1xH200, 4 logical ranks): 1/1 runs ok; ")


def test_the_bench_rows_change_is_said_and_recorded(one_gpu, tmp_path, capsys):
    name = "bf16-graph-h2048-sms24"
    assert main(["--only", f"^{name}$", "--results-dir", str(tmp_path / "results")]) == 0
    document = json.loads((tmp_path / "results" / "validate-1xH200-logical.json").read_text())
    change = "--bench-iters dropped: logical ranks share one GPU, no NVLink timings"
    assert document["runs"][name]["adapted"] == change
    assert capsys.readouterr().out.splitlines()[1] == f"{name}: {change}"
