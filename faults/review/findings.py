"""The review's findings as SARIF results (faults/report/sarif.py): one per
finding, at the file:line that holds it, under one rule per kind."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from faults.report.sarif import Level, Result, Rule
from faults.review.model import Review
from invariants.sync.finding import Finding

TOOL = "faults review"
CONTRACT = Rule("contract-violation", "a site's publish contract does not hold")
UNSITED = Rule("primitive-outside-site", "an ordering primitive the change leaves outside any site")
UNCOVERED = Rule("uncovered-site", "a touched site no fault covers")
CHANGE_FAILS = Rule("change-fails-driver", "the change's tree fails the driver with no fault")
HARNESS = Rule("harness-broken", "the harness cannot judge: BASE fails too, or no failure is seen")
FAULT_MISSED = Rule("covering-fault-missed", "a fault covering a touched site missed its verdict")
RULES = [CONTRACT, UNSITED, UNCOVERED, CHANGE_FAILS, HARNESS, FAULT_MISSED]


def findings(result: Review, prefix: Path, catalog: Path | None) -> list[Result]:
    """`prefix`: the tree's root relative to the repository's top (uris are
    named from the top); `catalog`: the harness's file, relative to the top,
    where a broken harness is reported."""

    def at_top(finding: Finding) -> Finding:
        return replace(finding, file=(prefix / finding.file).as_posix())

    found = [Result(CONTRACT, Level.ERROR, at_top(f)) for f in result.contract.findings]
    found += [Result(UNSITED, Level.ERROR, at_top(u)) for u in result.unsited]
    for cover in result.touched:
        where = (prefix / result.site_path(cover)).as_posix(), cover.site.lines.start
        found += [
            Result(UNCOVERED, Level.ERROR, Finding(*where, gap, cover.site.name))
            for gap in cover.missing
        ]
        if result.runs is not None:
            found += [
                Result(
                    FAULT_MISSED,
                    Level.ERROR,
                    Finding(
                        *where, f"{r.fault} [{r.config}] {r.verdict}: {r.reason}", cover.site.name
                    ),
                )
                for r in result.runs.faults
                if r.fault in cover.faults and not r.ok
            ]
    if result.runs is not None:
        found += change_fails(result, prefix)
        found += [
            Result(HARNESS, Level.WARNING, Finding(catalog and catalog.as_posix(), None, sentence))
            for sentence in result.runs.harness_broken
        ]
    return found


def change_fails(result: Review, prefix: Path) -> list[Result]:
    """The change failing the driver with no fault, said at every site it
    touched (the suspects, named), else at its first changed line."""
    failures = result.runs.change_fails
    if result.touched:
        return [
            Result(
                CHANGE_FAILS,
                Level.ERROR,
                Finding(
                    (prefix / result.site_path(cover)).as_posix(),
                    cover.site.lines.start,
                    str(failure),
                    cover.site.name,
                ),
            )
            for cover in result.touched
            for failure in failures
        ]
    path, line = first_changed(result)
    file = path and (prefix / path).as_posix()
    return [
        Result(CHANGE_FAILS, Level.ERROR, Finding(file, line, str(failure))) for failure in failures
    ]


def first_changed(result: Review) -> tuple[str | None, int | None]:
    """Where a change that fails with no fault is reported: its first changed
    line under the sources; nowhere when it changed none."""
    for name in sorted(result.changed):
        if result.changed[name]:
            path = Path(result.sources) / name
            return path.as_posix(), min(result.changed[name])
    return None, None
