"""The bug corpus's results document: per bug its class, the site, how it was
caught and the time of each review, merged by bug across commands (a corpus
run in shards builds one document), written as
docs/results/review-corpus-<machine>[-logical].{json,md}
(docs/review.md, "The bug corpus")."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import asdict
from functools import partial
from pathlib import Path

from faults.corpus.bugs import BugResult, Catch, CaughtBy
from hostio import results_stem


def document(
    results: list[BugResult],
    machine: str,
    digest: str,
    rank_mode: str = "per-gpu",
    *,
    corpus: str | None = None,
    not_made: tuple[dict, ...] = (),
    base_digests: dict[str, str] | None = None,
) -> dict:
    """The document of `results`; `corpus`: a foreign corpus's name (its
    file's stem, in the document's name), `not_made`: its real fixes no bug
    commit could undo, each with why. A foreign corpus's bugs sit on several
    releases: `digest` is then the corpus's own (its file, catalog and
    harness: what makes every bug tree), and `base_digests` each bug's base
    sources, carried in its row."""
    rows = []
    for result in results:
        rows.append(
            {
                "bug": result.bug.name,
                "class": result.bug.bug_class,
                "site": result.bug.site,
                "catch": str(result.bug.catch),
                "title": result.bug.title,
                "caught_by": str(result.caught_by),
                "static": asdict(result.static),
                "run": asdict(result.run) if result.run else None,
            }
        )
        if result.caught_by is CaughtBy.NOT_RUN:
            rows[-1]["not_run_why"] = result.not_run_why
        said = {"why": result.bug.why, "upstream": result.bug.upstream, "older": result.older}
        rows[-1].update({key: text for key, text in said.items() if text})
        if base_digests is not None:
            rows[-1]["base_source_sha256"] = base_digests[result.bug.name]
    if corpus is None:
        head = {"machine": machine, "rank_mode": rank_mode, "native_source_sha256": digest}
    else:
        head = {"machine": machine, "rank_mode": rank_mode, "corpus_sha256": digest}
        head.update(corpus=corpus, not_made=list(not_made))
    return with_totals(head, rows)


def with_totals(head: dict, rows: list[dict]) -> dict:
    """The document of `rows` (one per bug) under `head`, with its totals: a
    bug NOT RUN (only a run catches it, and none ran) is neither caught nor
    missed, and `judged` leaves it out."""
    caught_statically = (str(CaughtBy.STATIC), str(CaughtBy.BOTH))
    caught = (str(CaughtBy.STATIC), str(CaughtBy.RUN), str(CaughtBy.BOTH))
    not_run = sum(row["caught_by"] == str(CaughtBy.NOT_RUN) for row in rows)
    return {
        **head,
        "bugs": len(rows),
        "classes": sorted({row["class"] for row in rows}),
        "caught": sum(row["caught_by"] in caught for row in rows),
        "not_run": not_run,
        "judged": len(rows) - not_run,
        # Missed though expected caught (a bug expected missed says why).
        "missed_unexpectedly": sum(
            row["caught_by"] == str(CaughtBy.MISSED) and row["catch"] != str(Catch.MISSED)
            for row in rows
        ),
        "static_expected_caught_statically": all(
            row["caught_by"] in caught_statically
            for row in rows
            if row["catch"] == str(Catch.STATIC)
        ),
        "results": rows,
    }


def merged(earlier: dict, doc: dict, corpus: Collection[str] | None = None) -> dict:
    """`doc` over an earlier document of the same machine, rank mode and
    source, or of the same foreign corpus (else `doc` alone): a bug reviewed
    again replaces its row, so a corpus run in shards (a bug per command)
    builds one document. `corpus`: the bugs the corpus holds now; an earlier
    row of any other is dropped."""
    same = ("machine", "rank_mode", "native_source_sha256", "corpus_sha256")
    if any(earlier.get(key) != doc.get(key) for key in same):
        return doc
    kept = [key for key in (*same, "corpus", "not_made") if key in doc]
    rows = {
        row["bug"]: row
        for row in earlier.get("results", [])
        if corpus is None or row["bug"] in corpus
    }
    rows.update({row["bug"]: row for row in doc["results"]})
    by_bug = sorted(rows.values(), key=lambda row: row["bug"])
    return with_totals({key: doc[key] for key in kept}, by_bug)


def passed(doc: dict) -> bool:
    """Every bug expected caught was (a bug not run is not judged), each
    expected static caught by the static review."""
    return doc["missed_unexpectedly"] == 0 and doc["static_expected_caught_statically"]


def summary(doc: dict) -> str:
    expected = doc["judged"] - doc["caught"] - doc["missed_unexpectedly"]
    return (
        f"{doc['caught']} of {doc['judged']} bugs caught"
        + (f"; {expected} missed as expected" if expected else "")
        + (f"; {doc['missed_unexpectedly']} missed unexpectedly" * bool(doc["missed_unexpectedly"]))
        + (f"; {doc['not_run']} not run" if doc["not_run"] else "")
        + (f"; {len(doc['not_made'])} fixes not made" if doc.get("not_made") else "")
    )


def markdown(doc: dict) -> str:
    lines = [
        f"# Review corpus {doc['corpus'] + ' ' if doc.get('corpus') else ''}on {doc['machine']}"
        + (" (logical ranks on one GPU)" if doc.get("rank_mode") == "logical" else ""),
        "",
        (
            f"Source digest `{doc['native_source_sha256']}`"
            if "native_source_sha256" in doc
            else f"Corpus digest `{doc['corpus_sha256']}` (its file, catalog and harness;"
            " each bug's base sources in the last column)"
        )
        + f"; {doc['bugs']} bugs in "
        f"{len(doc['classes'])} classes; caught {doc['caught']}"
        + (f" of the {doc['judged']} judged; {doc['not_run']} not run" if doc["not_run"] else "")
        + ".",
        "",
    ]
    foreign = "corpus_sha256" in doc
    header = ["bug", "class", "site", "expected", "caught by", "static s", "run s"]
    header += ["base sources"] if foreign else []
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in doc["results"]:
        run_s = row["run"]["seconds"] if row["run"] else "-"
        lines.append(
            f"| {row['bug']} | {row['class']} | `{row['site']}` | {row['catch']} | "
            f"{row['caught_by']} | {row['static']['seconds']} | {run_s} |"
            + (f" `{row['base_source_sha256'][:12]}` |" if foreign else "")
        )
    return "\n".join(lines + notes(doc)) + "\n"


def notes(doc: dict) -> list[str]:
    """Under the table: why each bug's catch is expected as it is, a review
    that could not judge (exit neither 0 nor 1), a base the catalog did not
    load on (what of it was left out), and the fixes not made."""
    lines = []
    for row in doc["results"]:
        exits = [
            f"{mode} review exit {row[mode]['exit_code']}"
            for mode in ("static", "run")
            if row[mode] and row[mode]["exit_code"] not in (0, 1)
        ]
        said = [row.get("why", ""), *exits, row.get("upstream", ""), row.get("older", "")]
        if any(said):
            parts = (" ".join(text.split()).rstrip(".") for text in said if text)
            lines.append(f"- {row['bug']}: " + "; ".join(parts) + ".")
    for fix in doc.get("not_made", []):
        lines.append(
            f"- {fix['name']} ({fix['class']}, {fix['buggy']} -> {fix['fixed']}, {fix['file']}): "
            f"not made: {' '.join(fix['why'].split())} Upstream: {fix['upstream']}"
        )
    return ["", "Notes:", "", *lines] if lines else []


def machine_slug(machine: str) -> str:
    """A machine's name as a results file names it."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", machine).strip("-")


def write_merged(stem: Path, doc: dict, merge, render) -> Path:
    """`stem`.json and .md: `doc` merged (`merge(earlier, doc)`) into the
    document already there, rendered by `render`; the stem returned."""
    from hostio import write_json, write_text

    try:
        doc = merge(json.loads(stem.with_suffix(".json").read_text()), doc)
    except (OSError, ValueError):  # none there yet, or not a document: this one alone
        pass
    write_json(stem.with_suffix(".json"), doc)
    write_text(stem.with_suffix(".md"), render(doc))
    return stem


def write_results(doc: dict, results_dir: Path, corpus: Collection[str] | None = None) -> Path:
    """docs-style results: review-corpus-<machine>[-logical].json and .md (runs
    on logical ranks never mixed with per-GPU ones), merged into the document
    already there, less the bugs no longer in `corpus`; the stem returned."""
    kind = "review-corpus" + (f"-{doc['corpus']}" if doc.get("corpus") else "")
    name = results_stem(kind, machine_slug(doc["machine"]), doc.get("rank_mode"))
    stem = Path(results_dir) / name
    return write_merged(stem, doc, partial(merged, corpus=corpus), markdown)
