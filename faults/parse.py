"""The parse stage: a run's log into an outcome. What a line means is the
target's: its catalog's [target.log] patterns (mismatch, timeout, assertion,
device error, digest), searched line by line. The engine's own line is the
marker `AFDFAULT <id> rank=<r>` its patches print."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from faults.catalog import LogPatterns
from hostio import ProcessOutcome

MARKER = re.compile(r"AFDFAULT (\S+) rank=(-?\d+)")


@dataclass
class Outcome:
    exit_code: int | None
    outer_timeout: bool
    wall_s: float
    mismatches: int
    timeout_lines: int
    assertion_lines: int
    device_errors: int = 0  # lines naming a device fault (a trap, an illegal address)
    markers: dict[str, int] = field(default_factory=dict)
    digests: list[str] = field(default_factory=list)
    log_path: str = ""
    log_sha256: str = ""
    timeout_s: float | None = None  # the outer timeout the run ran under

    @property
    def detected(self) -> bool:
        """Did the run name a failure (not merely exit non-zero)?"""
        return bool(
            self.mismatches or self.timeout_lines or self.assertion_lines or self.device_errors
        )

    def named_failures(self) -> str:
        """What the log named, e.g. `8 mismatch lines, 1 device error line`."""
        counts = (
            (self.mismatches, "mismatch"),
            (self.timeout_lines, "timeout"),
            (self.assertion_lines, "assertion"),
            (self.device_errors, "device error"),
        )
        return ", ".join(
            f"{count} {what} line{'s' if count > 1 else ''}" for count, what in counts if count
        )

    def to_dict(self) -> dict:
        return asdict(self)


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
