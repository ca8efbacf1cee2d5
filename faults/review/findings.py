"""The review's findings as SARIF results (faults/report/sarif.py): one per
finding, at the file:line that holds it, under one rule per kind."""

from __future__ import annotations

from pathlib import Path

from faults.report.sarif import Finding, Level, Rule
from faults.review.model import Review

TOOL = "faults review"
CONTRACT = Rule("contract-violation", "a site's publish contract does not hold")
UNSITED = Rule("primitive-outside-site", "an ordering primitive added outside any site")
UNCOVERED = Rule("uncovered-site", "a touched site no fault covers")
CHANGE_FAILS = Rule("change-fails-driver", "the change's tree fails the driver with no fault")
HARNESS = Rule("harness-broken", "the harness cannot judge: BASE fails too, or no failure is seen")
FAULT_MISSED = Rule("covering-fault-missed", "a fault covering a touched site missed its verdict")
RULES = [CONTRACT, UNSITED, UNCOVERED, CHANGE_FAILS, HARNESS, FAULT_MISSED]


def findings(result: Review, prefix: Path, catalog: Path | None) -> list[Finding]:
    """`prefix`: the tree's root relative to the repository's top (uris are
    named from the top); `catalog`: the harness's file, relative to the top,
    where a broken harness is reported."""

    def uri(path: str) -> str:
        return (prefix / path).as_posix()

    found = [
        Finding(CONTRACT, Level.ERROR, f.where.message, uri(f.where.path), f.where.line)
        for f in result.contract.findings
    ]
    found += [Finding(UNSITED, Level.ERROR, u.message, uri(u.path), u.line) for u in result.unsited]
    for cover in result.touched:
        where = uri(result.site_path(cover)), cover.site.start
        found += [
            Finding(UNCOVERED, Level.ERROR, f"{cover.site.name}: {gap}", *where)
            for gap in cover.missing
        ]
        if result.runs is not None:
            found += [
                Finding(
                    FAULT_MISSED,
                    Level.ERROR,
                    f"{cover.site.name}: {r.fault} [{r.config}] {r.verdict}: {r.reason}",
                    *where,
                )
                for r in result.runs.faults
                if r.fault in cover.faults and not r.ok
            ]
    if result.runs is not None:
        found += change_fails(result, uri)
        found += [
            Finding(HARNESS, Level.WARNING, sentence, catalog and catalog.as_posix())
            for sentence in result.runs.harness_broken
        ]
    return found


def change_fails(result: Review, uri) -> list[Finding]:
    """The change failing the driver with no fault, said at every site it
    touched (the suspects, named), else at its first changed line."""
    failures = result.runs.change_fails
    if result.touched:
        return [
            Finding(
                CHANGE_FAILS,
                Level.ERROR,
                f"{cover.site.name}: {failure}",
                uri(result.site_path(cover)),
                cover.site.start,
            )
            for cover in result.touched
            for failure in failures
        ]
    path, line = first_changed(result)
    return [
        Finding(CHANGE_FAILS, Level.ERROR, str(failure), path and uri(path), line)
        for failure in failures
    ]


def first_changed(result: Review) -> tuple[str | None, int | None]:
    """Where a change that fails with no fault is reported: its first changed
    line under the sources; nowhere when it changed none."""
    for name in sorted(result.changed):
        if result.changed[name]:
            path = Path(result.sources) / name
            return path.as_posix(), min(result.changed[name])
    return None, None
