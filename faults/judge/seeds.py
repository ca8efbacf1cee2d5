"""Faults with seeded schedules over many seeds, and run ids
(docs/operators.md, "Seeded schedules and replay"). A fault whose delay has
a schedule runs, in a sweep with `--seeds K`, once per seed as its own fault
`<fault>~s<seed>` (its own tree); a run is named `<fault>@<config>#<repeat>`,
so a report's line says what `replay` takes. A run judged is a RunResult:
its id's parts, its verdict, its tree's digest and stages' seconds."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

from faults.catalog import Catalog, CatalogError
from faults.schedules.draw import draw
from faults.judge.outcome import Outcome
from faults.judge.verdict import FaultSummary, Judgement, Verdict, summarize_fault

SEED_MARK = "~s"
RUN_ID = re.compile(r"^(?P<fault>[^@#~]+)(?:~s(?P<seed>\d+))?@(?P<config>[^#]+)#(?P<repeat>\d+)$")
RUN_ID_FORM = "<fault>[~s<seed>]@<config>#<repeat>"


@dataclass(frozen=True)
class RunId:
    """One run of a sweep: a fault (with a seed, when scheduled over seeds), a
    config and a repeat."""

    fault: str  # the catalog's fault, without the seed
    seed: int | None
    config: str
    repeat: int

    @property
    def label(self) -> str:
        """The fault the run ran: the catalog's, or its seeded twin."""
        return self.fault if self.seed is None else seeded_id(self.fault, self.seed)

    def __str__(self) -> str:
        return f"{self.label}@{self.config}#{self.repeat}"


class JudgedTree(Protocol):
    """What a run's result takes of the tree it ran (faults.pipeline.scratch.Prepared)."""

    label: str
    digest: str
    apply_s: float
    build_s: float
    sass_s: float
    erased_unknown: str  # why the erasure check could not decide, if so


@dataclass
class RunResult:
    fault: str
    config: str
    repeat: int
    verdict: Verdict
    ok: bool
    reason: str
    tree_digest: str
    seconds: dict[str, float] = field(default_factory=dict)
    outcome: dict | None = None
    # A scheduled fault's seed and what it drew (docs/operators.md, "Seeded
    # schedules and replay"); None and "" for any other run.
    seed: int | None = None
    schedule: str = ""

    def __post_init__(self) -> None:  # a result read back from a JSON report holds the word
        self.verdict = Verdict(self.verdict)

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        tree: JudgedTree,
        config: str,
        repeat: int,
        judgement: Judgement,
        outcome: Outcome | None = None,
        judge_s: float = 0.0,
    ) -> RunResult:
        """A run of `tree` under `config`, judged (`judge_s`: parsing its log and the verdict)."""
        seed, schedule = describe(catalog, tree.label)
        return cls(
            fault=tree.label,
            config=config,
            repeat=repeat,
            verdict=judgement.verdict,
            ok=judgement.ok,
            reason="; ".join(filter(None, [judgement.reason, tree.erased_unknown])),
            tree_digest=tree.digest,
            seconds={
                "apply": round(tree.apply_s, 3),
                "build": round(tree.build_s, 3),
                "sass": round(tree.sass_s, 3),  # deciding whether the compiler erased it
                "run": round(outcome.wall_s if outcome else 0.0, 3),
                "judge": round(judge_s, 4),
            },
            outcome=outcome.to_dict() if outcome else None,
            seed=seed,
            schedule=schedule,
        )

    def to_dict(self) -> dict:
        """JSON reports and the history keep the verdict's word, e.g. `NOT FIRED`."""
        return {**asdict(self), "verdict": self.verdict.value}


def parse_run_id(text: str) -> RunId:
    """A run id back from its text; ValueError naming the form otherwise."""
    found = RUN_ID.match(text)
    if found is None:
        raise ValueError(f"run id {text!r}: not of the form {RUN_ID_FORM}")
    seed = found["seed"]
    return RunId(
        found["fault"], None if seed is None else int(seed), found["config"], int(found["repeat"])
    )


def run_id(result: RunResult) -> str:
    """A RunResult's run id (its fault holds the seed already)."""
    return f"{result.fault}@{result.config}#{result.repeat}"


def seeded_id(fault_id: str, seed: int) -> str:
    return f"{fault_id}{SEED_MARK}{seed}"


def split_seed(fault_id: str) -> tuple[str, int | None]:
    """(the catalog's fault, the seed) of a seeded twin; (itself, None) for any other."""
    head, mark, seed = fault_id.rpartition(SEED_MARK)
    return (head, int(seed)) if mark and seed.isdigit() else (fault_id, None)


def base_id(fault_id: str) -> str:
    """The catalog's fault of a seeded twin (itself for any other)."""
    return split_seed(fault_id)[0]


def is_scheduled(catalog: Catalog, fault_id: str) -> bool:
    return any(p.schedule is not None for p in catalog.all_patches(fault_id))


def with_seed(catalog: Catalog, fault_id: str, seed: int) -> Catalog:
    """`catalog` with `<fault_id>~s<seed>`: the fault with every schedule of its
    own patches drawn from `seed`, its markers its own; a scheduled include is
    seeded alike. The same seed gives the same patch text, so the same tree."""
    fault = catalog.fault(fault_id)
    label = seeded_id(fault_id, seed)
    if label in catalog.faults:
        return catalog
    includes = []
    for included in fault.includes:
        if is_scheduled(catalog, included):
            catalog = with_seed(catalog, included, seed)
            included = seeded_id(included, seed)
        includes.append(included)
    patches = tuple(
        replace(p, owner=label, schedule=p.schedule and replace(p.schedule, seed=seed))
        for p in fault.patches
    )
    twin = replace(fault, id=label, patches=patches, includes=tuple(includes))
    return replace(catalog, faults={**catalog.faults, label: twin})


def with_seeds(
    catalog: Catalog, fault_ids: list[str], seeds: tuple[int, ...]
) -> tuple[Catalog, list[str]]:
    """Each scheduled fault of `fault_ids` replaced by its twins over `seeds`
    (no seeds: the faults as they are); a CatalogError when none is scheduled."""
    if not seeds:
        return catalog, fault_ids
    if not any(is_scheduled(catalog, f) for f in fault_ids):
        raise CatalogError(f"--seeds {len(seeds)}: no chosen fault has a scheduled delay")
    expanded = []
    for fault_id in fault_ids:
        if not is_scheduled(catalog, fault_id):
            expanded.append(fault_id)
            continue
        for seed in seeds:
            catalog = with_seed(catalog, fault_id, seed)
            expanded.append(seeded_id(fault_id, seed))
    return catalog, expanded


def describe(catalog: Catalog, label: str) -> tuple[int | None, str]:
    """(seed, what it drew) of the fault `label` ((None, "") for a control or an
    unscheduled fault): one `<site> <summary>` per scheduled patch."""
    if label not in catalog.faults:
        return None, ""
    scheduled = [p for p in catalog.all_patches(label) if p.schedule is not None]
    if not scheduled:
        return None, ""
    text = "; ".join(f"{p.site} {draw(p.schedule, p.ns).summary()}" for p in scheduled)
    return scheduled[0].schedule.seed, text


def schedule_family(catalog: Catalog, fault_id: str) -> str | None:
    """The family of the fault's first scheduled patch (None: not scheduled)."""
    found = [p.schedule for p in catalog.all_patches(fault_id) if p.schedule is not None]
    return str(found[0].family) if found else None


def summaries_over_seeds(
    catalog: Catalog, fault_ids: list[str], results: list
) -> list[FaultSummary]:
    """One summary per catalog fault: a seeded fault's runs over all its seeds
    taken together, as repeats are (a must-fail fault killed by some seeds
    only is FLAKY, with its kill rate); its own markers summed over them."""
    groups: dict[str, list[str]] = {}
    for fault_id in fault_ids:
        base = base_id(fault_id)
        groups.setdefault(base if base in catalog.faults else fault_id, []).append(fault_id)
    summaries = []
    for base, labels in groups.items():
        runs = [r for r in results if r.fault in labels]
        markers: dict[str, int] = {}
        for label in labels:
            own = [r for r in runs if r.fault == label]
            for config, count in summarize_fault(catalog.fault(label), own).markers.items():
                markers[config] = markers.get(config, 0) + count
        summaries.append(replace(summarize_fault(catalog.fault(base), runs), markers=markers))
    return summaries


def seed_rows(catalog: Catalog, fault_ids: list[str], results: list) -> list[dict]:
    """Per seeded fault: its seed, what it drew, its verdict over its runs."""
    rows = []
    for label in fault_ids:
        seed, drawn = describe(catalog, label)
        if seed is None or base_id(label) == label:
            continue
        runs = [r for r in results if r.fault == label]
        summary = summarize_fault(catalog.fault(label), runs)
        rows.append(
            {
                "fault": base_id(label),
                "seed": seed,
                "family": schedule_family(catalog, label),
                "expect": summary.expect,
                "schedule": drawn,
                "verdict": summary.verdict.value,
                "killed": summary.killed,
                "fired": summary.fired,
                "runs": [run_id(r) for r in runs],
                "tree_digest": runs[0].tree_digest if runs else "",
            }
        )
    return rows


def kill_rates(rows: list[dict]) -> dict:
    """Per catalog fault and per schedule family: the seeds run, those whose
    runs all killed (must-fail) or all passed (must-pass), and the rate."""
    by_fault: dict[str, dict] = {}
    for row in rows:
        entry = by_fault.setdefault(
            row["fault"],
            {
                "family": row["family"],
                "expect": row["expect"],
                "seeds": 0,
                "met": 0,
                "verdicts": {},
            },
        )
        wanted = Verdict.KILLED if row["expect"] == "fail" else Verdict.PASSED
        entry["seeds"] += 1
        entry["met"] += row["verdict"] == wanted.value
        entry["verdicts"][str(row["seed"])] = row["verdict"]
    families: dict[str, dict] = {}
    for entry in by_fault.values():
        entry["rate"] = round(entry["met"] / entry["seeds"], 4)
        family = families.setdefault(
            entry["family"], {"faults": 0, "seeds": 0, "killed": 0, "pass_seeds": 0, "passed": 0}
        )
        if entry["expect"] == "fail":
            family["faults"] += 1
            family["seeds"] += entry["seeds"]
            family["killed"] += entry["met"]
        else:
            family["pass_seeds"] += entry["seeds"]
            family["passed"] += entry["met"]
    for family in families.values():
        family["kill_rate"] = (
            round(family["killed"] / family["seeds"], 4) if family["seeds"] else None
        )
    return {"faults": by_fault, "families": dict(sorted(families.items()))}
