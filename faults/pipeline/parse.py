"""The parse stage: a run's log into an outcome. What a line means is the
target's: its catalog's [target.log] patterns (mismatch, timeout, assertion,
device error, digest), searched line by line. The engine's own line is the
marker `AFDFAULT <id> rank=<r>` its patches print."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from faults.catalog import LogPatterns
from faults.judge.outcome import Outcome
from hostio import ProcessOutcome

MARKER = re.compile(r"AFDFAULT (\S+) rank=(-?\d+)")


def parse_outcome(
    process: ProcessOutcome, log: LogPatterns, *, timeout_s: float | None = None
) -> Outcome:
    """`timeout_s`: the outer timeout the run ran under (for the verdict's reason)."""
    text = Path(process.log_path).read_text(errors="replace")
    lines = text.splitlines()

    def count(pattern: re.Pattern[str]) -> int:
        return sum(1 for line in lines if pattern.search(line))

    return Outcome(
        exit_code=process.exit_code,
        outer_timeout=process.outer_timeout,
        wall_s=process.wall_s,
        mismatches=count(log.mismatch),
        timeout_lines=count(log.timeout),
        assertion_lines=count(log.assertion),
        device_errors=count(log.device_error),
        markers=dict(Counter(m[1] for m in MARKER.finditer(text))),
        digests=sorted({m[1] for line in lines for m in log.digest.finditer(line)}),
        log_path=process.log_path,
        log_sha256=process.log_sha256,
        timeout_s=timeout_s,
    )
