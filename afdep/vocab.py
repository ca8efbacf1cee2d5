"""Running the correctness driver as a subprocess and reading its log.

The driver's output is the contract: `Mismatched ...` lines, device lines
`afdep timeout: site=...` and `afdep assertion failed: ...`, the digest line and
one `AFDEP_RESULT {json}`. Tools judge runs from these, never from exit codes
alone.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field

from faults.parse import DIGEST
from hostio import ProcessOutcome

TIMEOUT_LINE = re.compile(r"afdep timeout: site=(\S+) rank=(\d+)")
ASSERT_LINE = re.compile(r"afdep assertion failed: (.*)")
ROUTE_ASSERT = re.compile(
    r"afdep assertion failed: route (\w+) token=(\d+) slot=(\d+)"
    r"(?: rank=(\d+)| \(detected on rank \d+, seen on rank (\d+)\))"
)
AGREEMENT_LINE = re.compile(
    r"\[default(\d+)\]:.*all ranks must use the same count-first configuration"
)
RESULT_LINE = re.compile(r"AFDEP_RESULT (\{.*\})\s*$", re.MULTILINE)


@dataclass
class LogFacts:
    mismatches: int = 0
    timeouts: list[tuple[str, int]] = field(default_factory=list)  # (site, rank)
    assertions: list[str] = field(default_factory=list)
    route_asserts: list[tuple[str, int, int, int]] = field(default_factory=list)  # kind,t,k,rank
    digests: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    agreement_ranks: list[int] = field(default_factory=list)  # ranks that named a disagreement

    @property
    def final_result(self) -> dict | None:
        """The rank-0 summary (it carries `ranks`), else the last failure line."""
        summaries = [r for r in self.results if "ranks" in r]
        return summaries[-1] if summaries else (self.results[-1] if self.results else None)


def parse_log(text: str) -> LogFacts:
    facts = LogFacts()
    facts.mismatches = sum(1 for line in text.splitlines() if "Mismatched" in line)
    facts.timeouts = [(m[1], int(m[2])) for m in TIMEOUT_LINE.finditer(text)]
    facts.assertions = [m[1] for m in ASSERT_LINE.finditer(text)]
    for m in ROUTE_ASSERT.finditer(text):
        rank = m[4] if m[4] is not None else m[5]
        facts.route_asserts.append((m[1], int(m[2]), int(m[3]), int(rank)))
    facts.digests = sorted(set(DIGEST.findall(text)))
    facts.agreement_ranks = sorted({int(m[1]) for m in AGREEMENT_LINE.finditer(text)})
    for m in RESULT_LINE.finditer(text):
        try:
            facts.results.append(json.loads(m[1]))
        except json.JSONDecodeError:
            facts.results.append({"unparsed": m[1][:200]})
    return facts


def driver_command(nproc: int, args: list[str]) -> list[str]:
    """torchrun with every rank's output teed line by line (prefixed `[defaultN]:`):
    ranks writing one file directly would interleave device printf mid-line."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "--tee",
        "3",
        "-m",
        "afdep.testing.driver",
        *args,
    ]


def outcome_record(outcome: ProcessOutcome, facts: LogFacts) -> dict:
    record = asdict(outcome)
    record.update(
        mismatches=facts.mismatches,
        timeouts=facts.timeouts,
        assertions=len(facts.assertions),
        route_asserts=facts.route_asserts,
        agreement_ranks=facts.agreement_ranks,
        digests=facts.digests,
        result=facts.final_result,
    )
    return record
