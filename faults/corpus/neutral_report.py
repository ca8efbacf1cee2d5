"""The document of `corpus --neutral` (faults/corpus/neutral.py):
docs/results/review-neutral-<machine>.{json,md}, one per machine and source
digest, a range reviewed later merged into it commit by commit."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from faults.corpus.bugs_report import machine_slug, write_merged
from faults.corpus.neutral import Commit, CommitResult, ReviewAnswer
from faults.report.markdown import table_head
from hostio import results_stem

# What a static review may take on a CPU, said beside the seconds measured.
STATIC_BUDGET_S = 10.0
SUBJECT_WIDTH = 72  # the Markdown table's subjects, cut (the JSON keeps them whole)
SITES_SHOWN = 4  # sites touched named in the table (the JSON names them all)


def commit_row(result: CommitResult) -> dict:
    commit = result.commit
    return {
        "sha": commit.sha,
        "parent": commit.parent,
        "subject": commit.subject,
        "merge": commit.merge,
        "verdict": str(result.outcome),
        "expected": str(result.expected),
        "why": result.why,
        "false_positive": result.false_positive,
        "as_expected": result.as_expected,
        "sites_touched": result.sites_touched,
        "findings": result.findings,
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
        "load_1min": result.load,
        "reason": result.reason,
        "older": result.older,
    }


def document(
    results: list[CommitResult],
    outside: list[Commit],
    *,
    machine: str,
    digest: str,
    sources: str,
    rev_range: str,
    expectations: str | None,
) -> dict:
    head = {
        "machine": machine,
        "native_source_sha256": digest,
        "sources": sources,
        "ranges": [rev_range],
        "expectations": expectations,
        "cpus": os.cpu_count(),
    }
    rows = [commit_row(result) for result in results]
    return with_totals(head, rows, [{"sha": c.sha, "subject": c.subject} for c in outside])


def with_totals(head: dict, rows: list[dict], outside: list[dict]) -> dict:
    """The document of `rows` (one per reviewed commit) under `head`, with
    its totals; `outside`: the commits that change nothing under the sources."""
    seconds = [row["seconds"] for row in rows]
    cpu = [row["cpu_seconds"] for row in rows]
    judged = [row for row in rows if row["verdict"] != str(ReviewAnswer.NOT_JUDGED)]
    slowest = max(seconds, default=0.0)
    return {
        **head,
        "commits_reviewed": len(rows),
        "approved": sum(row["verdict"] == str(ReviewAnswer.OK) for row in rows),
        "flagged": sum(row["verdict"] == str(ReviewAnswer.CHANGES_NEEDED) for row in rows),
        "not_judged": len(rows) - len(judged),
        "false_positives": [row["sha"] for row in rows if row["false_positive"]],
        "as_expected": sum(row["as_expected"] for row in rows),
        "max_seconds": slowest,
        "median_seconds": round(statistics.median(seconds), 2) if seconds else 0.0,
        "max_cpu_seconds": max(cpu, default=0.0),
        "median_cpu_seconds": round(statistics.median(cpu), 2) if cpu else 0.0,
        "static_budget_s": STATIC_BUDGET_S,
        "within_budget": slowest <= STATIC_BUDGET_S,
        "not_under_sources": len(outside),
        "results": rows,
        "outside_sources": outside,
    }


def passed(doc: dict) -> bool:
    """Every commit judged as expected (no false positive, none unjudged)."""
    return doc["as_expected"] == doc["commits_reviewed"]


def merged(earlier: dict, doc: dict) -> dict:
    """`doc` over an earlier document of the same machine, sources and digest
    (else `doc` alone): a commit reviewed again replaces its row, the ranges
    add up."""
    same = ("machine", "sources", "native_source_sha256")
    if any(earlier.get(key) != doc[key] for key in same):
        return doc
    rows = {row["sha"]: row for row in earlier.get("results", [])}
    rows.update({row["sha"]: row for row in doc["results"]})
    outside = {row["sha"]: row for row in earlier.get("outside_sources", [])}
    outside.update({row["sha"]: row for row in doc["outside_sources"]})
    ranges = [r for r in earlier.get("ranges", []) if r not in doc["ranges"]] + doc["ranges"]
    head = {key: doc[key] for key in same} | {
        "ranges": ranges,
        "expectations": doc["expectations"],
        "cpus": doc["cpus"],
    }
    return with_totals(head, list(rows.values()), list(outside.values()))


def cut(text: str, width: int = SUBJECT_WIDTH) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def summary(doc: dict) -> str:
    positives = ", ".join(sha[:8] for sha in doc["false_positives"]) or "none"
    budget = "within" if doc["within_budget"] else "OVER"
    return (
        f"{doc['commits_reviewed']} commits change the sources: {doc['approved']} approved, "
        f"{doc['flagged']} flagged, {doc['not_judged']} not judged; false positives: "
        f"{len(doc['false_positives'])} ({positives}); static review max "
        f"{doc['max_seconds']} s, median {doc['median_seconds']} s ({budget} the "
        f"{doc['static_budget_s']:g} s budget; CPU max {doc['max_cpu_seconds']} s, median "
        f"{doc['median_cpu_seconds']} s)"
    )


def table(rows: list[dict]) -> list[str]:
    lines = table_head(
        "commit | subject | verdict | expected | false positive | sites touched | s | CPU s | load"
    )
    for row in rows:
        touched = row["sites_touched"]
        sites = ", ".join(f"`{site}`" for site in touched[:SITES_SHOWN]) or "-"
        if len(touched) > SITES_SHOWN:
            sites += f" and {len(touched) - SITES_SHOWN} more"
        merge = " (merge)" if row["merge"] else ""
        lines.append(
            f"| `{row['sha'][:8]}`{merge} | {cut(row['subject'])} | {row['verdict']} | "
            f"{row['expected']} | {'yes' if row['false_positive'] else 'no'} | {sites} | "
            f"{row['seconds']} | {row['cpu_seconds']} | {row['load_1min']} |"
        )
    return lines


def notes(rows: list[dict]) -> list[str]:
    """Why each commit is expected flagged, what each flag found, why a
    review could not judge."""
    lines = []
    for row in rows:
        said = [f"expected {row['expected']}: {row['why']}"] if row["why"] else []
        said += [f"not judged: {row['reason']}"] if row["reason"] else []
        said += [row["older"]] if row.get("older") else []
        said += [f"finding: {finding}" for finding in row["findings"]]
        if said:
            lines += [f"- `{row['sha'][:8]}`", *(f"  - {cut(s, 200)}" for s in said)]
    return ["## Expectations, findings and errors", "", *lines, ""] if lines else []


def markdown(doc: dict) -> str:
    expectations = f"`{doc['expectations']}`" if doc["expectations"] else "none"
    ranges = ", ".join(f"`{r}`" for r in doc["ranges"])
    lines = [
        f"# Ordering-neutral commits on {doc['machine']}",
        "",
        f"Source digest `{doc['native_source_sha256']}` (`{doc['sources']}` at HEAD); ranges "
        f"{ranges}; expectations {expectations}. Each commit reviewed statically against "
        "its first parent by HEAD's review, with the tree's own catalog where that review "
        "takes it, else HEAD's (the notes say which), its own PTX cache empty (a "
        "target's compiler cache as the environment gave it); s: its wall time, CPU s: "
        "its processes' user + system time, load: the 1-minute load average of this "
        f"{doc['cpus']}-CPU machine as it began.",
        "",
        summary(doc) + ".",
        "",
        *table(doc["results"]),
        "",
        *notes(doc["results"]),
        f"{doc['not_under_sources']} commits change nothing under `{doc['sources']}` "
        "(the review has nothing to judge): "
        + (", ".join(f"`{row['sha'][:8]}`" for row in doc["outside_sources"]) or "none")
        + ".",
    ]
    return "\n".join(lines) + "\n"


def write_results(doc: dict, results_dir: Path) -> Path:
    """review-neutral-<machine>.json and .md, merged into the document already
    there; the stem returned."""
    stem = Path(results_dir) / results_stem("review-neutral", machine_slug(doc["machine"]))
    return write_merged(stem, doc, merged, markdown)
