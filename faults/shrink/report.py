"""What a shrink hands back (docs/operators.md, "Shrinking"): the JSON
and Markdown report of every probe, the command that reruns the minimal
input by hand, and the regression case (tests/regress/shrunk/<fault>.json)
that tests/regress/test_shrunk.py holds KILLED there."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.pipeline.run import substitute
from faults.shrink.loop import Shrunk
from hostio import results_stem


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
