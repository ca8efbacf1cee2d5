"""tools.driver.launch: the one torchrun command and a driver run's record."""

from __future__ import annotations

import sys

from afdep.vocab import parse_log
from hostio import ProcessOutcome
from tools.driver.launch import DRIVER, outcome_record, torchrun_command

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


def test_the_driver_command_tees_each_rank():
    assert torchrun_command(2, DRIVER, ["--graph"]) == [
        *TORCHRUN,
        "--nproc-per-node=2",
        "--tee",
        "3",
        "-m",
        "tools.driver",
        "--graph",
    ]


def test_without_tee_the_ranks_write_as_they_are():
    assert torchrun_command(4, "tools.bench.worker", ["--iters", "5"], tee=False) == [
        *TORCHRUN,
        "--nproc-per-node=4",
        "-m",
        "tools.bench.worker",
        "--iters",
        "5",
    ]


def test_the_record_holds_the_outcome_and_the_log_facts(tmp_path):
    outcome = ProcessOutcome(["x"], 1, 2.5, False, str(tmp_path / "x.log"), "0" * 64)
    log = (
        "[default1]:afdep timeout: site=pf.ffn_expand.done_wait rank=1 expected=4 seen=2\n"
        '[default0]:AFDEP_RESULT {"ok": false, "rank": 0}\n'
    )
    assert outcome_record(outcome, parse_log(log)) == {
        "command": ["x"],
        "exit_code": 1,
        "wall_s": 2.5,
        "outer_timeout": False,
        "log_path": str(tmp_path / "x.log"),
        "log_sha256": "0" * 64,
        "mismatches": 0,
        "timeouts": [("pf.ffn_expand.done_wait", 1)],
        "assertions": 0,
        "route_asserts": [],
        "agreement_ranks": [],
        "failed_ranks": [0],
        "digests": [],
        "result": {"ok": False, "rank": 0},
    }
