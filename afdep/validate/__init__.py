"""The correctness matrix: a validation runner made a program.

    afdep validate [--select all|correctness|failures] [--results-dir docs/results]

With 2+ GPUs it runs the driver over the matrix, prints one summary line
per run and writes `validate-<machine>.json` (every run's command, exit,
mismatches, digest, log sha256). On a CPU-only machine it compiles every
kernel, checks the reference on the CPU and lists the runs that need GPUs.
Exit 0 only when every run met its expectation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from afdep.config import environment_error
from afdep.jit import source_digest
from afdep.testing.launch import DRIVER, outcome_record, torchrun_command
from afdep.validate.matrix import ROUTE_DEADLINE_S, Expect, Group, Run, matrix_2gpu, matrix_4gpu
from afdep.vocab import parse_log
from hostio import at_least_one, entry_point, machine_name, run_logged, write_json


def judge(run: Run, record: dict, digest: str) -> list[str]:
    """Why a run missed its expectation; empty when it met it."""
    problems = []
    if record["outer_timeout"]:
        return [f"hung: killed by the outer timeout after {record['wall_s']} s"]
    if record["digests"] != [digest]:
        problems.append(f"digest seen {record['digests']} is not the tree's {digest[:8]}")
    if run.expect == Expect.PASS:
        result = record["result"] or {}
        if record["exit_code"] != 0:
            problems.append(f"exit {record['exit_code']}")
        if record["mismatches"] or record["timeouts"] or record["assertions"]:
            problems.append("mismatch, timeout or assertion lines in the log")
        if not result.get("ok") or result.get("checks", 0) == 0:
            problems.append(f"AFDEP_RESULT not ok or no checks: {str(result)[:200]}")
        return problems
    if record["exit_code"] == 0:
        problems.append("exit 0: the failure was not detected")
    if run.expect == Expect.TIMEOUT:
        if not record["timeouts"]:
            problems.append("no `afdep timeout: site=` line")
        return problems
    if run.expect == Expect.AGREEMENT:
        missing = sorted(set(range(run.nproc)) - set(record.get("agreement_ranks", [])))
        if missing:
            problems.append(f"no agreement error from ranks {missing}")
        return problems
    kind = run.route
    ranks = {rank for k, _, _, rank in record["route_asserts"] if k == kind}
    missing = sorted(set(range(run.nproc)) - ranks)
    if missing:
        problems.append(f"no `afdep assertion failed: route {kind}` line from ranks {missing}")
    if record["wall_s"] > ROUTE_DEADLINE_S:
        problems.append(f"took {record['wall_s']} s (> {ROUTE_DEADLINE_S} s)")
    return problems


def summary_line(run: Run, record: dict, problems: list[str]) -> str:
    digest = " ".join(d[:8] for d in record["digests"]) or "-"
    verdict = "ok" if not problems else "FAIL: " + "; ".join(problems)
    return (
        f"{run.name} exit={record['exit_code']} mismatch={record['mismatches']} "
        f"timeout={len(record['timeouts'])} assert={record['assertions']} "
        f"digest={digest} wall={record['wall_s']}s {verdict}"
    )


def cpu_only(runs: list[Run]) -> int:
    """What a machine without GPUs can do: compile every kernel and check the reference."""
    from afdep.build import main as build_main
    from afdep.validate.cpu_checks import reference_self_check

    print("fewer than 2 GPUs here: compiling every kernel and checking the reference on the CPU")
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


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="afdep validate", description=__doc__)
    parser.add_argument(
        "--select",
        choices=["all", *(group.value for group in Group)],
        default="all",
    )
    parser.add_argument("--only", default=None, help="regular expression over run names")
    parser.add_argument("--results-dir", type=Path, default=Path("docs/results"))
    parser.add_argument("--logs-dir", type=Path, default=None)
    parser.add_argument("--bench-iters", type=int, default=50)
    parser.add_argument(
        "--jobs",
        type=at_least_one,
        default=1,
        help="driver runs at a time on the same GPUs (timed runs still run alone)",
    )
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    args = parser.parse_args(argv)
    problem = environment_error()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    matrix = matrix_2gpu(args.bench_iters) + matrix_4gpu()
    runs = [
        r
        for r in matrix
        if args.select in ("all", r.group) and (not args.only or re.search(args.only, r.name))
    ]
    if args.list:
        for run in runs:
            print(run.name, " ".join(run.args))
        return 0
    import torch

    gpus = torch.cuda.device_count()
    if gpus < 2:
        return cpu_only(runs)
    not_run = [run for run in runs if run.nproc > gpus]
    runs = [run for run in runs if run.nproc <= gpus]
    # The whole matrix this machine can run: a document missing any of it is not ok.
    planned = [r.name for r in matrix if r.nproc <= gpus]

    digest = source_digest()
    machine = machine_name()
    logs = args.logs_dir or Path(tempfile.mkdtemp(prefix="afdep-validate-"))
    print(f"native_source_sha256 {digest}  machine {machine}  logs {logs}", flush=True)
    path = args.results_dir / f"validate-{machine}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    # Runs of the same tree accumulate across invocations (--select parts).
    records = previous.get("runs", {}) if previous.get("native_source_sha256") == digest else {}
    lock = threading.Lock()

    def execute(run: Run) -> None:
        outcome = run_logged(
            torchrun_command(run.nproc, DRIVER, run.args),
            logs / f"{run.name}.log",
            timeout_s=run.outer_timeout_s,
            env={**os.environ, **run.env},
        )
        facts = parse_log(Path(outcome.log_path).read_text(errors="replace"))
        record = outcome_record(outcome, facts)
        problems = judge(run, record, digest)
        record.update(
            name=run.name, expect=run.expectation, env=run.env, problems=problems, ok=not problems
        )
        with lock:
            records[run.name] = record
            print(summary_line(run, record, problems), flush=True)
            write_json(path, results_document(machine, digest, records, args.jobs, planned))

    # Correctness holds under any interleaving, so runs may share the GPUs
    # (--jobs); a run whose time is judged (replays timed with --bench-iters,
    # a route assertion's deadline) runs alone after.
    timed = [r for r in runs if "--bench-iters" in r.args or r.expect == Expect.ROUTE]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for job in [pool.submit(execute, r) for r in runs if r not in timed]:
            job.result()
    for run in timed:
        execute(run)
    missing = results_document(machine, digest, records, args.jobs, planned)["missing"]
    print(
        f"wrote {path}: {sum(r['ok'] for r in records.values())}/{len(records)} runs ok"
        + (f"; {len(missing)} planned runs not yet run: {' '.join(missing)}" if missing else "")
    )
    if not_run:  # said, not failed: they wait for a larger machine
        list_not_run(not_run)
    return 0 if all(records[r.name]["ok"] for r in runs) else 1


def results_document(
    machine: str, digest: str, records: dict, jobs: int, planned: list[str]
) -> dict:
    """The runs so far of this tree; `missing` names the planned runs not yet
    recorded (a cut-off or partial invocation), and `ok` needs none missing."""
    missing = [name for name in planned if name not in records]
    return {
        "tool": "afdep.validate",
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
