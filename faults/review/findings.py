"""The review's findings as SARIF results (faults/report/sarif.py): one per
finding, at the file:line that holds it, under one rule per kind."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from faults.report.sarif import Level, Result, Rule
from faults.review.model import Review
from faults.review.runs import NOTHING_RAN
from invariants.sync.finding import Finding

TOOL = "faults review"
CONTRACT = Rule("contract-violation", "a site's publish contract does not hold")
UNSITED = Rule("primitive-outside-site", "an ordering primitive the change leaves outside any site")
UNCOVERED = Rule("uncovered-site", "a touched site no fault covers")
CHANGE_FAILS = Rule("change-fails-driver", "the change's tree fails the driver with no fault")
HARNESS = Rule("harness-broken", "the harness cannot judge: BASE fails too, or no failure is seen")
FAULT_MISSED = Rule("covering-fault-missed", "a fault covering a touched site missed its verdict")
NEVER_FIRES = Rule(
    "site-never-fires", "a touched site no config that ran executes: no run covers it"
)
NOT_RUN_COVERED = Rule(
    "site-not-covered-by-run",
    "a touched site none of whose must-pass (or must-fail) faults ran: no run covers it",
)
NO_RUN = Rule("nothing-ran", "--run ran nothing: no config runs here")
SITE_GONE = Rule(
    "site-gone", "a site the change removed, renamed or left unbalanced while it still counts"
)
NO_LONGER_APPLIES = Rule(
    "entry-no-longer-applies", "a catalog entry naming a site the change's tree lacks"
)
CONTRACT_CHANGED = Rule(
    "contract-changed", "a site's declared contract differs between BASE and the change"
)
BASE_CONTRACT = Rule(
    "base-contract-violation", "the change's code breaks the contract BASE declared at a site"
)
PRE_EXISTING = Rule(
    "pre-existing-contract-violation",
    "a contract violation BASE's tree has too: not this change's, said so it is not lost",
)
RULES = [
    CONTRACT,
    CONTRACT_CHANGED,
    BASE_CONTRACT,
    PRE_EXISTING,
    UNSITED,
    SITE_GONE,
    NO_LONGER_APPLIES,
    UNCOVERED,
    CHANGE_FAILS,
    HARNESS,
    FAULT_MISSED,
    NEVER_FIRES,
    NOT_RUN_COVERED,
    NO_RUN,
]


def findings(result: Review, prefix: Path, catalog: Path | None) -> list[Result]:
    """`prefix`: the tree's root relative to the repository's top (uris are
    named from the top); `catalog`: the harness's file, relative to the top,
    where a broken harness is reported."""

    def at_top(finding: Finding) -> Finding:
        return replace(finding, file=(prefix / finding.file).as_posix())

    found = [Result(CONTRACT, Level.ERROR, at_top(f)) for f in result.contract.findings]
    found += [
        Result(CONTRACT_CHANGED, Level.ERROR, at_top(c.finding())) for c in result.contract_changes
    ]
    found += [Result(BASE_CONTRACT, Level.ERROR, at_top(f)) for f in result.held_to_base]
    found += [Result(PRE_EXISTING, Level.WARNING, at_top(f)) for f in result.contract.pre_existing]
    found += [Result(UNSITED, Level.ERROR, at_top(u)) for u in result.unsited]
    found += lost_findings(result, prefix, catalog)
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
                for r in result.runs.wrong_faults
                if r.fault in cover.faults
            ]
            fired = result.runs.firing.get(cover.site.name)
            if fired is not None and fired.uncovered:
                said = f"{fired}: no run covers it"
                found.append(
                    Result(NEVER_FIRES, Level.ERROR, Finding(*where, said, cover.site.name))
                )
            found += [
                Result(NOT_RUN_COVERED, Level.ERROR, Finding(*where, gap, cover.site.name))
                for gap in result.runs.unrun.get(cover.site.name, [])
            ]
    if result.runs is not None:
        if result.runs.ran_nothing:
            at_catalog = Finding(catalog and catalog.as_posix(), None, NOTHING_RAN)
            found.append(Result(NO_RUN, Level.ERROR, at_catalog))
        found += change_fails(result, prefix)
        found += [
            Result(HARNESS, Level.WARNING, Finding(catalog and catalog.as_posix(), None, sentence))
            for sentence in result.runs.harness_broken
        ]
    return found


def lost_findings(result: Review, prefix: Path, catalog: Path | None) -> list[Result]:
    """Each site the change broke, at its first line in BASE, then each
    catalog entry that no longer applies, at its first such site (at the
    catalog when it names none, or none BASE had)."""
    at_catalog = catalog and catalog.as_posix(), None
    where = {
        gone.name: ((prefix / gone.file).as_posix(), gone.line) if gone.file else at_catalog
        for gone in result.gone
    }
    found = []
    for gone in result.gone:
        applies = ", ".join(result.lost_naming(gone.name))
        lost = f"; no longer applying: {applies}" if applies else ""
        said = f"{gone.how}; {gone.where}{lost}"
        found.append(Result(SITE_GONE, Level.ERROR, Finding(*where[gone.name], said, gone.name)))
    for lost in result.lost:
        if lost.sites:
            why = f"it names {', '.join(lost.sites)}, which the change's tree lacks"
        else:  # a mutation rule
            why = "its twin cannot be made from the change's tree"
        at = where[lost.sites[0]] if lost.sites else at_catalog  # each site named is gone
        said = f"catalog entry {lost.entry} no longer applies: {why}"
        found.append(Result(NO_LONGER_APPLIES, Level.ERROR, Finding(*at, said)))
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
