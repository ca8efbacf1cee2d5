"""afdep's vocabulary: the roles, protocols and arms as enums, and the
log-line contract. Every line the correctness driver (host) and the kernels
(device printf, `common/comm.cuh`) write for a tool to read is defined here,
and so is how it is read: what the driver prints is what the tools and the
fault catalog parse (docs/log-lines.md, "The log-line contract")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum


class Word(str, Enum):
    """A str enum that prints as its value (`f"{Protocol.COUNT_FIRST}"` is
    `count-first`, as the log lines and argument choices spell it); json
    writes its value too. Python 3.10 has no StrEnum. A member left to
    auto() or named in the functional form (`Word("Kind", "ONE TWO_THREE")`)
    is spelled so: its name in lower case, `_` as `-`."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list) -> str:
        return name.lower().replace("_", "-")

    def __str__(self) -> str:
        return self.value


class Role(Word):
    ATTENTION = "attention"
    FFN = "ffn"


class Protocol(Word):
    PAYLOAD_FIRST = "payload-first"
    COUNT_FIRST = "count-first"


class Arm(Word):
    """Who stores the expert rows in count-first: the FFN's epilogue, or the
    attention rank that sends them."""

    FFN = "ffn"
    ATTENTION = "attention"


class RouteKind(Word):
    """The invalid-route kinds, named as the kernels print them (`route_kind_name`
    in common/comm.cuh). This order is not the reporting priority (afdep.routes)."""

    NEGATIVE = "negative"
    WIDE = "wide"
    DUPLICATE = "duplicate"
    DUMMY = "dummy"


# ---- host lines (the driver) ---------------------------------------------
MISMATCH = "Mismatched"  # a check that failed: `Mismatched <what> <where>: <detail>`
RESULT = "AFDEP_RESULT"  # the last line: `AFDEP_RESULT {json}`
BENCH = "AFDEP_BENCH"  # a bench process's result, rank 0: `AFDEP_BENCH {json}`
SKEW = "AFDEP_SKEW"  # a rank's launch delay at a step: `AFDEP_SKEW step=<s> rank=<r> cycles=<c>`


def digest_line(digest: str) -> str:
    """The line that names the tree that ran (the kernels' source digest)."""
    return f'"native_source_sha256": "{digest}"'


def result_line(summary: dict) -> str:
    return f"{RESULT} {json.dumps(summary)}"


def skew_line(step: int, rank: int, cycles: int) -> str:
    return f"{SKEW} step={step} rank={rank} cycles={cycles}"


# ---- device lines (common/comm.cuh printf) ------------------------------------
TIMEOUT = "afdep timeout:"  # `afdep timeout: site=<s> rank=<r> expected=<e> seen=<v>`
ASSERTION = "afdep assertion failed"  # `afdep assertion failed: route <kind> token=<t> ...`
# What the host sees after a trap, an illegal address or a launch failure
# (torch: `CUDA error: ...`; cuda-core / cuda-bindings: `CUDA_ERROR_...`).
DEVICE_ERROR = re.compile(r"CUDA error: |CUDA_ERROR_[A-Z_]+|cudaError[A-Z][A-Za-z]+")

DIGEST = re.compile(r'"native_source_sha256": "([0-9a-f]{64})"')
TIMEOUT_LINE = re.compile(TIMEOUT + r" site=(\S+) rank=(\d+)")
ASSERT_LINE = re.compile(ASSERTION + r": (.*)")
ROUTE_ASSERT = re.compile(
    ASSERTION + r": route (\w+) token=(\d+) slot=(\d+)"
    r"(?: rank=(\d+)| \(detected on rank \d+, seen on rank (\d+)\))"
)
AGREEMENT_LINE = re.compile(
    r"\[default(\d+)\]:.*all ranks must use the same count-first configuration"
)
SKEW_LINE = re.compile(SKEW + r" step=(\d+) rank=(\d+) cycles=(\d+)")
RESULT_LINE = re.compile(RESULT + r" (\{.*\})\s*$", re.MULTILINE)


@dataclass
class LogFacts:
    mismatches: int = 0
    timeouts: list[tuple[str, int]] = field(default_factory=list)  # (site, rank)
    assertions: list[str] = field(default_factory=list)
    route_asserts: list[tuple[str, int, int, int]] = field(default_factory=list)  # kind,t,k,rank
    digests: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    agreement_ranks: list[int] = field(default_factory=list)  # ranks that named a disagreement
    skews: list[tuple[int, int, int]] = field(default_factory=list)  # (step, rank, cycles)

    @property
    def final_result(self) -> dict | None:
        """The rank-0 summary (it carries `ranks`), else the last failure line."""
        summaries = [r for r in self.results if "ranks" in r]
        return summaries[-1] if summaries else (self.results[-1] if self.results else None)

    @property
    def failed_ranks(self) -> list[int]:
        """The ranks whose result line is a failure (`{"ok": false, "rank": r, ...}`)."""
        return sorted({r["rank"] for r in self.results if r.get("ok") is False and "rank" in r})


def parse_log(text: str) -> LogFacts:
    facts = LogFacts()
    facts.mismatches = sum(1 for line in text.splitlines() if MISMATCH in line)
    facts.timeouts = [(m[1], int(m[2])) for m in TIMEOUT_LINE.finditer(text)]
    facts.assertions = [m[1] for m in ASSERT_LINE.finditer(text)]
    for m in ROUTE_ASSERT.finditer(text):
        rank = m[4] if m[4] is not None else m[5]
        facts.route_asserts.append((m[1], int(m[2]), int(m[3]), int(rank)))
    facts.digests = sorted(set(DIGEST.findall(text)))
    facts.agreement_ranks = sorted({int(m[1]) for m in AGREEMENT_LINE.finditer(text)})
    facts.skews = [(int(m[1]), int(m[2]), int(m[3])) for m in SKEW_LINE.finditer(text)]
    for m in RESULT_LINE.finditer(text):
        try:
            facts.results.append(json.loads(m[1]))
        except json.JSONDecodeError:
            facts.results.append({"unparsed": m[1][:200]})
    return facts
