"""afdep sanitize: the correctness driver in its one-GPU mode (every rank in
one process) under compute-sanitizer's memcheck, racecheck, synccheck and
initcheck (docs/tools.md, "compute-sanitizer stage").

    afdep sanitize [--tool memcheck racecheck synccheck initcheck]
                   [--execution eager graph] [--ranks 2] [--results-dir docs/results]

Runs the driver once without a tool, then once per tool and execution at a
small geometry, and writes `sanitize-<machine>-logical.{json,md}`: per run
the command, exit, wall time, findings (kind, kernel, file:line, count) and
a verdict, CLEAN, FINDINGS, NOT APPLICABLE (reason) or ERROR (reason).
Exit 0 when no run has a finding or an error, 1 otherwise, 2 on bad input
or a machine that cannot run it (no GPU, no compute-sanitizer). The logs go
to a temporary folder, kept when a run fails; --logs-dir keeps them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from afdep.config import environment_error
from afdep.ranks import MAX_LOGICAL_RANKS
from afdep.vocab import parse_log
from hostio import (
    RESULTS_DIR,
    KeptFolder,
    OneLineParser,
    RankMode,
    UsageError,
    at_least,
    cuda_tool,
    cuda_toolkit_bin,
    entry_point,
    gpu_count,
    machine_name,
    results_stem,
    run_logged,
    writable_dir,
    write_json,
    write_text,
)
from tools.driver.launch import driver_command, folder
from tools.sanitize.findings import (
    Execution,
    RunFacts,
    SanitizerVerdict,
    Tool,
    parse_tool_log,
    verdict,
)
from tools.sanitize.report import StageRecord, ToolRun, markdown, verdict_text

# Small enough for a tool that slows kernels 10-100x: 8 tokens run
# payload-first and 128 count-first (the bucket knob below), one step each.
GEOMETRY = [
    "--payload", "bf16", "--capacity", "256", "--hidden-size", "512", "--num-experts", "16",
    "--top-k", "4", "--num-sms", "8", "--tokens", "8", "128", "--steps", "1",
]  # fmt: skip
PROTOCOL_ENV = {"AFDEP_COUNT_FIRST_MIN_BUCKET": "128"}
FINDINGS_EXIT = 86  # --error-exitcode: the driver passed, the tool found something
LAUNCH_TIMEOUT_S = 60  # the tool's wait for the driver to start CUDA (torch imports first)


def sanitizer_command(sanitizer: str, tool: Tool, log_file: Path, driver: list[str]) -> list[str]:
    """The driver under one tool, in the tool's default nonblocking mode: no
    --force-blocking-launches, which would serialize the kernels the
    protocol needs running together."""
    return [
        sanitizer,
        "--tool", str(tool),
        "--error-exitcode", str(FINDINGS_EXIT),
        "--print-limit", "200",
        "--target-processes", "application-only",
        "--launch-timeout", str(LAUNCH_TIMEOUT_S),
        # Host API errors are not reported: on 1xH200 every one of memcheck's 34
        # reports was cuda-bindings asking the driver for entry points by name
        # (cuGetProcAddress_v2: INVALID_VALUE or NOT_FOUND, cydriver frames), and
        # the launcher checks every API result itself; the stage is for the kernels.
        "--report-api-errors", "no",
        "--ignore-getprocaddress-notfound",
        "--log-file", str(log_file),
        "--",
        *driver,
    ]  # fmt: skip


def driver(ranks: int, execution: Execution | None) -> list[str]:
    mode = [] if execution is None else [f"--{execution}"]
    return driver_command(RankMode.LOGICAL, ranks, [*GEOMETRY, *mode])


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_sanitizer(named: str | None) -> str:
    """--sanitizer, else compute-sanitizer on PATH, in the CUDA toolkit or in
    the nvidia-cuda-sanitizer-api wheel on sys.path (hostio.cuda_tool)."""
    if named is not None:
        if not executable(Path(named)):
            raise UsageError(f"--sanitizer {named}: not an executable file")
        return named
    found = cuda_tool("compute-sanitizer")
    if found is None:
        raise UsageError(
            f"compute-sanitizer is not on PATH, at {cuda_toolkit_bin()}/compute-sanitizer nor in "
            "an nvidia-cuda-sanitizer-api wheel on sys.path: give --sanitizer"
        )
    return str(found)


def argument_parser() -> OneLineParser:
    parser = OneLineParser(prog="afdep sanitize", description=__doc__)
    parser.add_some_of("--tool", Tool)
    parser.add_some_of("--execution", Execution)
    parser.add_argument(
        "--ranks", type=at_least(2), default=2, help=f"logical ranks, 2..{MAX_LOGICAL_RANKS}"
    )
    parser.add_argument(
        "--wait-timeout-ms",
        type=at_least(1),
        default=20_000,
        help="AFDEP_TIMEOUT_MS of the runs: a wait that never completes ends in this time",
    )
    parser.add_argument(
        "--run-timeout-s", type=at_least(1), default=150, help="outer timeout of each run"
    )
    parser.add_argument(
        "--budget-s",
        type=at_least(0),
        default=0,
        help="start no run after this many seconds (0: no limit); the rest are ERROR (not run)",
    )
    parser.add_argument("--sanitizer", default=None, help="compute-sanitizer to run")
    parser.add_argument("--results-dir", type=folder, default=RESULTS_DIR)
    parser.add_argument("--logs-dir", type=folder, default=None, help="kept (default: temporary)")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    return parser


def planned_runs(args: argparse.Namespace) -> list[tuple[Tool, Execution]]:
    """Every tool once eagerly before any graph run: a cut-off stage has each tool."""
    return [(tool, execution) for execution in args.execution for tool in args.tool]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argument_parser()
    args = parser.parse_args(argv)
    if args.ranks > MAX_LOGICAL_RANKS:
        parser.error(f"--ranks: at most {MAX_LOGICAL_RANKS}, got {args.ranks}")
    args.tool = list(dict.fromkeys(Tool(t) for t in args.tool))
    args.execution = list(dict.fromkeys(Execution(e) for e in args.execution))
    return args


class Stage:
    """One invocation: the run without a tool, then each tool and execution;
    the documents are rewritten after every run, so a cut-off stage keeps
    what it did."""

    def __init__(self, args: argparse.Namespace, sanitizer: str, logs: Path):
        self.args, self.sanitizer, self.logs = args, sanitizer, logs
        shell = {k: v for k, v in os.environ.items() if k.startswith("AFDEP_")}  # recorded too
        self.env = {**shell, "AFDEP_TIMEOUT_MS": str(args.wait_timeout_ms), **PROTOCOL_ENV}
        self.record = StageRecord(
            machine=machine_name(),
            digest="",
            rank_mode="",
            sanitizer=self.version(),
            driver=self.driver(None)[1:],
            env=self.env,
            baseline={},
        )

    def on_this_gpu(self) -> Stage:
        """The tree and the GPU the runs are of (imports torch, reads the GPU)."""
        import torch

        from afdep.jit import source_digest
        from afdep.ranks import rank_mode_label

        gpu = torch.cuda.get_device_name(0)
        self.record.digest = source_digest()
        self.record.rank_mode = rank_mode_label(RankMode.LOGICAL, self.args.ranks, gpu)
        return self

    def driver(self, execution: Execution | None) -> list[str]:
        return driver(self.args.ranks, execution)

    def path(self, suffix: str) -> Path:
        stem = results_stem("sanitize", self.record.machine, RankMode.LOGICAL)
        return self.args.results_dir / f"{stem}.{suffix}"

    def version(self) -> str:
        outcome = run_logged([self.sanitizer, "--version"], self.logs / "version.log", timeout_s=60)
        lines = Path(outcome.log_path).read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"unknown (exit {outcome.exit_code})"

    def run_baseline(self) -> None:
        """The same driver without a tool: a failure here is the tree's, not a tool's."""
        command = self.driver(Execution.EAGER)
        outcome = run_logged(
            command,
            self.logs / "baseline.log",
            timeout_s=self.args.run_timeout_s,
            env=self.child_env,
        )
        facts = parse_log(Path(outcome.log_path).read_text(errors="replace"))
        result = facts.final_result or {}
        ok = outcome.exit_code == 0 and bool(result.get("ok")) and result.get("checks", 0) > 0
        self.record.baseline = {
            "command": command,
            "exit_code": outcome.exit_code,
            "wall_s": outcome.wall_s,
            "ok": ok,
            "log": outcome.log_path,
        }
        print(f"without a tool: {'ok' if ok else 'FAILED'} ({outcome.wall_s} s)", flush=True)

    @property
    def child_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def run_tool(self, tool: Tool, execution: Execution) -> ToolRun:
        name = f"{tool}-{execution}"
        tool_log = self.logs / f"{name}.sanitizer.log"
        tool_log.unlink(missing_ok=True)
        command = sanitizer_command(self.sanitizer, tool, tool_log, self.driver(execution))
        outcome = run_logged(
            command,
            self.logs / f"{name}.log",
            timeout_s=self.args.run_timeout_s,
            env=self.child_env,
        )
        output = Path(outcome.log_path).read_text(errors="replace")
        parsed = parse_tool_log(tool_log.read_text(errors="replace") if tool_log.exists() else "")
        log_facts = parse_log(output)
        result = log_facts.final_result or {}
        lines = [line for line in output.splitlines() if line.strip()]
        facts = RunFacts(
            exit_code=outcome.exit_code,
            outer_timeout=outcome.outer_timeout,
            wall_s=outcome.wall_s,
            tool_log=parsed,
            wait_timeouts=log_facts.timeouts,
            driver_ok=bool(result.get("ok")) and result.get("checks", 0) > 0,
            last_line=lines[-1][:200] if lines else "",
        )
        judged, reason = verdict(tool, facts)
        return ToolRun(
            tool=tool,
            execution=execution,
            command=command,
            exit_code=outcome.exit_code,
            wall_s=outcome.wall_s,
            verdict=judged,
            reason=reason,
            wait_timeouts=log_facts.timeouts,
            log=outcome.log_path,
            sanitizer_log=str(tool_log),
            **parsed.as_dict(),
        )

    def not_run(self, tool: Tool, execution: Execution) -> ToolRun:
        reason = f"not run: the stage's --budget-s {self.args.budget_s} was spent"
        return ToolRun(
            tool, execution, [], None, 0.0, SanitizerVerdict.ERROR, reason, [], None, [], [], "", ""
        )

    def add(self, run: ToolRun) -> None:
        self.record.runs.append(run)
        count = sum(f["count"] for f in run.findings)
        print(
            f"{run.name}: {verdict_text(run.verdict, run.reason)} findings={count} "
            f"exit={run.exit_code} wall={run.wall_s}s",
            flush=True,
        )
        self.write()

    def write(self) -> None:
        document = self.record.document()
        write_json(self.path("json"), document)
        write_text(self.path("md"), markdown(document))


def check_machine(args: argparse.Namespace) -> str:
    """The sanitizer to run; UsageError when this machine cannot run the stage."""
    problem = environment_error()
    if problem is not None:
        raise UsageError(problem)
    writable_dir(args.results_dir, "--results-dir")
    if gpu_count() < 1:
        raise UsageError("needs a GPU (one H200 runs every rank), found 0; --list shows the runs")
    return find_sanitizer(args.sanitizer)


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for tool, execution in planned_runs(args):
            log = Path("LOGS") / f"{tool}-{execution}.sanitizer.log"
            command = sanitizer_command(
                "compute-sanitizer", tool, log, driver(args.ranks, execution)
            )
            print(f"{tool}-{execution}: {' '.join(command)}")
        return 0
    try:
        sanitizer = check_machine(args)
    except UsageError as error:
        print(f"afdep sanitize: error: {error}", file=sys.stderr)
        return 2
    with KeptFolder(args.logs_dir, "afdep-sanitize-", "logs") as logs:
        stage = Stage(args, sanitizer, logs.path).on_this_gpu()
        print(f"{stage.record.rank_mode}  {stage.record.sanitizer}  logs {logs.path}", flush=True)
        started = time.perf_counter()
        stage.run_baseline()
        stage.write()
        for tool, execution in planned_runs(args):
            spent = args.budget_s and time.perf_counter() - started > args.budget_s
            run = stage.not_run(tool, execution) if spent else stage.run_tool(tool, execution)
            stage.add(run)
        logs.failed = not stage.record.ok
    verdict_line = "ok" if stage.record.ok else "NOT OK"
    print(f"wrote {stage.path('json')} and {stage.path('md')}: {verdict_line}")
    return 0 if stage.record.ok else 1


if __name__ == "__main__":
    sys.exit(main())
