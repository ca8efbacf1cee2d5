"""Whether a driver run met its expectation, from its record (the process
outcome and what its log said, tools.driver.launch.outcome_record), in
either rank mode."""

from __future__ import annotations

from hostio import RankMode
from tools.validate.matrix import ROUTE_DEADLINE_S, Expect, Run


def judge(run: Run, record: dict, digest: str, mode: RankMode = RankMode.PER_GPU) -> list[str]:
    """Why a run missed its expectation; empty when it met it."""
    if record["outer_timeout"]:
        return [f"hung: killed by the outer timeout after {record['wall_s']} s"]
    problems = []
    if record["digests"] != [digest]:
        problems.append(f"digest seen {record['digests']} is not the tree's {digest[:8]}")
    if run.expect == Expect.PASS:
        return problems + pass_problems(record)
    if record["exit_code"] == 0:
        problems.append("exit 0: the failure was not detected")
    if run.expect == Expect.TIMEOUT:
        return problems + ([] if record["timeouts"] else ["no `afdep timeout: site=` line"])
    if run.expect == Expect.AGREEMENT:
        # Logical ranks agree through the same collective: each rank names the disagreement.
        missing = sorted(set(range(run.nproc)) - set(record.get("agreement_ranks", [])))
        return problems + ([f"no agreement error from ranks {missing}"] if missing else [])
    problems += route_problems(run, record, mode)
    if record["wall_s"] > ROUTE_DEADLINE_S:
        problems.append(f"took {record['wall_s']} s (> {ROUTE_DEADLINE_S} s)")
    return problems


def pass_problems(record: dict) -> list[str]:
    problems = []
    result = record["result"] or {}
    if record["exit_code"] != 0:
        problems.append(f"exit {record['exit_code']}")
    if record["mismatches"] or record["timeouts"] or record["assertions"]:
        problems.append("mismatch, timeout or assertion lines in the log")
    if not result.get("ok") or result.get("checks", 0) == 0:
        problems.append(f"AFDEP_RESULT not ok or no checks: {str(result)[:200]}")
    return problems


def route_problems(run: Run, record: dict, mode: RankMode) -> list[str]:
    """A rank per GPU: every rank prints the assertion before its own trap.
    Logical ranks share one context: the first to trap ends every rank's
    kernels (its peers print theirs only if they get there first), the CUDA
    error reaches the host, and the driver prints every rank's failure line
    and exits 1. So there: the assertion from at least one rank, a failure
    line from every rank, exit 1."""
    kind, ranks = run.route, set(range(run.nproc))
    asserted = {rank for k, _, _, rank in record["route_asserts"] if k == kind}
    if mode != RankMode.LOGICAL:
        missing = sorted(ranks - asserted)
        if missing:
            return [f"no `afdep assertion failed: route {kind}` line from ranks {missing}"]
        return []
    problems = [] if asserted else [f"no `afdep assertion failed: route {kind}` line from any rank"]
    if record["exit_code"] not in (0, 1):
        problems.append(f"exit {record['exit_code']}: a trap ends the logical driver with exit 1")
    unreported = sorted(ranks - set(record.get("failed_ranks", [])))
    if unreported:
        problems.append(f"no failed-rank AFDEP_RESULT line from ranks {unreported}")
    return problems


def summary_line(run: Run, record: dict, problems: list[str]) -> str:
    digest = " ".join(d[:8] for d in record["digests"]) or "-"
    verdict = "ok" if not problems else "FAIL: " + "; ".join(problems)
    return (
        f"{run.name} [{record['rank_mode']}] exit={record['exit_code']} "
        f"mismatch={record['mismatches']} timeout={len(record['timeouts'])} "
        f"assert={record['assertions']} digest={digest} wall={record['wall_s']}s {verdict}"
    )
