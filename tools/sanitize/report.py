"""The compute-sanitizer stage's documents: `sanitize-<machine>-logical.json`
(every run's command, exit, wall time, findings and verdict) and its
Markdown page, one table of runs and one of findings."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tools.sanitize.findings import Execution, SanitizerVerdict, Tool


@dataclass
class ToolRun:
    tool: Tool
    execution: Execution
    command: list[str]
    exit_code: int | None
    wall_s: float
    verdict: SanitizerVerdict
    reason: str
    findings: list[dict]
    summary_errors: int | None
    tool_errors: list[str]
    wait_timeouts: list[tuple[str, int]]
    log: str  # the driver's output
    sanitizer_log: str  # the tool's text (--log-file)

    @property
    def name(self) -> str:
        return f"{self.tool}-{self.execution}"

    def as_dict(self) -> dict:
        return {
            "tool": str(self.tool),
            "execution": str(self.execution),
            "command": self.command,
            "exit_code": self.exit_code,
            "wall_s": self.wall_s,
            "verdict": str(self.verdict),
            "reason": self.reason,
            "findings": self.findings,
            "summary_errors": self.summary_errors,
            "tool_errors": self.tool_errors,
            "wait_timeouts": [list(t) for t in self.wait_timeouts],
            "log": self.log,
            "sanitizer_log": self.sanitizer_log,
        }


@dataclass
class StageRecord:
    machine: str
    digest: str
    rank_mode: str
    sanitizer: str  # `compute-sanitizer --version`'s last line
    driver: list[str]  # the driver's arguments, without --eager / --graph
    env: dict[str, str]
    baseline: dict  # the driver without a tool: exit, wall, ok
    runs: list[ToolRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No finding and no error: NOT APPLICABLE is said, with its reason, not failed."""
        passing = (SanitizerVerdict.CLEAN, SanitizerVerdict.NOT_APPLICABLE)
        return self.baseline.get("ok", False) and all(r.verdict in passing for r in self.runs)

    def document(self) -> dict:
        return {
            "tool": "tools.sanitize",
            "machine": self.machine,
            "native_source_sha256": self.digest,
            "rank_mode": self.rank_mode,
            "sanitizer": self.sanitizer,
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "driver": self.driver,
            "env": self.env,
            "baseline": self.baseline,
            "ok": self.ok,
            "runs": [run.as_dict() for run in self.runs],
        }


def verdict_text(verdict: str, reason: str) -> str:
    return f"{verdict} ({reason})" if reason else verdict


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") if text != "" else "-"


def markdown(document: dict) -> str:
    """The page: what ran, one row per run, one row per finding."""
    baseline = document["baseline"]
    env = " ".join(f"{k}={v}" for k, v in sorted(document["env"].items()))
    lines = [
        "# compute-sanitizer: the driver on one GPU, logical ranks",
        "",
        f"- rank mode: {document['rank_mode']}",
        f"- native_source_sha256: `{document['native_source_sha256']}`",
        f"- compute-sanitizer: {document['sanitizer']}",
        f"- driver: `{' '.join(document['driver'])}` with {env}",
        f"- without a tool: {'ok' if baseline.get('ok') else 'FAILED'}, "
        f"exit {baseline.get('exit_code')}, {baseline.get('wall_s')} s",
        f"- verdict: {'ok' if document['ok'] else 'NOT OK'}",
        "",
        "| tool | execution | verdict | findings | exit | wall s |",
        "|---|---|---|---|---|---|",
    ]
    for run in document["runs"]:
        verdict = verdict_text(run["verdict"], run["reason"])
        count = sum(f["count"] for f in run["findings"])
        lines.append(
            f"| {run['tool']} | {run['execution']} | {cell(verdict)} | {count} "
            f"| {run['exit_code']} | {run['wall_s']} |"
        )
    lines += ["", "## Findings", ""]
    findings = [(run, f) for run in document["runs"] for f in run["findings"]]
    if not findings:
        return "\n".join([*lines, "None.", ""])
    lines += [
        "| tool | execution | kind | kernel | location | count | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for run, f in findings:
        kind = f"{f['kind']} ({f['severity']})" if f["severity"] else f["kind"]
        lines.append(
            f"| {run['tool']} | {run['execution']} | {cell(kind)} | {cell(f['kernel'])} "
            f"| {cell(f['location'])} | {f['count']} | {cell(f['detail'])} |"
        )
    return "\n".join([*lines, ""])
