"""What one compute-sanitizer run found, read from the tool's text log, and
the verdict on the run (docs/tools.md, "compute-sanitizer stage").

The text format is the one the Compute Sanitizer user guide documents
(https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer): every line
starts with the prefix (`=========`); a report opens with a headline
(`Invalid __global__ read of size 4 bytes`, `Race reported between ...`,
`Uninitialized __global__ memory read ...`, `Barrier error detected. ...`)
and goes on with `at <function>+0x<pc> in <file>:<line>`, `by thread ...`,
`Address ...` and backtrace frames. The guide documents `--xml` output but
not its schema, so the text is what is read."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum

from afdep.vocab import Word

# compute-sanitizer's tools, as its --tool names them, and how the driver runs its steps
Tool = Word("Tool", "MEMCHECK RACECHECK SYNCCHECK INITCHECK", module=__name__)
Execution = Word("Execution", "EAGER GRAPH", module=__name__)


class SanitizerVerdict(Word):
    CLEAN = "CLEAN"
    FINDINGS = "FINDINGS"
    NOT_APPLICABLE = "NOT APPLICABLE"
    ERROR = "ERROR"


@dataclass
class SanitizerFinding:
    """One kind of report at one place: every report of the same kind,
    severity, kernel and source line counts once, `count` times."""

    kind: str
    kernel: str = ""
    location: str = ""  # `file:line`, when the kernel was built with line info
    severity: str = ""  # racecheck's `Error` / `Warning`
    detail: str = ""  # the first report's, e.g. `and Read access at ...`
    count: int = 1

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.kind, self.severity, self.kernel, self.location)


@dataclass
class ToolLog:
    findings: list[SanitizerFinding] = field(default_factory=list)
    summary_errors: int | None = None  # None: no summary line (the tool did not finish)
    tool_errors: list[str] = field(default_factory=list)  # the sanitizer's own failures

    def as_dict(self) -> dict:
        return {
            "findings": [asdict(f) for f in self.findings],
            "summary_errors": self.summary_errors,
            "tool_errors": self.tool_errors,
        }


PREFIX = re.compile(r"^=+ ?")
SIZE = r"(?: of size (\d+) bytes?)?"
# A headline: the pattern and how its match names the kind, the severity and,
# for a report with no more lines, the detail.
HEADLINES: list[tuple[re.Pattern, Callable[[re.Match], tuple[str, str, str]]]] = [
    (
        re.compile(r"^Invalid (__\w+__) (read|write|atomic)" + SIZE),
        lambda m: (f"Invalid {m[1]} {m[2]}", "", ""),
    ),
    (
        re.compile(r"^Uninitialized (__\w+__) memory read" + SIZE),
        lambda m: (f"Uninitialized {m[1]} memory read", "", ""),
    ),
    (  # initcheck on a cudaMemcpy / cudaMemset (--check-api-memory-access)
        re.compile(r"^Uninitialized access\b.*? on access by (.+?)\.?$"),
        lambda m: (f"Uninitialized access by {m[1]}", "", ""),
    ),
    (
        re.compile(r"^Barrier error detected\.?\s*(.*)$"),
        lambda m: (_joined("Barrier error", m[1]), "", ""),
    ),
    (
        re.compile(r"^Warpgroup MMA sequence error detected\.?\s*(.*)$"),
        lambda m: (_joined("Warpgroup MMA sequence error", m[1]), "", ""),
    ),
    (
        re.compile(r"^(Error|Warning|ERROR|WARNING): Race reported between (\w+) access at (.*)$"),
        lambda m: ("Race reported", m[1].capitalize(), ""),
    ),
    (
        re.compile(
            r"^(ERROR|WARNING|INFO|Error|Warning|Info): (?:\([^)]*\) )?Potential (\w+) hazard"
        ),
        lambda m: (f"Potential {m[2]} hazard", m[1].capitalize(), ""),
    ),
    (
        re.compile(r"^Potential invalid (__\w+__) (read|write)" + SIZE),
        lambda m: (f"Potential invalid {m[1]} {m[2]}", "", ""),
    ),
    (
        re.compile(r"^Malloc/Free error encountered\s*:\s*(.*)$"),
        lambda m: (_joined("Malloc/Free error", m[1]), "", ""),
    ),
    (
        re.compile(r"^Program hit (.+?) on CUDA API call to (\S+?)\.?$"),
        lambda m: ("CUDA API error", "", f"{m[1]} on {m[2]}"),
    ),
    (
        re.compile(r"^((?:Warp|Lane|Device) [A-Z][A-Za-z ]+)$"),
        lambda m: (f"Hardware exception: {m[1]}", "", ""),
    ),
]
# Where a report happened: `at K+0x1f0 in f.cu:12` (the guide's current form),
# `at 0x1f0 in f.cu:12:K` and `at K():0x1f0 in f.cu:12` (older releases).
AT = [
    re.compile(r"\bat (?P<fn>.+?)\+0x[0-9a-fA-F]+(?: in (?P<file>\S+?):(?P<line>\d+))?(?:\s|$)"),
    re.compile(r"\bat 0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+):(?P<fn>.+?)\s*$"),
    re.compile(r"\bat (?P<fn>.+?):0x[0-9a-fA-F]+(?: in (?P<file>\S+?):(?P<line>\d+))?\s*$"),
    re.compile(r"\bat 0x[0-9a-fA-F]+ in (?P<fn>.+?)\s*$"),
]
DEVICE_FRAME = re.compile(r"^Device Frame:\s*(?P<fn>.+?)(?:\+0x[0-9a-fA-F]+| \[0x[0-9a-fA-F]+\])")
HAZARDS = re.compile(r"\[(\d+) hazards?\]")
ERROR_SUMMARY = re.compile(r"^ERROR SUMMARY: (\d+) errors?")
RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?")
TOOL_ERROR = re.compile(r"^(Internal Sanitizer Error: .*|Error: .*(?:timed out|failed|Unable).*)$")
NOT_A_DETAIL = ("by thread", "Saved host backtrace", "Host Frame", "Device Frame")


def _joined(kind: str, rest: str) -> str:
    rest = rest.strip().rstrip(".")
    return f"{kind}: {rest}" if rest else kind


def headline(text: str) -> tuple[str, str, str] | None:
    """(kind, severity, detail) when `text` opens a report."""
    for pattern, name in HEADLINES:
        match = pattern.search(text)
        if match:
            return name(match)
    return None


def place(text: str) -> tuple[str, str] | None:
    """(function, `file:line` or ``) of an `at ...` clause in `text`."""
    for pattern in AT:
        match = pattern.search(text)
        if match:
            location = f"{match['file']}:{match['line']}" if match["file"] else ""
            return match["fn"].strip(), location
    return None


class _Report:
    """The lines of one report, from its headline to the next headline or
    the prefix alone."""

    def __init__(self, kind: str, severity: str, detail: str, text: str):
        self.finding = SanitizerFinding(kind=kind, severity=severity, detail=detail)
        self.frames: list[str] = []
        self.thread = ""  # `by thread (t) in block (b)`: the detail when no other line is
        self.count = 1
        self.take(text, first=True)

    def take(self, text: str, first: bool = False) -> None:
        frame = DEVICE_FRAME.search(text)
        if frame:
            self.frames.append(frame["fn"].strip())
            return
        hazards = HAZARDS.search(text)
        if hazards:
            self.count = int(hazards[1])
        where = place(text)
        if where and not self.finding.kernel:  # racecheck names it on its headline
            self.finding.kernel, self.finding.location = where
            return
        if text.startswith("by thread") and not self.thread:
            self.thread = text
        elif not first and not self.finding.detail and not text.startswith(NOT_A_DETAIL):
            self.finding.detail = HAZARDS.sub("", text).strip()

    def done(self) -> SanitizerFinding:
        if self.frames:  # the outermost device frame is the kernel itself
            self.finding.kernel = self.frames[-1]
        self.finding.count = self.count
        self.finding.detail = self.finding.detail or self.thread
        return self.finding


def parse_tool_log(text: str) -> ToolLog:
    """The findings, summary and tool failures of a compute-sanitizer text log."""
    result = ToolLog()
    grouped: dict[tuple[str, str, str, str], SanitizerFinding] = {}
    report: _Report | None = None

    def close() -> None:
        nonlocal report
        if report is not None:
            finding = report.done()
            if finding.key in grouped:
                grouped[finding.key].count += finding.count
            else:
                grouped[finding.key] = finding
            report = None

    for raw in text.splitlines():
        if not PREFIX.match(raw):
            continue  # the application's own lines, when they share the log
        line = PREFIX.sub("", raw, count=1).strip()
        summary = ERROR_SUMMARY.match(line) or RACE_SUMMARY.match(line)
        if summary:
            close()
            result.summary_errors = (result.summary_errors or 0) + int(summary[1])
            continue
        if TOOL_ERROR.match(line):
            close()
            result.tool_errors.append(line)
            continue
        opened = headline(line)
        if opened:
            close()
            report = _Report(*opened, line)
        elif not line:
            close()
        elif report is not None:
            report.take(line)
    close()
    result.findings = list(grouped.values())
    return result


@dataclass
class RunFacts:
    """What the verdict reads of one driver run under a tool."""

    exit_code: int | None
    outer_timeout: bool
    wall_s: float
    tool_log: ToolLog
    wait_timeouts: list[tuple[str, int]]  # (site, rank) of `afdep timeout:` lines
    driver_ok: bool  # the driver's AFDEP_RESULT said ok with checks
    last_line: str = ""


class Reason(str, Enum):
    """Why a run has no CLEAN or FINDINGS verdict, as the report words it."""

    HUNG = "hung: killed by the outer timeout after {wall_s} s"
    TOOL_FAILED = "compute-sanitizer failed: {detail}"
    NOT_CONCURRENT = (
        "the protocol needs producer and consumer kernels resident together; under "
        "{tool} a device wait timed out ({detail}): the tool did not run them concurrently"
    )
    NO_SUMMARY = "no ERROR SUMMARY line: the tool did not finish ({detail})"
    UNPARSED = "the summary counts {detail} errors but no report was read"
    DRIVER_FAILED = "the driver failed under the tool ({detail})"


# What a wait that timed out leaves behind under memcheck: its trap is a
# hardware exception, and the host's next call fails.
TRAP_ECHOES = ("CUDA API error", "Hardware exception")


def verdict(tool: Tool, facts: RunFacts) -> tuple[SanitizerVerdict, str]:
    """The verdict and its reason. Findings win over everything but a hang:
    a finding can itself end the driver (memcheck terminates the context);
    after a wait timed out, the trap's own echoes are not findings of the code."""
    log = facts.tool_log
    if facts.outer_timeout:
        return SanitizerVerdict.ERROR, Reason.HUNG.format(wall_s=facts.wall_s)
    echoes = TRAP_ECHOES if facts.wait_timeouts else ()
    if any(not f.kind.startswith(echoes) for f in log.findings):
        return SanitizerVerdict.FINDINGS, ""
    if log.tool_errors:
        return SanitizerVerdict.ERROR, Reason.TOOL_FAILED.format(detail=log.tool_errors[0])
    if facts.wait_timeouts:
        site, rank = facts.wait_timeouts[0]
        detail = f"site={site} rank={rank}"
        return SanitizerVerdict.NOT_APPLICABLE, Reason.NOT_CONCURRENT.format(
            tool=tool, detail=detail
        )
    if log.summary_errors is None:
        detail = f"exit {facts.exit_code}" + (f": {facts.last_line}" if facts.last_line else "")
        return SanitizerVerdict.ERROR, Reason.NO_SUMMARY.format(detail=detail)
    if log.summary_errors:
        return SanitizerVerdict.ERROR, Reason.UNPARSED.format(detail=log.summary_errors)
    if facts.exit_code != 0 or not facts.driver_ok:
        detail = f"exit {facts.exit_code}" + (f": {facts.last_line}" if facts.last_line else "")
        return SanitizerVerdict.ERROR, Reason.DRIVER_FAILED.format(detail=detail)
    return SanitizerVerdict.CLEAN, ""
