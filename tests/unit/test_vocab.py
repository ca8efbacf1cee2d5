from __future__ import annotations

import sys
import time

from afdep.vocab import driver_command, parse_log
from hostio import run_logged

DIGEST = "a" * 64
LOG = f"""\
[default0]:"native_source_sha256": "{DIGEST}"
[default0]:[rank 0] Mismatched out rank=0 step=1 tokens=8: 3 elements differ
[default1]:afdep assertion failed: route dummy token=128 slot=0 (detected on rank 0, seen on rank 1)
[default0]:afdep assertion failed: route dummy token=128 slot=0 rank=0
[default1]:afdep timeout: site=pf.epilogue.done_wait rank=1 expected=48 seen=24
[default1]:AFDEP_RESULT {{"ok": false, "rank": 1, "error": "x"}}
[default0]:AFDEP_RESULT {{"ok": false, "checks": 3, "ranks": []}}
"""


def test_parse_log_reads_every_line_kind():
    facts = parse_log(LOG)
    assert facts.mismatches == 1
    assert facts.timeouts == [("pf.epilogue.done_wait", 1)]
    assert facts.route_asserts == [("dummy", 128, 0, 1), ("dummy", 128, 0, 0)]
    assert len(facts.assertions) == 2
    assert facts.digests == [DIGEST]
    assert facts.final_result == {"ok": False, "checks": 3, "ranks": []}


def test_parse_log_without_summary_returns_the_last_failure():
    facts = parse_log('AFDEP_RESULT {"ok": false, "rank": 0}\nAFDEP_RESULT {not json}\n')
    assert facts.final_result == {"unparsed": "{not json}"}
    assert parse_log("").final_result is None


def test_run_logged_records_exit_and_log_hash(tmp_path):
    outcome = run_logged(
        [sys.executable, "-c", "print('hello'); raise SystemExit(3)"],
        tmp_path / "a.log",
        timeout_s=30,
    )
    assert outcome.exit_code == 3 and not outcome.outer_timeout
    assert (tmp_path / "a.log").read_text() == "hello\n"
    assert len(outcome.log_sha256) == 64


def test_outer_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "child-survived"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w').close()\n")
    script = (
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\n"
        "time.sleep(60)\n"
    )
    started = time.perf_counter()
    outcome = run_logged([sys.executable, "-c", script], tmp_path / "b.log", timeout_s=1)
    assert outcome.outer_timeout and outcome.exit_code is None
    assert time.perf_counter() - started < 10
    time.sleep(4)
    assert not marker.exists()


def test_driver_command_tees_each_rank():
    command = driver_command(2, ["--graph"])
    assert command[1:] == [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "--tee",
        "3",
        "-m",
        "afdep.testing.driver",
        "--graph",
    ]
