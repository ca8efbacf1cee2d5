"""The review's Markdown report: the change's own run first (with --run), the
static contract, each touched site with its contract result and covering
faults, then every run and the verdict."""

from __future__ import annotations

from faults.pipeline.engine import CLEAN
from faults.review.coverage import Coverage
from faults.review.model import Review
from faults.review.runs import NOTHING_RAN, RunReport
from faults.review.static import ContractCheck


def own_run(runs: RunReport | None) -> list[str]:
    lines = ["## The change's own run", ""]
    if runs is None:
        return [*lines, "Not run: the static review (--run runs it, then the covering faults).", ""]
    lines += [f"- **{failure}**" for failure in runs.change_fails]
    lines += [f"- **{sentence}**" for sentence in runs.harness_broken]
    if runs.ran_nothing:
        lines.append(f"- **{NOTHING_RAN}**")
    elif not runs.change_fails and not runs.harness_broken:
        configs = ", ".join(r.config for r in runs.controls if r.fault == CLEAN)
        lines.append(f"- The change's tree passes the driver with no fault (config {configs}).")
    lines += [f"- BASE's tree with no fault [{r.config}]: {r.verdict}" for r in runs.base_clean]
    if not runs.base_clean and not runs.ran_nothing:
        lines.append("- BASE's tree: not run (the change's tree passes: nothing to tell apart).")
    ran = [c.name for c in runs.plan.run]
    lines.append(f"- The matrix: {runs.plan.chosen}; run here: {', '.join(ran) or 'none'}.")
    if runs.plan.not_run:
        said = ", ".join(f"{name} ({why})" for name, why in runs.plan.not_run.items())
        lines.append(f"- Configs not run here: {said}.")
    return [*lines, ""]


def contract_summary(check: ContractCheck) -> list[str]:
    lines = ["## Static contract (the changed tree, no GPU)", ""]
    if not check.declared:
        return [*lines, "Not checked: the catalog declares no [target.contract].", ""]
    state = "no violation" if check.ok else f"{len(check.findings)} violation(s)"
    lines.append(
        f"{check.sites_checked} sites, {check.variants_checked} kernel variants checked: {state}."
    )
    if check.pre_existing:
        lines += ["", f"Also in BASE, not this change's ({len(check.pre_existing)}):", ""]
        lines += [f"- {finding}" for finding in check.pre_existing]
    return [*lines, ""]


def site_contract(check: ContractCheck, cover: Coverage) -> str:
    if not check.declared:
        return "not checked"
    found = check.at(cover.site.name)
    if found:
        return "VIOLATED: " + "; ".join(str(f) for f in found)
    if cover.site.kind in ("release", "wait"):
        return "ok"
    return f"none (a {cover.site.kind} site declares no publish contract)"


def touched_site(result: Review, cover: Coverage) -> list[str]:
    site = cover.site
    state = "covered" if not cover.missing else "UNCOVERED: " + "; ".join(cover.missing)
    if cover.not_run is not None:
        state = f"not run ({cover.not_run}): held to the contract only"
    path = result.site_path(cover)
    unneeded = "n/a (no wait guards it)"
    failing = ", ".join(cover.failing) or ("-" if cover.needs_failing else unneeded)
    lines = [
        f"- `{site.name}` ({site.kind}, {path}:{site.lines.start}-{site.lines.stop - 1}): {state}",
        f"  - contract: {site_contract(result.contract, cover)}",
        f"  - must pass: {', '.join(cover.passing) or '-'}",
        f"  - must fail: {failing}",
    ]
    if result.runs is not None:
        ran = [r for r in result.runs.faults if r.fault in cover.faults]
        verdicts = ", ".join(f"{r.fault} [{r.config}] {r.verdict}" for r in ran)
        none = (
            "none (no covering fault's sites fire under a config here)"
            if all(r.ok for r in result.runs.controls)
            else "none (a control was wrong: no fault judged)"
        )
        lines.append(f"  - ran: {verdicts or none}")
        lines += firing_lines(result.runs, cover)
    return lines


def firing_lines(runs: RunReport, cover: Coverage) -> list[str]:
    """Where the site fires (its probe's markers in the clean runs), and the
    covering faults that ran nowhere because their sites never fire together."""
    fired = runs.firing.get(cover.site.name)
    if fired is None:
        return []
    lines = [f"  - {fired}" + (" (no run covers it)" if fired.uncovered else "")]
    unplaced = [f for f in cover.faults if f in runs.unplaced]
    if unplaced:
        lines.append(
            f"  - not run: {', '.join(unplaced)} (their sites fire together under no config here)"
        )
    lines += [f"  - NOT COVERED BY A RUN: {gap}" for gap in runs.unrun.get(cover.site.name, [])]
    return lines


def run_note(run, excused: list) -> str:
    """Why a run that went wrong did: its reason, or for a must-fail fault's
    run before its kill (`excused`), that it was killed elsewhere."""
    if run.ok:
        return ""
    if run in excused:
        return " (not killed here; killed under another config)"
    return f" ({run.reason})"


def markdown(result: Review) -> str:
    lines = [f"# Ordering review: {result.base}..{result.change}", ""]
    files = ", ".join(f"`{name}`" for name in sorted(result.changed)) or "none"
    lines += [f"Files changed under the sources: {files}", ""]
    if result.older is not None:
        lines += [str(result.older), ""]
    lines += own_run(result.runs) + contract_summary(result.contract)
    if result.unsited:
        lines += ["## Site rules the change breaks (primitives outside any site, open regions)", ""]
        lines += [f"- {entry}" for entry in result.unsited] + [""]
    if result.gone:
        lines += ["## Sites the change removed, renamed or left unbalanced", ""]
        lines += [f"- `{gone.name}` ({gone.where}): {gone.how}" for gone in result.gone] + [""]
    if result.lost:
        lines += ["## Catalog entries that no longer apply (their site is gone)", ""]
        lines += [f"- {lost}" for lost in result.lost] + [""]
    if result.contract_changes or result.held_to_base:
        lines += ["## Contracts the change changed (old -> new), and BASE's held", ""]
        lines += [f"- {change.finding()}" for change in result.contract_changes]
        lines += [f"- {finding}" for finding in result.held_to_base] + [""]
    lines += ["## Sites touched", ""]
    if not result.touched:
        lines.append("None: the change leaves every synchronization site as it was.")
    for cover in result.touched:
        lines += touched_site(result, cover)
    elsewhere = result.untouched_findings()
    if elsewhere:
        lines += ["", "## Contract violations at sites the change does not touch", ""]
        lines += [f"- {finding}" for finding in elsewhere]
    if result.runs is not None:
        lines += ["", "## Runs on the change's tree (controls first)", ""]
        excused = result.runs.killed_elsewhere
        lines += [
            f"- {r.fault} [{r.config}]: {r.verdict}{run_note(r, excused)}"
            for r in [*result.runs.controls, *result.runs.faults]
        ]
    if result.wall_s is not None:
        lines += ["", f"Wall time: {result.wall_s:.1f} s"]
    lines += ["", f"Verdict: {result.verdict}"]
    return "\n".join(lines) + "\n"
