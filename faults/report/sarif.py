"""SARIF 2.1.0, the format code-review tools (GitHub code scanning, IDEs) show
inline: one result per finding, each at its file:line, under a rule per kind
of finding. Only what the standard requires and what those tools read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from hostio import write_json
from invariants.sync.finding import Finding

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
# The base the relative uris resolve against: the repository's top, as
# GitHub code scanning names it.
SOURCE_ROOT = "%SRCROOT%"


class Level(str, Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    id: str
    description: str


@dataclass(frozen=True)
class Result:
    """A finding under its rule and level; its file is the uri, relative to
    the repository's top and '/'-separated."""

    rule: Rule
    level: Level
    finding: Finding

    def __post_init__(self) -> None:
        uri, line = self.finding.file, self.finding.line
        if uri is not None and (uri.startswith("/") or "\\" in uri):
            raise ValueError(f"SARIF uri {uri!r}: relative and '/'-separated")
        if line is not None and line < 1:
            raise ValueError(f"SARIF line {line}: lines start at 1")


def result(reported: Result, rule_index: int) -> dict:
    finding = reported.finding
    entry = {
        "ruleId": reported.rule.id,
        "ruleIndex": rule_index,
        "level": reported.level.value,
        "message": {"text": finding.said},
    }
    if finding.file is not None:
        location: dict = {"artifactLocation": {"uri": finding.file, "uriBaseId": SOURCE_ROOT}}
        if finding.line is not None:
            location["region"] = {"startLine": finding.line}
        entry["locations"] = [{"physicalLocation": location}]
    return entry


def sarif_document(
    tool: str, rules: list[Rule], findings: list[Result], properties: dict | None = None
) -> dict:
    """One run of `tool`; `rules` are every kind it can report, found or not;
    `properties`: the run's property bag (what the run saw beside its findings)."""
    index = {rule.id: i for i, rule in enumerate(rules)}
    unknown = sorted({f.rule.id for f in findings} - set(index))
    if unknown:
        raise ValueError(f"SARIF findings under rules not declared: {unknown}")
    run: dict = {
        "tool": {
            "driver": {
                "name": tool,
                "rules": [
                    {"id": rule.id, "shortDescription": {"text": rule.description}}
                    for rule in rules
                ],
            }
        },
        "results": [result(f, index[f.rule.id]) for f in findings],
    }
    if properties is not None:
        run["properties"] = properties
    return {"$schema": SCHEMA, "version": VERSION, "runs": [run]}


def write_sarif(
    path: Path,
    tool: str,
    rules: list[Rule],
    findings: list[Result],
    properties: dict | None = None,
) -> None:
    write_json(path, sarif_document(tool, rules, findings, properties))
