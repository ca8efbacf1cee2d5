"""What a shrink hands back (docs/operators.md, "Shrinking"): the JSON
and Markdown report of every probe, the command that reruns the minimal
input by hand, the line that says a start input did not kill, and the
regression case (tests/regress/shrunk/<fault>.json) that
tests/regress/test_shrunk.py holds KILLED there."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.pipeline.run import substitute
from faults.shrink.loop import Shrunk
from faults.shrink.plan import ShrinkPlan
from hostio import machine_name, results_stem, write_json, write_text


@dataclass(frozen=True)
class ShrinkContext:
    """What was shrunk, where, and how it is rerun."""

    fault: str
    config: str
    rank_mode: str
    machine: str
    catalog: str  # the catalog's path relative to the root (as a test names it)
    budget_s: float
    repeat: int
    gpus: int  # GPUs one run needs (the regression test's marker)

    @classmethod
    def of(
        cls, plan: ShrinkPlan, catalog: Path, root: Path, budget_s: float, repeat: int
    ) -> ShrinkContext:
        """The shrink of `plan` on this machine, its catalog at `catalog`."""
        return cls(
            fault=plan.fault,
            config=plan.config.name,
            rank_mode=str(plan.catalog.rank_mode),
            machine=machine_name(),
            catalog=catalog_name(catalog, root),
            budget_s=budget_s,
            repeat=repeat,
            gpus=plan.catalog.gpus_for(plan.config),
        )


def catalog_name(catalog: Path, root: Path) -> str:
    """The catalog as the tree names it (relative to the root), else its path."""
    try:
        return str(Path(catalog).resolve().relative_to(root))
    except ValueError:
        return str(Path(catalog).resolve())


def report_stem(context: ShrinkContext) -> str:
    """`shrink-<fault>-<machine>[-logical]`: a logical shrink never over a per-GPU one."""
    return results_stem(f"shrink-{context.fault}", context.machine, context.rank_mode)


def paste_command(
    program: str,
    context: ShrinkContext,
    catalog: Catalog,
    config: Config,
    args: list[str],
    digest: str,
) -> str:
    """The fault applied to a fresh tree, built, and run with `args`, as the
    engine runs it: every placeholder filled in, the target's and the
    config's environment set."""
    tree = f"/tmp/shrunk-{slug(context.fault)}"
    filled = {
        "tree": ".",
        "out": "shrunk-out",
        "python": sys.executable,
        "digest": digest,
        "gpus": str(context.gpus),
        "ranks": str(catalog.ranks_for(config)),
    }
    steps = [
        shlex.join([*shlex.split(program), "--catalog", context.catalog, "apply", context.fault])
        + f" --out {tree}",
        f"cd {tree}",
    ]
    setting = ["env", "PYTHONPATH=.", *(f"{k}={v}" for k, v in catalog.target.env.items())]
    if catalog.target.build:
        build = substitute(catalog.target.build, **filled)
        steps += ["mkdir -p shrunk-out", shlex.join([*setting, *build])]
    run = substitute(catalog.target.run + config.args + tuple(args), **filled)
    steps.append(shlex.join([*setting, *(f"{k}={v}" for k, v in config.env.items()), *run]))
    return " && ".join(steps)


def reports(
    context: ShrinkContext, plan: ShrinkPlan, digest: str, shrunk: Shrunk, program: str
) -> tuple[dict, str]:
    """The report of `shrunk` so far, its JSON document and its Markdown, with
    the command (`program` the name the user typed) that reruns its minimal
    input by hand, else its start's."""
    rerun = minimal_args(shrunk) or shrunk.probes[0].args
    command = paste_command(program, context, plan.catalog, plan.config, rerun, digest)
    doc = document(context, shrunk, command)
    return doc, markdown(doc)


def write_reports(results_dir: Path, context: ShrinkContext, doc: dict, text: str) -> Path:
    """`<stem>.json` and `<stem>.md` under `results_dir`; the stem."""
    stem = results_dir / report_stem(context)  # a fault id holds dots: no with_suffix
    write_json(stem.with_name(f"{stem.name}.json"), doc)
    write_text(stem.with_name(f"{stem.name}.md"), text)
    return stem


def not_killed(fault: str, config: str, shrunk: Shrunk) -> str:
    """Why nothing shrank: no start input killed, each probe's verdicts said."""
    verdicts = "; ".join(" ".join(probe.verdicts) for probe in shrunk.probes)
    others = len(shrunk.probes) - 1
    where = "the start input" + (
        f" nor at the {others} other starts its run command's lists give" if others else ""
    )
    return (
        f"shrink: {fault} is not KILLED at {where} under {config} ({verdicts}): nothing to shrink"
    )


def document(context: ShrinkContext, shrunk: Shrunk, command: str) -> dict:
    return {
        **asdict(context),
        "start": shrunk.start,
        "start_killed": shrunk.start_killed,
        "minimal": shrunk.minimal,
        "minimal_args": minimal_args(shrunk),
        "budget_spent": shrunk.budget_spent,
        "finished": shrunk.finished,
        "probes": [asdict(probe) for probe in shrunk.probes],
        "seconds": round(sum(p.seconds for p in shrunk.probes), 3),
        "command": command,
    }


def minimal_args(shrunk: Shrunk) -> list[str]:
    """The arguments of the last probe that killed at the minimal input."""
    kills = [p for p in shrunk.probes if p.killed and p.values == shrunk.minimal]
    return kills[-1].args if kills else []


def markdown(doc: dict) -> str:
    if not doc["finished"]:
        state = "still running (or stopped): the smallest input that killed so far"
    elif not doc["start_killed"]:
        state = "the start input did not kill: nothing shrunk"
    elif doc["budget_spent"]:
        state = "the budget was spent before every dimension's next rung was tried"
    else:
        state = "minimal: no dimension's next rung down kills"
    rows = [
        f"| {p['index']} | `{shlex.join(p['args'])}` | {' '.join(p['verdicts'])} | "
        f"{'kept' if p['killed'] else ''} | {p['seconds']:.1f} |"
        for p in doc["probes"]
    ]
    changed = [
        f"{name} {doc['start'][name]} -> {value}"
        for name, value in doc["minimal"].items()
        if value != doc["start"][name]
    ]
    return "\n".join(
        [
            f"# Shrink of {doc['fault']} under {doc['config']} ({doc['machine']}, "
            f"{doc['rank_mode']} ranks)",
            "",
            f"{state}; {len(doc['probes'])} probes in {doc['seconds']:.1f} s "
            f"(budget {doc['budget_s']:g} s, {doc['repeat']} run(s) a probe).",
            "",
            f"Smaller than the start: {', '.join(changed) or 'nothing'}.",
            "",
            "Rerun by hand:",
            "",
            "```sh",
            doc["command"],
            "```",
            "",
            "| probe | args | verdicts | | s |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    )


def slug(fault: str) -> str:
    """A fault id as a Python name and a file name: `gen.skip.a_b` -> `gen_skip_a_b`."""
    return re.sub(r"[^A-Za-z0-9]+", "_", fault).strip("_")


def regression_case(context: ShrinkContext, args: list[str]) -> dict:
    """The regression case of a shrunk fault: one run of it at `args`, which
    tests/regress/test_shrunk.py asserts KILLED (marked `gpu(n)`, and skipped
    where there are fewer, when the target needs GPUs)."""
    return {
        "fault": context.fault,
        "config": context.config,
        "rank_mode": context.rank_mode,
        "machine": context.machine,
        "catalog": context.catalog,
        "gpus": context.gpus,
        "args": args,
    }


def regression_case_path(root: Path, fault: str) -> Path:
    return root / "tests" / "regress" / "shrunk" / f"{slug(fault)}.json"


def write_regression_case(root: Path, context: ShrinkContext, shrunk: Shrunk) -> Path:
    """The regression case of `shrunk`'s minimal input, written under `root`; its path."""
    path = regression_case_path(root, context.fault)
    write_json(path, regression_case(context, minimal_args(shrunk)))
    return path
