"""The parse stage: a run's log into an outcome. The log contract is the
engine's, shared by every target: `Mismatched ...` lines, `afdep timeout:`
lines, `afdep assertion failed` lines, `AFDFAULT <id> rank=<r>` markers and the
`"native_source_sha256": "<hex>"` line naming the tree that ran."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hostio import ProcessOutcome

MARKER = re.compile(r"AFDFAULT (\S+) rank=(-?\d+)")
DIGEST = re.compile(r'"native_source_sha256": "([0-9a-f]{64})"')


@dataclass
class Outcome:
    exit_code: int | None
    outer_timeout: bool
    wall_s: float
    mismatches: int
    timeout_lines: int
    assertion_lines: int
    markers: dict[str, int] = field(default_factory=dict)
    digests: list[str] = field(default_factory=list)
    log_path: str = ""
    log_sha256: str = ""

    @property
    def detected(self) -> bool:
        """Did the run name a failure (not merely exit non-zero)?"""
        return bool(self.mismatches or self.timeout_lines or self.assertion_lines)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_outcome(process: ProcessOutcome) -> Outcome:
    text = Path(process.log_path).read_text(errors="replace")
    lines = text.splitlines()
    return Outcome(
        exit_code=process.exit_code,
        outer_timeout=process.outer_timeout,
        wall_s=process.wall_s,
        mismatches=sum("Mismatched" in line for line in lines),
        timeout_lines=sum("afdep timeout:" in line for line in lines),
        assertion_lines=sum("afdep assertion failed" in line for line in lines),
        markers=dict(Counter(m[1] for m in MARKER.finditer(text))),
        digests=sorted(set(DIGEST.findall(text))),
        log_path=process.log_path,
        log_sha256=process.log_sha256,
    )
