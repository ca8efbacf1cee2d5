"""tools.sanitize.stage on a CPU: compute-sanitizer's reports read into findings
(samples written from the user guide's formats, tests/fixtures/sanitize),
the verdict rules, the Markdown page, the commands, and a whole run through
a stand-in sanitizer and driver (the GPU run is tests/gpu/test_sanitize.py)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import tools.sanitize.stage as sanitize
from tools.sanitize.findings import (
    Execution,
    RunFacts,
    SanitizerFinding,
    SanitizerVerdict,
    Tool,
    ToolLog,
    parse_tool_log,
    verdict,
)
from tools.sanitize.report import markdown
from tools.sanitize.stage import (
    FINDINGS_EXIT,
    Stage,
    find_sanitizer,
    parse_args,
    sanitizer_command,
)

SAMPLES = Path(__file__).parents[3] / "fixtures" / "sanitize"


def findings(name: str) -> list[SanitizerFinding]:
    return parse_tool_log((SAMPLES / name).read_text()).findings


def test_memcheck_reports_group_by_kind_kernel_and_line():
    assert findings("memcheck.log") == [
        SanitizerFinding(
            kind="Invalid __global__ read",
            kernel="attention_dispatch(Params)",
            location="dispatch.cuh:212",
            detail="Address 0x7f3c7ec000fc is out of bounds",
            count=2,
        ),
        # The access is in a device function; the outermost device frame is the kernel.
        SanitizerFinding(
            kind="Invalid __shared__ write",
            kernel="ffn_epilogue(Params)",
            location="common/copy.cuh:30",
            detail="Address 0x1000 is out of bounds",
        ),
        SanitizerFinding(
            kind="CUDA API error",
            detail='cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" '
            "on cudaStreamSynchronize",
        ),
    ]
    assert parse_tool_log((SAMPLES / "memcheck.log").read_text()).summary_errors == 4


def test_racecheck_analysis_counts_hazards_and_keeps_the_severity():
    assert findings("racecheck.log") == [
        SanitizerFinding(
            kind="Race reported",
            kernel="ffn_combine(Params)",
            location="combine.cuh:41",
            severity="Error",
            detail="and Read access at ffn_combine(Params)+0x100 in combine.cuh:51",
            count=508,
        ),
        SanitizerFinding(
            kind="Race reported",
            kernel="attention_dispatch(Params)",
            location="dispatch.cuh:20",
            severity="Warning",
            detail="and Read access at attention_dispatch(Params)+0x320 in dispatch.cuh:22",
            count=4,
        ),
    ]
    assert parse_tool_log((SAMPLES / "racecheck.log").read_text()).summary_errors == 2


def test_racecheck_hazard_report():
    assert findings("racecheck_hazard.log") == [
        SanitizerFinding(
            kind="Potential WAW hazard",
            kernel="WAW()",
            location="raceWAW.cu:20",
            severity="Error",
            detail="Write Thread (1,0,0) at WAW()+0x2f0 in raceWAW.cu:20",
        )
    ]


def test_synccheck_barrier_errors_carry_their_class():
    assert findings("synccheck.log") == [
        SanitizerFinding(
            kind="Barrier error: Divergent thread(s) in warp",
            kernel="ffn_epilogue(Params)",
            location="epilogue.cuh:79",
            detail="by thread (37,0,0) in block (0,0,0)",
        ),
        SanitizerFinding(
            kind="Barrier error: Invalid arguments",
            kernel="attention_combine(Params)",
            location="common/sync.cuh:15",
            detail="by thread (0,0,0) in block (2,0,0)",
        ),
    ]


def test_initcheck_uninitialized_reads():
    assert findings("initcheck.log") == [
        SanitizerFinding(
            kind="Uninitialized __global__ memory read",
            kernel="ffn_epilogue(Params)",
            location="epilogue.cuh:141",
            detail="Address 0x7f3c7ec000fc",
            count=2,
        )
    ]


def test_initcheck_on_a_copy_from_the_device():
    log = parse_tool_log(
        "========= Uninitialized access at 0x7f3c7ec00010 on access by cudaMemcpy source\n"
        "=========     Saved host backtrace up to driver entry point\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    assert log.findings == [SanitizerFinding("Uninitialized access by cudaMemcpy source")]


def test_older_location_forms():
    assert [(f.kernel, f.location) for f in findings("older_formats.log")] == [
        ("unaligned_kernel()", "memcheck_demo.cu:6"),
        ("out_of_bounds_kernel()", "memcheck_demo.cu:12"),
    ]


def test_a_kernel_without_line_info_has_no_location():
    log = parse_tool_log(
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at unaligned_kernel()+0x50\n"
        "=========     Address 0x710fdca00001 is misaligned\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    assert log.findings == [
        SanitizerFinding(
            "Invalid __global__ write",
            "unaligned_kernel()",
            "",
            "",
            "Address 0x710fdca00001 is misaligned",
        )
    ]


def test_the_sanitizers_own_failure_is_not_a_finding():
    log = parse_tool_log((SAMPLES / "tool_error.log").read_text())
    assert log.findings == []
    assert log.summary_errors == 0
    assert log.tool_errors == [
        "Internal Sanitizer Error: The Sanitizer encountered an error while launching "
        "attention_dispatch and didn't track the launch. Errors might go undetected. (Unable to "
        "allocate enough memory to perform the requested operation)"
    ]


def test_a_clean_log_and_an_empty_one():
    clean = parse_tool_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")
    assert (clean.findings, clean.summary_errors) == ([], 0)
    assert parse_tool_log("").summary_errors is None


def facts(**changes) -> RunFacts:
    base = dict(
        exit_code=0,
        outer_timeout=False,
        wall_s=12.5,
        tool_log=ToolLog(summary_errors=0),
        wait_timeouts=[],
        driver_ok=True,
        last_line="",
    )
    return RunFacts(**{**base, **changes})


FOUND = ToolLog(findings=[SanitizerFinding("Invalid __global__ read")], summary_errors=1)
TIMED_OUT = [("pf.ffn_expand.done_wait", 1)]
ECHOES = ToolLog(
    findings=[
        SanitizerFinding("Hardware exception: Warp Illegal Instruction", "ffn_epilogue(Params)"),
        SanitizerFinding(
            "CUDA API error", detail="cudaErrorLaunchFailure on cudaStreamSynchronize"
        ),
    ],
    summary_errors=2,
)


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({}, (SanitizerVerdict.CLEAN, "")),
        ({"tool_log": FOUND, "exit_code": FINDINGS_EXIT}, (SanitizerVerdict.FINDINGS, "")),
        # A finding can end the driver and its waits: it stays the verdict.
        (
            {"tool_log": FOUND, "exit_code": 1, "wait_timeouts": TIMED_OUT},
            (SanitizerVerdict.FINDINGS, ""),
        ),
        (
            {"tool_log": FOUND, "outer_timeout": True, "exit_code": None},
            (SanitizerVerdict.ERROR, "hung: killed by the outer timeout after 12.5 s"),
        ),
        (
            {"exit_code": 1, "wait_timeouts": TIMED_OUT, "driver_ok": False},
            (
                SanitizerVerdict.NOT_APPLICABLE,
                "the protocol needs producer and consumer kernels resident together; under "
                "racecheck a device wait timed out (site=pf.ffn_expand.done_wait rank=1): the "
                "tool did not run them concurrently",
            ),
        ),
        # The trap of a wait that timed out, and the host's failed call after it.
        (
            {"tool_log": ECHOES, "exit_code": 1, "wait_timeouts": TIMED_OUT, "driver_ok": False},
            (
                SanitizerVerdict.NOT_APPLICABLE,
                "the protocol needs producer and consumer kernels resident together; under "
                "racecheck a device wait timed out (site=pf.ffn_expand.done_wait rank=1): the "
                "tool did not run them concurrently",
            ),
        ),
        # Without a wait that timed out, the same reports are findings.
        ({"tool_log": ECHOES, "exit_code": 1, "driver_ok": False}, (SanitizerVerdict.FINDINGS, "")),
        (
            {"tool_log": ToolLog(tool_errors=["Internal Sanitizer Error: out of memory"])},
            (
                SanitizerVerdict.ERROR,
                "compute-sanitizer failed: Internal Sanitizer Error: out of memory",
            ),
        ),
        (
            {"tool_log": ToolLog(), "exit_code": -9, "last_line": "Killed"},
            (
                SanitizerVerdict.ERROR,
                "no ERROR SUMMARY line: the tool did not finish (exit -9: Killed)",
            ),
        ),
        (
            {"tool_log": ToolLog(summary_errors=3), "exit_code": FINDINGS_EXIT},
            (SanitizerVerdict.ERROR, "the summary counts 3 errors but no report was read"),
        ),
        (
            {"exit_code": 1, "driver_ok": False, "last_line": "Mismatched x rank 0"},
            (
                SanitizerVerdict.ERROR,
                "the driver failed under the tool (exit 1: Mismatched x rank 0)",
            ),
        ),
        (
            {"driver_ok": False},
            (SanitizerVerdict.ERROR, "the driver failed under the tool (exit 0)"),
        ),
    ],
)
def test_verdict_rules(changes, expected):
    assert verdict(Tool.RACECHECK, facts(**changes)) == expected


DOCUMENT = {
    "native_source_sha256": "a" * 64,
    "rank_mode": "1xH200, 2 logical ranks",
    "sanitizer": "Version 2025.3.0",
    "driver": ["-m", "tools.driver", "--ranks", "2"],
    "env": {"AFDEP_TIMEOUT_MS": "20000"},
    "baseline": {"ok": True, "exit_code": 0, "wall_s": 9.5},
    "ok": False,
    "runs": [
        {"tool": "memcheck", "execution": "eager", "verdict": "CLEAN", "reason": "",
         "findings": [], "exit_code": 0, "wall_s": 40.1},
        {"tool": "racecheck", "execution": "graph", "verdict": "FINDINGS", "reason": "",
         "exit_code": 86, "wall_s": 61.0, "findings": [
             {"kind": "Race reported", "severity": "Error", "kernel": "k(P)",
              "location": "a.cuh:4", "count": 8, "detail": "and Read access at k|x"}]},
        {"tool": "initcheck", "execution": "eager", "verdict": "NOT APPLICABLE",
         "reason": "why", "findings": [], "exit_code": 1, "wall_s": 25.0},
    ],
}  # fmt: skip


def test_the_markdown_page():
    assert markdown(DOCUMENT) == (
        "# compute-sanitizer: the driver on one GPU, logical ranks\n"
        "\n"
        "- rank mode: 1xH200, 2 logical ranks\n"
        f"- native_source_sha256: `{'a' * 64}`\n"
        "- compute-sanitizer: Version 2025.3.0\n"
        "- driver: `-m tools.driver --ranks 2` with AFDEP_TIMEOUT_MS=20000\n"
        "- without a tool: ok, exit 0, 9.5 s\n"
        "- verdict: NOT OK\n"
        "\n"
        "| tool | execution | verdict | findings | exit | wall s |\n"
        "|---|---|---|---|---|---|\n"
        "| memcheck | eager | CLEAN | 0 | 0 | 40.1 |\n"
        "| racecheck | graph | FINDINGS | 8 | 86 | 61.0 |\n"
        "| initcheck | eager | NOT APPLICABLE (why) | 0 | 1 | 25.0 |\n"
        "\n"
        "## Findings\n"
        "\n"
        "| tool | execution | kind | kernel | location | count | detail |\n"
        "|---|---|---|---|---|---|---|\n"
        "| racecheck | graph | Race reported (Error) | k(P) | a.cuh:4 | 8 "
        "| and Read access at k\\|x |\n"
    )


def test_a_page_without_findings_says_none():
    clean = {**DOCUMENT, "ok": True, "runs": DOCUMENT["runs"][:1]}
    assert markdown(clean).endswith(
        "| memcheck | eager | CLEAN | 0 | 0 | 40.1 |\n\n## Findings\n\nNone.\n"
    )


def test_the_command_keeps_the_tools_nonblocking_mode(tmp_path):
    command = sanitizer_command("cs", Tool.INITCHECK, tmp_path / "t.log", ["python", "-m", "d"])
    assert command == [
        "cs", "--tool", "initcheck", "--error-exitcode", "86", "--print-limit", "200",
        "--target-processes", "application-only", "--launch-timeout", "60",
        "--report-api-errors", "no", "--ignore-getprocaddress-notfound",
        "--log-file", str(tmp_path / "t.log"),
        "--", "python", "-m", "d",
    ]  # fmt: skip
    assert not any(word.startswith("--force-") for word in command)


def test_tools_and_executions_default_to_all_in_order_without_repeats():
    args = parse_args([])
    assert (args.tool, args.execution) == (list(Tool), list(Execution))
    args = parse_args(["--tool", "synccheck", "memcheck", "synccheck", "--execution", "graph"])
    assert (args.tool, args.execution) == ([Tool.SYNCCHECK, Tool.MEMCHECK], [Execution.GRAPH])


def test_list_prints_each_run_on_a_cpu(capsys):
    assert sanitize.main(["--list", "--tool", "synccheck", "--execution", "graph"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("synccheck-graph: compute-sanitizer --tool synccheck ")
    assert out[0].endswith(
        "-m tools.driver --mode logical --ranks 2 --payload bf16 --capacity 256 "
        "--hidden-size 512 --num-experts 16 --top-k 4 --num-sms 8 --tokens 8 128 --steps 1 --graph"
    )


def test_no_sanitizer_anywhere_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    with pytest.raises(sanitize.UsageError) as error:
        find_sanitizer(None)
    assert str(error.value) == (
        f"compute-sanitizer is not on PATH, at {tmp_path}/bin/compute-sanitizer nor in an "
        "nvidia-cuda-sanitizer-api wheel on sys.path: give --sanitizer"
    )
    with pytest.raises(sanitize.UsageError) as error:
        find_sanitizer(str(tmp_path / "cs"))
    assert str(error.value) == f"--sanitizer {tmp_path}/cs: not an executable file"


def test_the_wheels_sanitizer_is_found_on_sys_path(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    wheel = tmp_path / "site" / "nvidia" / "cu13" / "bin" / "compute-sanitizer"
    wheel.parent.mkdir(parents=True)
    wheel.write_text("#!/bin/sh\n")
    wheel.chmod(0o755)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(tmp_path / "site")])
    assert find_sanitizer(None) == str(wheel)


def test_runs_go_eager_first_so_a_cut_off_stage_has_every_tool():
    args = parse_args(["--tool", "racecheck", "memcheck"])
    assert sanitize.planned_runs(args) == [
        (Tool.RACECHECK, Execution.EAGER),
        (Tool.MEMCHECK, Execution.EAGER),
        (Tool.RACECHECK, Execution.GRAPH),
        (Tool.MEMCHECK, Execution.GRAPH),
    ]


# A stand-in compute-sanitizer: writes the sample named by $SAMPLE to its
# --log-file, runs what follows `--`, and exits as the tool does.
FAKE_SANITIZER = """\
import os, shutil, subprocess, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("Copyright (c) 2020-2026 NVIDIA Corporation\\nVersion 2099.1.0 (stand-in)")
    sys.exit(0)
log = args[args.index("--log-file") + 1]
shutil.copy(os.environ["SAMPLE"], log)
code = subprocess.run(args[args.index("--") + 1 :]).returncode
found = "ERROR SUMMARY: 0" not in open(log).read()
sys.exit(code or (int(args[args.index("--error-exitcode") + 1]) if found else 0))
"""
# A stand-in driver: its lines per $DRIVER_SAYS.
FAKE_DRIVER = """\
import os, sys
says = os.environ["DRIVER_SAYS"]
if says == "timeout":
    print("afdep timeout: site=pf.ffn_expand.done_wait rank=1 expected=1 seen=0")
    sys.exit(1)
print('AFDEP_RESULT {"ok": true, "checks": 4, "ranks": []}')
"""


class StandIn(Stage):
    def driver(self, execution):
        return [sys.executable, str(self.logs.parent / "driver.py"), str(execution)]


def stand_in_stage(tmp_path: Path, sample: str, says: str, monkeypatch) -> StandIn:
    (tmp_path / "sanitizer.py").write_text(FAKE_SANITIZER)
    (tmp_path / "driver.py").write_text(FAKE_DRIVER)
    wrapper = tmp_path / "compute-sanitizer"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "sanitizer.py"} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("SAMPLE", str(SAMPLES / sample))
    monkeypatch.setenv("DRIVER_SAYS", says)
    args = parse_args(["--results-dir", str(tmp_path / "results"), "--run-timeout-s", "60"])
    (tmp_path / "logs").mkdir()
    stage = StandIn(args, str(wrapper), tmp_path / "logs")
    stage.record.digest, stage.record.rank_mode = "d" * 64, "1xH200, 2 logical ranks"
    stage.record.machine = "1xH200"
    return stage


def test_a_run_with_findings_through_the_stand_ins(tmp_path, monkeypatch):
    stage = stand_in_stage(tmp_path, "synccheck.log", "ok", monkeypatch)
    assert stage.record.sanitizer == "Version 2099.1.0 (stand-in)"
    stage.run_baseline()
    stage.add(stage.run_tool(Tool.SYNCCHECK, Execution.GRAPH))
    document = json.loads((tmp_path / "results" / "sanitize-1xH200-logical.json").read_text())
    run = document["runs"][0]
    assert (run["verdict"], run["exit_code"], run["summary_errors"]) == ("FINDINGS", 86, 2)
    assert [(f["kernel"], f["location"]) for f in run["findings"]] == [
        ("ffn_epilogue(Params)", "epilogue.cuh:79"),
        ("attention_combine(Params)", "common/sync.cuh:15"),
    ]
    assert (document["baseline"]["ok"], document["ok"]) == (True, False)
    assert (document["native_source_sha256"], document["rank_mode"]) == (
        "d" * 64,
        "1xH200, 2 logical ranks",
    )
    page = (tmp_path / "results" / "sanitize-1xH200-logical.md").read_text()
    assert "| synccheck | graph | FINDINGS | 2 | 86 |" in page


def test_a_wait_that_times_out_under_the_tool_is_not_applicable(tmp_path, monkeypatch):
    stage = stand_in_stage(tmp_path, "clean.log", "timeout", monkeypatch)
    run = stage.run_tool(Tool.RACECHECK, Execution.EAGER)
    assert (run.verdict, run.exit_code, run.wait_timeouts) == (
        SanitizerVerdict.NOT_APPLICABLE,
        1,
        [("pf.ffn_expand.done_wait", 1)],
    )
    assert "under racecheck a device wait timed out (site=pf.ffn_expand.done_wait rank=1)" in (
        run.reason
    )


def test_the_stage_passes_when_every_run_is_clean_or_not_applicable(tmp_path, monkeypatch):
    stage = stand_in_stage(tmp_path, "clean.log", "ok", monkeypatch)
    stage.record.baseline = {"ok": True}
    stage.add(stage.run_tool(Tool.MEMCHECK, Execution.EAGER))
    assert stage.record.runs[0].verdict == SanitizerVerdict.CLEAN
    assert stage.record.ok
    monkeypatch.setenv("DRIVER_SAYS", "timeout")
    stage.add(stage.run_tool(Tool.INITCHECK, Execution.EAGER))
    assert stage.record.ok
    monkeypatch.setenv("SAMPLE", str(SAMPLES / "tool_error.log"))
    monkeypatch.setenv("DRIVER_SAYS", "ok")
    stage.add(stage.run_tool(Tool.SYNCCHECK, Execution.EAGER))
    assert stage.record.runs[-1].verdict == SanitizerVerdict.ERROR
    assert not stage.record.ok


def test_a_run_past_the_budget_is_an_error_not_a_pass(tmp_path, monkeypatch):
    stage = stand_in_stage(tmp_path, "clean.log", "ok", monkeypatch)
    stage.args.budget_s = 30
    stage.record.baseline = {"ok": True}
    stage.add(stage.not_run(Tool.INITCHECK, Execution.GRAPH))
    (run,) = stage.record.runs
    assert (run.verdict, run.reason, run.exit_code) == (
        SanitizerVerdict.ERROR,
        "not run: the stage's --budget-s 30 was spent",
        None,
    )
    assert not stage.record.ok


def test_the_cli_dispatches_sanitize(capsys):
    from tools.afdep_cli import main

    assert main(["sanitize", "--list", "--tool", "memcheck", "--execution", "eager"]) == 0
    assert capsys.readouterr().out.startswith("memcheck-eager: compute-sanitizer --tool memcheck")
