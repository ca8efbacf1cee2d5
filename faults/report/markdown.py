"""The sweep's Markdown and JUnit XML, from its JSON document."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from faults.judge.verdict import Verdict
from faults.schedules.report import schedule_tables


def table_head(heading: str) -> list[str]:
    """A Markdown table's heading row (`heading`: its cells, between ` | `)
    and the rule under it."""
    return [f"| {heading} |", "|" + "---|" * len(heading.split(" | "))]


def _controls_line(controls: list[dict]) -> str:
    if not controls:
        return "- controls: not run (no GPUs)"
    return "- controls: " + ", ".join(
        f"{c['fault']}/{c['config']} {c['verdict']}" for c in controls
    )


def _needs(by_config: dict[str, int]) -> str:
    """`2 for bf16-eager, fp8-eager; 4 for 4gpu-f1`"""
    groups: dict[int, list[str]] = {}
    for name, gpus in by_config.items():
        groups.setdefault(gpus, []).append(name)
    return "; ".join(f"{gpus} for {', '.join(names)}" for gpus, names in sorted(groups.items()))


def _one_gpu(document: dict) -> str:
    """A target with a logical run command runs every config on one GPU too."""
    if not document.get("logical_ranks"):
        return ""
    return "; or all on one GPU as logical ranks, the default with fewer GPUs"


def _score(value: float | None) -> str:
    return "n/a (nothing to count)" if value is None else f"{value}"


def _built(rows: list[dict]) -> str:
    """What the apply and build stages made of the faults, said as it is: an
    ERASED tree was built (its SASS is the clean tree's); a tree that failed,
    or a must-pass fault the compiler erased, is not ok."""
    built = sum(row["state"] == "built" for row in rows)
    erased = sum(row["state"] == Verdict.ERASED.value for row in rows)
    failed = [row for row in rows if not row.get("ok", row["state"] == "built")]
    if rows and not failed and not erased:
        return f"every fault ({built}) was applied and built"
    said = f"{built + erased} of {len(rows)} trees built"
    if erased:
        said += f", {erased} ERASED (SASS identical to the clean tree's)"
    if failed:
        said += f"; {len(failed)} not ok ({failed[0]['state']} first)"
    return said


def markdown(document: dict) -> str:
    """The sweep's report: its header, then what it could say: the trees it
    built (no GPUs), the broken harness, or the verdicts, the survivors said in
    full and what changed since the previous sweep."""
    lines = _header(document)
    if not document["runnable"]:
        lines += _built_table(document)
    elif not document["harness_ok"]:
        lines += _harness_broken(document["controls"])
    else:
        lines += _verdict_table(document["faults"])
        lines += _family_table(document.get("mutation_score_by_family", {}))
        lines += schedule_tables(document.get("schedules"))
        lines += _survivors(document["faults"])
        lines += _fired_in_part(document.get("results", []))
        lines += _changes(document.get("changes"))
    return "\n".join(lines) + "\n"


def _mode(document: dict) -> str:
    """Logical ranks on one GPU are said; a report from before modes has none."""
    return " (logical ranks on one GPU)" if document.get("rank_mode") == "logical" else ""


def _header(document: dict) -> list[str]:
    return [
        f"# Fault sweep: {document['catalog']}",
        "",
        f"- tree `{document['native_source_sha256'][:12]}` on {document['machine']}"
        f"{_mode(document)}, {document['written']}",
        f"- mutation score {_score(document['mutation_score'])} "
        f"(killed / must-fail that fired{_aside(document)}), "
        f"firing rate {_score(document['firing_rate'])}",
        _controls_line(document["controls"]),
        *_shards(document.get("shards")),
        *_superseded(document.get("superseded")),
        *_unrun(document),
        *_matrix(document),
        *_not_selected(document.get("not_selected")),
        *_rejudged(document.get("rejudged")),
        "",
    ]


def _aside(document: dict) -> str:
    """The mutants that fired yet are outside the score (EQUIVALENT, ERASED),
    as in each family's: faults/judge/scores.py computes both one way."""
    families = (document.get("mutation_score_by_family") or {}).values()
    counts = {c: sum(row.get(c, 0) for row in families) for c in ("equivalent", "erased")}
    said = ", ".join(f"{n} {c}" for c, n in counts.items() if n)
    return f"; outside it, as in each family's score: {said}" if said else ""


def _shards(shards: list[dict] | None) -> list[str]:
    """A merged report's shards (`afdep-faults merge`): each file, when it was
    written, how many faults it judged and in how long."""
    if not shards:
        return []
    said = "; ".join(
        f"`{s['report']}` ({s['written']}, {s['faults']} faults, {s['wall_s']:g} s)" for s in shards
    )
    return [f"- merged from {len(shards)} shards: {said}"]


def _superseded(runs: list[dict] | None) -> list[str]:
    """The runs a later shard ran again (`merge --rerun-wins`): which was kept."""
    if not runs:
        return []
    said = "; ".join(f"{r['run']} (kept from `{r['kept']}`)" for r in runs)
    return [f"- {len(runs)} runs re-run in a later shard, the later kept: {said}"]


def _matrix(document: dict) -> list[str]:
    """A matrix sweep: how its configs were chosen, where each patched site
    fired, and the faults whose sites fire together nowhere."""
    if not document.get("matrix"):
        return []
    lines = [f"- configs: the catalog's [matrix], {document['matrix']}"]
    lines += [f"  - `{site}`: {where}" for site, where in document.get("firing", {}).items()]
    unplaced = document.get("unplaced") or []
    if unplaced:
        said = ", ".join(unplaced)
        count = len(unplaced)
        lines.append(f"- **not run**, sites fire together under no config: {count} ({said})")
    return lines


def _unrun(document: dict) -> list[str]:
    """The faults a spent --budget-s left out: this report is a partial shard
    (or, merged, what no shard ran)."""
    unrun = document.get("unrun") or []
    if not unrun:
        return []
    why = (
        "by any shard"
        if document.get("budget_s") is None
        else f"the {document['budget_s']:g} s budget spent"
    )
    return [f"- **not run**, {why}: {len(unrun)} faults ({', '.join(unrun)})"]


def _not_selected(faults: list[str] | None) -> list[str]:
    """The catalog's faults no merged shard selected: the sweep is not whole."""
    if not faults:
        return []
    return [f"- **in no shard**: {len(faults)} faults of the catalog ({', '.join(faults)})"]


def _rejudged(passes: list[dict] | None) -> list[str]:
    """Each `afdep-faults rejudge` pass: when, and which runs' verdicts it changed."""
    lines = []
    for again in passes or []:
        changes = again["changes"]
        said = f": {'; '.join(changes)}" if changes else ""
        lines.append(
            f"- judged again from the recorded outcomes by the rules of {again['written']}: "
            f"{len(changes)} verdict(s) changed{said}"
        )
        dropped = [
            f"{fault} (was {was['verdict']}, {'ok' if was['ok'] else 'not ok'})"
            for fault, was in (again.get("dropped") or {}).items()
        ]
        if dropped:
            lines.append(
                "  - dropped, their trees changed since they ran (to run again): "
                + ", ".join(dropped)
            )
    return lines


def _built_table(document: dict) -> list[str]:
    """No GPUs here: the runs a GPU machine owes, and each tree as built."""
    lines = [
        f"Runs need GPUs ({_needs(document['gpus_needed'])}{_one_gpu(document)}): "
        f"{len(document['gpu_runs_needed'])} "
        f"(fault, config) runs are listed in the JSON; {_built(document['built'])}:",
        "",
        *table_head("fault | state | tree | apply s | build s"),
    ]
    return lines + [
        f"| {b['fault']} | {b['state']} | `{b['tree_digest'][:8]}` | {b['apply_s']} | "
        f"{b['build_s']} |"
        for b in document.get("built", [])
    ]


def _harness_broken(controls: list[dict]) -> list[str]:
    wrong = [f"{c['fault']} under {c['config']}: {c['verdict']}" for c in controls if not c["ok"]]
    return ["**Harness broken, no fault judged:** " + "; ".join(wrong)]


def _markers(by_config: dict[str, int]) -> str:
    """This fault's own markers per config (`bf16-graph 8, bf16-graph@2048 9,812`)."""
    if len(by_config) == 1:
        return f"{next(iter(by_config.values())):,}"
    return ", ".join(f"{config} {count:,}" for config, count in by_config.items())


def _verdict_table(faults: list[dict]) -> list[str]:
    lines = table_head(
        "fault | expect | verdict | ok | fired/runs | markers | kill rate | repeats for 99 % | why"
    )
    for s in faults:
        rate = "" if s["kill_rate"] is None else f"{s['kill_rate']:.2f}"
        need = "" if s["repeats_for_99"] is None else str(s["repeats_for_99"])
        why = s["reason"].replace("|", "/").splitlines()[0][:160] if s["reason"] else ""
        lines.append(
            f"| {s['fault']} | {s['expect']} | {s['verdict']} | "
            f"{'yes' if s['ok'] else 'NO'} | {s['fired']}/{s['runs']} | "
            f"{_markers(s.get('markers', {}))} | {rate} | "
            f"{need} | {why} |"
        )
    return lines


FAMILY_COLUMNS = ("killed", "survived", "unobservable", "flaky", "hung", "broke")
OUTSIDE_COLUMNS = ("equivalent", "erased", "not_fired", "errors")  # outside the score


def _family_table(families: dict[str, dict]) -> list[str]:
    """The mutation score per family of must-fail faults: killed / (killed +
    survived + unobservable + flaky + hung + broke); EQUIVALENT, ERASED, NOT
    FIRED and errors beside it, outside the score (docs/operators.md,
    "Mutation operators"; a report from before ERASED counts none)."""
    if not families:
        return []
    lines = [
        "",
        "## Mutation score per family",
        "",
        "score = killed / (killed + survived + unobservable + flaky + hung + broke)",
        "",
        "| family | score | "
        + " | ".join([*FAMILY_COLUMNS, *OUTSIDE_COLUMNS]).replace("_", " ")
        + " |",
        "|---|---|" + "---|" * (len(FAMILY_COLUMNS) + len(OUTSIDE_COLUMNS)),
    ]
    for family, row in families.items():
        counts = " | ".join(str(row.get(c, 0)) for c in [*FAMILY_COLUMNS, *OUTSIDE_COLUMNS])
        lines.append(f"| {family} | {_score(row['score'])} | {counts} |")
    return lines


SURVIVING = (Verdict.SURVIVED, Verdict.FLAKY, Verdict.UNOBSERVABLE, Verdict.EQUIVALENT)


def _survivors(faults: list[dict]) -> list[str]:
    """The table cuts each reason to a line; a must-fail fault that survived a
    run (SURVIVED, FLAKY, UNOBSERVABLE) is said in full: its known-survivor
    reason, or the static contract's finding, and its hint."""
    survivors = [s for s in faults if s["expect"] == "fail" and s["verdict"] in SURVIVING]
    if not survivors:
        return []
    return ["", "## Must-fail faults that survived a run", ""] + [
        f"- {s['fault']}: {s['verdict']}, "
        f"{'explained' if s['ok'] else 'NOT explained'}: {' '.join(s['reason'].split())}"
        for s in survivors
    ]


def _fired_in_part(results: list[dict]) -> list[str]:
    """A fault whose patched code never ran under one config but ran under
    another: its verdict stands for the configs it fired under only (a
    schedule's points, or a site, that no run of the others reaches)."""
    fired: dict[str, set[str]] = {}
    quiet: dict[str, set[str]] = {}
    for r in results:
        if r["verdict"] == Verdict.NOT_FIRED:
            quiet.setdefault(r["fault"], set()).add(r["config"])
        elif (r.get("outcome") or {}).get("markers", {}).get(r["fault"]):
            fired.setdefault(r["fault"], set()).add(r["config"])
    said = [
        f"- {fault}: never fired under {', '.join(sorted(configs - fired[fault]))}; "
        f"fired under {', '.join(sorted(fired[fault]))}"
        for fault, configs in quiet.items()
        if fault in fired and configs - fired[fault]
    ]
    if not said:
        return []
    return ["", "## Faults that fired under some configs only", ""] + said


def _changes(changes: dict | None) -> list[str]:
    """What changed since the previous sweep of this catalog (none: nothing said)."""
    if not changes or changes.get("previous") is None:
        return []
    lines = ["", f"## Changed since sweep {changes['previous']}", ""]
    lines += [f"- {fault}: {before} -> {now}" for fault, before, now in changes["verdicts"]]
    lines += [f"- new survivor: {fault}" for fault in changes["new_survivors"]]
    lines += [
        f"- new site without a catalog fault: {site}"
        for site in changes["new_sites_without_faults"]
    ]
    if not any(changes[k] for k in ("verdicts", "new_survivors", "new_sites")):
        lines.append("- nothing")
    return lines


def junit(document: dict) -> str:
    """One testcase per (fault, config, repeat); a missed expectation is a
    failure. A sweep that could run nothing: one per tree it built (its
    state the case's, a tree not built as it should a failure)."""
    results = document["controls"] + document["results"]
    built = [] if results else document.get("built") or []
    suite = ET.Element(
        "testsuite",
        name=f"faults:{document['catalog']}",
        tests=str(len(results) + len(built)),
        failures=str(sum(not r["ok"] for r in results) + sum(not b["ok"] for b in built)),
    )
    for tree in built:
        case = ET.SubElement(suite, "testcase", classname=tree["fault"], name="built")
        if not tree["ok"]:
            ET.SubElement(case, "failure", message=tree["state"]).text = tree.get("reason", "")
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=r["fault"],
            name=f"{r['config']}-r{r['repeat']}",
            time=str(r["seconds"].get("run", 0.0)),
        )
        if not r["ok"]:
            failure = ET.SubElement(case, "failure", message=r["verdict"])
            failure.text = r["reason"]
        elif r["verdict"] in (Verdict.SURVIVED, Verdict.UNOBSERVABLE, Verdict.NOT_FIRED):
            ET.SubElement(case, "system-out").text = f"{r['verdict']}: {r['reason']}"
    return ET.tostring(suite, encoding="unicode") + "\n"
