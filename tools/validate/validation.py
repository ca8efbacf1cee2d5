"""The correctness matrix: a validation runner made a program.

    afdep validate [--select all|correctness|failures|count-first|four-gpu|split-knobs]
                   [--rank-mode auto|per-gpu|logical] [--results-dir docs/results]
                   [--only REGEX] [--resume] [--jobs N]

It runs the driver over the matrix, prints one summary line per run and
writes `validate-<machine>.json` (every run's command, exit, mismatches,
digest, log sha256). The rank mode (auto: logical on one GPU, per-gpu on two
or more) puts a run's ranks one per GPU under torchrun, or all in one process
on one GPU (`validate-1xH200-logical.json`). On a CPU-only machine it compiles
every kernel, checks the reference on the CPU and lists the runs that need GPUs.
--resume leaves out the runs the document of this tree already records, so
a validation cut off by a time limit goes on where it stopped. Exit 0 only
when every selected run met its expectation (those --resume kept included).
The runs' logs go to a temporary folder, removed then and otherwise kept
(`logs kept (why): PATH`); --keep keeps it, and a --logs-dir is always kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from afdep.config import environment_error
from afdep.jit import source_digest
from afdep.vocab import parse_log
from hostio import (
    KeptFolder,
    RankMode,
    UsageError,
    entry_point,
    gpu_count,
    machine_name,
    run_logged,
    write_json,
)
from tools.driver.launch import DRIVER, outcome_record, torchrun_command
from tools.validate.arguments import argument_parser, selected
from tools.validate.judge import judge, summary_line
from tools.validate.matrix import Expect, Run, matrix_2gpu, matrix_4gpu, matrix_split_knobs
from tools.validate.modes import (
    adaptations,
    holds,
    is_timed,
    mode_for_choice,
    mode_machine,
    results_name,
    run_command,
    run_label,
)


def cpu_only(runs: list[Run], gpus: int) -> int:
    """What a machine that runs no driver can do: compile every kernel and check the reference."""
    from tools.build import main as build_main
    from tools.validate.cpu_checks import reference_self_check

    why = "no GPU here" if gpus == 0 else f"{gpus} GPU here and --rank-mode per-gpu"
    print(f"{why}: compiling every kernel and checking the reference on the CPU")
    status = build_main([])
    status |= reference_self_check()
    list_not_run(runs)
    return status


def list_not_run(runs: list[Run]) -> None:
    for gpus in sorted({run.nproc for run in runs}):
        needing = [run for run in runs if run.nproc == gpus]
        print(f"\n{len(needing)} runs need {gpus} GPUs (nvidia-h200-x{gpus}):")
        for run in needing:
            print(f"  {run.name}: {' '.join(torchrun_command(run.nproc, DRIVER, run.args)[2:])}")
    print("(or every run on one GPU: afdep validate --rank-mode logical)")


def previous_records(path: Path, digest: str) -> dict[str, dict]:
    """The runs the document at `path` holds of this tree: runs of the same
    tree accumulate across invocations (--select parts); another tree's go."""
    if not path.exists():
        return {}
    try:
        previous = json.loads(path.read_text())
        runs = previous.get("runs", {}) if previous.get("native_source_sha256") == digest else {}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as error:
        raise UsageError(f"{path}: not a validate document ({error}); move it away") from None
    if not isinstance(runs, dict):
        raise UsageError(f"{path}: its runs are not an object; move it away")
    return runs


class Validation:
    """One invocation, in steps: plan (the runs, the GPUs, the rank mode, the
    document so far), run (each run's record), record (into the document,
    written after every run so an interrupted validation keeps what it did),
    write (the closing line). `mode` None: this machine runs no driver."""

    def __init__(
        self,
        args: argparse.Namespace,
        matrix: list[Run],
        runs: list[Run],
        gpus: int,
        mode: RankMode | None = None,
        digest: str = "",
        machine: str = "",
    ):
        self.args, self.gpus, self.mode, self.digest = args, gpus, mode, digest
        self.machine = machine
        self.selected = runs
        self.runs = [run for run in runs if mode and holds(run, mode, gpus)]
        self.not_run = [run for run in runs if run not in self.runs]  # said, not failed
        # The whole matrix this machine can run: a document missing any of it is not ok.
        self.planned = [run.name for run in matrix if mode and holds(run, mode, gpus)]
        self.adapted = adaptations(self.runs, mode) if mode else {}
        self.records: dict[str, dict] = {}
        self.resumed: list[Run] = []  # --resume: runs the document held already
        self.lock = threading.Lock()

    @classmethod
    def plan(cls, args: argparse.Namespace) -> Validation:
        """Refuses (UsageError) a bad environment, an --only matching no run
        and an unreadable document, before any run."""
        problem = environment_error()
        if problem is not None:
            raise UsageError(problem)
        matrix = matrix_2gpu(args.bench_iters) + matrix_4gpu() + matrix_split_knobs()
        runs = selected(args, matrix)
        gpus = 0 if args.list else gpu_count()
        mode = mode_for_choice(args.rank_mode, gpus)
        if mode is None:
            return cls(args, matrix, runs, gpus)
        machine = mode_machine(mode, machine_name())
        validation = cls(args, matrix, runs, gpus, mode, source_digest(), machine)
        validation.records = previous_records(validation.path, validation.digest)
        if args.resume:
            validation.resume()
        return validation

    def resume(self) -> None:
        """Leave out the runs the document of this tree records already."""
        self.resumed = [run for run in self.runs if run.name in self.records]
        self.runs = [run for run in self.runs if run.name not in self.records]
        self.adapted = adaptations(self.runs, self.mode)

    @property
    def path(self) -> Path:
        return self.args.results_dir / results_name(self.mode, self.machine)

    def run(self, logs: Path) -> None:
        """Correctness holds under any interleaving, so runs may share the
        GPUs (--jobs); a run whose time is judged (replays timed with
        --bench-iters, a route assertion's deadline) runs alone after."""
        print(
            f"native_source_sha256 {self.digest}  machine {self.machine}  "
            f"rank mode {self.mode}  logs {logs}",
            flush=True,
        )
        if self.args.resume:
            print(
                f"--resume: {len(self.resumed)} recorded already, {len(self.runs)} to run "
                f"(of the {len(self.resumed) + len(self.runs)} selected)",
                flush=True,
            )
        for name, change in self.adapted.items():
            print(f"{name}: {change}", flush=True)
        timed = [r for r in self.runs if is_timed(r, self.mode) or r.expect == Expect.ROUTE]
        with ThreadPoolExecutor(max_workers=self.args.jobs) as pool:
            for job in [pool.submit(self.execute, r, logs) for r in self.runs if r not in timed]:
                job.result()
        for run in timed:
            self.execute(run, logs)

    def execute(self, run: Run, logs: Path) -> None:
        outcome = run_logged(
            run_command(run, self.mode),
            logs / f"{run.name}.log",
            timeout_s=run.outer_timeout_s,
            env={**os.environ, **run.env},
        )
        facts = parse_log(Path(outcome.log_path).read_text(errors="replace"))
        record = outcome_record(outcome, facts)
        record["rank_mode"] = run_label(run, self.mode, self.machine)
        problems = judge(run, record, self.digest, self.mode)
        record.update(
            name=run.name, expect=run.expectation, env=run.env, problems=problems, ok=not problems
        )
        if run.name in self.adapted:
            record["adapted"] = self.adapted[run.name]
        self.record(run, record, problems)

    def record(self, run: Run, record: dict, problems: list[str]) -> None:
        with self.lock:
            self.records[run.name] = record
            print(summary_line(run, record, problems), flush=True)
            write_json(self.path, self.document())

    def document(self) -> dict:
        document = results_document(
            self.machine, self.digest, self.records, self.args.jobs, self.planned
        )
        labels = sorted({record["rank_mode"] for record in self.records.values()})
        return {**document, "mode": str(self.mode), "rank_mode": "; ".join(labels)}

    def write(self) -> None:
        """The closing line: the document (written after each run) and what
        it still misses of the planned matrix."""
        if not self.runs and not self.resumed:  # the document, if any, is another invocation's
            print(f"no selected run fits {self.gpus} GPUs; {self.path} unchanged")
            return
        document = self.document()
        missing = document["missing"]
        head = f"wrote {self.path}" if self.runs else f"--resume: nothing left to run; {self.path}"
        print(
            f"{head} ({document['rank_mode']}): "
            f"{document['counts']['ok']}/{len(self.records)} runs ok"
            + (f"; {len(missing)} planned runs not yet run: {' '.join(missing)}" if missing else "")
        )

    @property
    def every_run_met(self) -> bool:
        """Every selected run's record is ok, those --resume kept included."""
        return all(self.records[run.name]["ok"] for run in self.runs + self.resumed)


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    args = parser.parse_args(argv)
    try:
        validation = Validation.plan(args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    if args.list:
        for run in validation.selected:
            print(run.name, " ".join(run.args))
        return 0
    if validation.mode is None:
        return cpu_only(validation.selected, validation.gpus)
    with KeptFolder(args.logs_dir, "afdep-validate-", "logs", keep=args.keep) as logs:
        validation.run(logs.path)
        validation.write()
        logs.failed = not validation.every_run_met
    if validation.not_run:  # they wait for a larger machine
        list_not_run(validation.not_run)
    return 0 if validation.every_run_met else 1


def results_document(
    machine: str, digest: str, records: dict, jobs: int, planned: list[str]
) -> dict:
    """The runs so far of this tree; `missing` names the planned runs not yet
    recorded (a cut-off or partial invocation), and `ok` needs none missing."""
    missing = [name for name in planned if name not in records]
    return {
        "tool": "tools.validate",
        "machine": machine,
        "jobs": jobs,
        "native_source_sha256": digest,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ok": not missing and all(r["ok"] for r in records.values()),
        "counts": {
            "runs": len(records),
            "ok": sum(r["ok"] for r in records.values()),
            "planned": len(planned),
        },
        "missing": missing,
        "runs": records,
    }


if __name__ == "__main__":
    sys.exit(main())
