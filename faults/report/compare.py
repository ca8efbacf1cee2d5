"""Two sets of sweep reports side by side: each fault's verdict on the left
(for example the logical ranks of one GPU) and on the right (a GPU per rank),
the disagreements first. Several reports on a side are shards of one sweep:
they are merged. A fault in two shards (under different configs) is judged
again over the runs of all its shards, by the catalog; the same run (fault,
config, repeat) in two shards is an error, for its verdict would be ambiguous.
Like is compared with like: where one side ran a fault under configs the other
did not (a real-size config, say), each side's verdict is judged again over the
configs both ran, and the other runs are listed beside it with their verdicts.

    afdep-faults compare --left A.json [B.json ...] --right C.json [...] [--out F.md]
        [--notes NOTES.toml]

A notes file says why each disagreement is what it is (`[why]`, fault id =
text); a disagreement it does not explain is marked unexplained, and a note
on a fault that does not disagree is refused as stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from faults.catalog import Catalog
from faults.catalog.errors import FaultsError, read_toml
from faults.judge.run_result import RunResult
from faults.judge.verdict import summarize_fault
from faults.report.document import ReportError, read_report
from faults.schedules.ids import base_id


class CompareError(FaultsError):
    """Reports or notes that cannot be compared: one line naming the file and why."""


@dataclass(frozen=True)
class Side:
    label: str  # "1xH200, logical" - the machine and rank mode of its reports
    digests: tuple[str, ...]
    verdicts: dict[str, str]  # fault -> verdict word
    runs: dict[str, list[dict]]  # fault -> the run dicts of every shard it is in


# A fault and the run dicts of every shard it is in -> its verdict word.
Summarize = Callable[[str, list[dict]], str]


def read_side(paths: list[Path], option: str, summarize: Summarize | None = None) -> Side:
    """The verdicts of one side's reports; a fault in several shards judged
    by `summarize` over all its runs (None: such a fault is an error)."""
    verdicts: dict[str, str] = {}
    runs: dict[str, list[dict]] = {}
    shared: set[str] = set()  # faults found in more than one shard
    labels, digests, catalogs = set(), set(), set()
    for path in paths:
        try:
            report = read_report(path)
        except ReportError as error:
            raise CompareError(f"{option} {path}: {error}") from None
        document = report.to_json()
        faults, results = document["faults"], document["results"]
        labels.add(f"{report.machine}, {report.rank_mode}")
        digests.add(report.native_source_sha256)
        catalogs.add(Path(report.catalog).name)
        for summary in faults:
            fault = summary["fault"]
            own = [r for r in results if base_id(r["fault"]) == fault]
            if fault in verdicts:
                if summarize is None:
                    raise CompareError(f"{option} {path}: fault {fault} is in two shards")
                if not own or not runs[fault]:  # nothing to judge it again over
                    raise CompareError(
                        f"{option} {path}: fault {fault} is in two shards, "
                        "and a shard records none of its runs"
                    )
                seen = {run_key(r) for r in runs[fault]}
                twice = next((r for r in own if run_key(r) in seen), None)
                if twice is not None:
                    raise CompareError(
                        f"{option} {path}: {twice['fault']} under {twice['config']} "
                        f"(repeat {twice['repeat']}) is in two shards"
                    )
                shared.add(fault)
            runs.setdefault(fault, []).extend(own)
            verdicts[fault] = summary["verdict"]
    if len(labels) != 1:
        raise CompareError(f"{option}: reports of different machines or modes: {sorted(labels)}")
    if len(catalogs) != 1:  # one sweep's shards judge the same faults the same way
        raise CompareError(f"{option}: reports of different catalogs: {sorted(catalogs)}")
    for fault in shared:
        verdicts[fault] = summarize(fault, runs[fault])
    return Side(labels.pop(), tuple(sorted(digests)), verdicts, runs)


def fault_verdict(catalog: Catalog, fault_id: str, runs: list[dict]) -> str:
    """A fault's verdict over its runs from several shards, judged as the
    sweep judges one fault's runs."""
    if fault_id not in catalog.faults:
        raise CompareError(f"compare: fault {fault_id} of several shards is not in the catalog")
    results = [RunResult(**run) for run in runs]
    return summarize_fault(catalog.fault(fault_id), results).verdict.value


def run_key(run: dict) -> tuple:
    return run["fault"], run["config"], run["repeat"]


@dataclass(frozen=True)
class Row:
    """One fault's verdict on each side over the configs both sides ran."""

    fault: str
    left: str
    right: str
    beyond: str = ""  # the runs under configs only one side ran, with their verdicts

    @property
    def differs(self) -> bool:
        return NOT_RUN not in (self.left, self.right) and self.left != self.right


NOT_RUN = "not run"  # the verdict of a fault that one side's reports do not have


def rows(left: Side, right: Side, summarize: Summarize | None = None) -> list[Row]:
    """Every fault of either side: disagreements first, then the faults both
    sides ran, then those only one side ran."""
    both = [
        alike(f, left, right, summarize) for f in sorted(set(left.verdicts) & set(right.verdicts))
    ]
    one = [Row(f, v, NOT_RUN) for f, v in sorted(left.verdicts.items()) if f not in right.verdicts]
    one += [Row(f, NOT_RUN, v) for f, v in sorted(right.verdicts.items()) if f not in left.verdicts]
    return [r for r in both if r.differs] + [r for r in both if not r.differs] + one


def alike(fault: str, left: Side, right: Side, summarize: Summarize | None) -> Row:
    """`fault` judged on each side over the configs both ran (`summarize`
    judges a subset of runs; None, or no runs recorded: each side's verdict)."""
    runs = left.runs.get(fault, []), right.runs.get(fault, [])
    configs = [{r["config"] for r in side} for side in runs]
    common = configs[0] & configs[1]
    if summarize is None or not common or configs[0] == configs[1]:
        beyond = "no config in common" if all(configs) and not common else ""
        return Row(fault, left.verdicts[fault], right.verdicts[fault], beyond)
    verdicts, beyond = [], []
    for name, side, side_runs, own in zip(
        ("left", "right"), (left, right), runs, configs, strict=True
    ):
        shared = [r for r in side_runs if r["config"] in common]
        verdicts.append(side.verdicts[fault] if own == common else summarize(fault, shared))
        extra = [f"{r['config']} {r['verdict']}" for r in side_runs if r["config"] not in common]
        beyond += [f"{name}: {', '.join(extra)}"] if extra else []
    return Row(fault, verdicts[0], verdicts[1], "; ".join(beyond))


def read_notes(path: Path, compared: list[Row]) -> dict[str, str]:
    """`[why]` of the notes file: a text per disagreeing fault."""
    why = read_toml(path, lambda error: CompareError(f"--notes {path}: {error}")).get("why", {})
    if not isinstance(why, dict) or not all(isinstance(t, str) for t in why.values()):
        raise CompareError(f"--notes {path}: [why] must map fault ids to texts")
    differ = {r.fault for r in compared if r.differs}
    stale = sorted(set(why) - differ)
    if stale:
        raise CompareError(f"--notes {path}: {stale[0]} does not disagree here: its note is stale")
    return why


def markdown(
    left: Side, right: Side, compared: list[Row], notes: dict[str, str] | None = None
) -> str:
    notes = notes or {}
    differ = [r for r in compared if r.differs]
    both = [r for r in compared if NOT_RUN not in (r.left, r.right)]
    unexplained = [r for r in differ if r.fault not in notes]
    lines = [
        f"# Verdicts: {left.label} vs {right.label}",
        "",
        f"- left: {left.label}, source {', '.join(d[:12] for d in left.digests)}",
        f"- right: {right.label}, source {', '.join(d[:12] for d in right.digests)}",
        f"- {len(both)} fault{'' if len(both) == 1 else 's'} on both sides, "
        f"{len(differ)} disagree; "
        f"{len(set(left.verdicts) - set(right.verdicts))} only left, "
        f"{len(set(right.verdicts) - set(left.verdicts))} only right; "
        f"{len(unexplained)} disagreement{'' if len(unexplained) == 1 else 's'} unexplained",
        "- each verdict is over the configs both sides ran; runs beyond those are listed last",
        "",
        f"| fault | {left.label} | {right.label} | why they differ | runs on one side only |",
        "|---|---|---|---|---|",
    ]
    for r in compared:
        if r.differs:
            why = notes.get(r.fault, "**unexplained**")
            lines.append(f"| **{r.fault}** | **{r.left}** | **{r.right}** | {why} | {r.beyond} |")
        else:
            lines.append(f"| {r.fault} | {r.left} | {r.right} | | {r.beyond} |")
    return "\n".join(lines) + "\n"
