"""The build and run stages: a command in a scratch tree, through
hostio.run_logged's guard, with an outer timeout that kills its whole tree
(no orphan process holding a GPU, docs/catalog.md, "Pipeline of the
fault engine", item 5), its output kept in a log; and a tree's runs, each
parsed and judged into its RunResult."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from faults.catalog import Catalog, Config, Fault, Target
from faults.judge.run_result import RunResult
from faults.judge.verdict import Judgement, Verdict, judge, judge_control
from faults.pipeline.parse import parse_outcome
from faults.pipeline.scratch import Prepared
from faults.pipeline.serve import WorkerError, WorkerPool
from hostio import ProcessOutcome, cache_home, run_logged


def substitute(words: tuple[str, ...], **values: str) -> list[str]:
    """`{tree}`, `{out}`, `{python}`, `{digest}`, `{gpus}`, `{ranks}` in a command's words
    (faults.catalog.model.PLACEHOLDERS: the load refuses any other)."""
    return [word.format(**values) for word in words]


def worker_pool(target: Target, env: dict[str, str], logs: Path) -> WorkerPool | None:
    """The warm workers of `target`'s runs ([target.serve]), each started
    with the stage environment of its tree and `env` (the GPU group's); None:
    a process per run."""
    if not target.serve:
        return None

    def command(tree: Path, out: Path) -> list[str]:
        return substitute(target.serve, tree=str(tree), out=str(out), python=sys.executable)

    return WorkerPool(
        command, lambda tree: stage_env(target, tree, env), logs, start_timeout_s=target.timeout_s
    )


def stage_env(target: Target, tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage: the scratch tree first on PYTHONPATH, and
    PYTHONSAFEPATH so the current directory can never shadow it. Its Python
    keeps bytecode in one writable cache (unless the caller says where): a
    library installed read-only is compiled once, not by every run (torch on
    the lent H100: 946 modules, 1.8 s of a run's start)."""
    env = {**os.environ, **target.env, **(extra or {})}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONSAFEPATH"] = "1"
    env.setdefault("PYTHONPYCACHEPREFIX", str(bytecode_cache()))
    return env


def bytecode_cache() -> Path:
    """Where the stages' Python bytecode is kept (`<cache>/faults/pycache`)."""
    return cache_home() / "faults" / "pycache"


def overridden_env(target: Target, environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming each variable the target's env (the catalog's
    [target.env]) sets that `environ` (default: this process's) sets to
    another value: every stage runs with the catalog's. None when there is none."""
    environ = os.environ if environ is None else environ
    clashes = [
        f"{name}={value} (yours: {environ[name]})"
        for name, value in target.env.items()
        if name in environ and environ[name] != value
    ]
    if not clashes:
        return None
    return f"the catalog's [target.env] wins over your environment: {', '.join(clashes)}"


class BuildError(RuntimeError):
    """The scratch tree did not build; the message's first line carries the
    build log's last error lines (log_said), the lines after it the log's tail."""


# A log line that says what went wrong: a compiler's `error:`, an exception's name.
ERROR_LINE = re.compile(r"error", re.IGNORECASE)
SAID_LINES = 3  # the most lines of a failed build's log its reason's first line holds


def log_said(log: str, tree: Path) -> str:
    """What a failed stage's log says, in one line: its last lines that say
    "error" (else its last lines), at most SAID_LINES, joined by " | ", with
    the scratch tree's path taken out of them ("" for an empty log)."""
    lines = [line.strip().replace(f"{tree}/", "") for line in log.splitlines() if line.strip()]
    said = [line for line in lines if ERROR_LINE.search(line)] or lines
    return " | ".join(said[-SAID_LINES:])


class RunError(RuntimeError):
    """The run command could not start (no such program, say): nothing ran."""


def build_tree(
    target: Target, tree: Path, out: Path, digest: str, *, gpus: int
) -> ProcessOutcome | None:
    """`gpus`: what `{gpus}` in a build word stands for."""
    if not target.build:
        return None
    out.mkdir(parents=True, exist_ok=True)
    command = substitute(
        target.build,
        tree=str(tree),
        out=str(out),
        python=sys.executable,
        digest=digest,
        gpus=str(gpus),
        ranks=str(gpus),
    )
    try:
        outcome = run_logged(
            command,
            out / "build.log",
            timeout_s=target.timeout_s,
            env=stage_env(target, tree),
            cwd=tree,
        )
    except OSError as error:
        raise BuildError(f"build of {tree} could not start {command[0]!r}: {error}") from None
    if outcome.exit_code != 0:
        log = Path(outcome.log_path).read_text(errors="replace")
        said, tail = log_said(log, tree), log[-4000:]
        if outcome.outer_timeout:  # the timeout is the reason; what the log said, if anything
            said = f" {said}" if said else ""
            raise BuildError(
                f"build of {tree} timed out after {target.timeout_s:g} s:{said}\n{tail}"
            )
        said = said or "its log is empty"
        raise BuildError(f"build of {tree} failed (exit {outcome.exit_code}): {said}\n{tail}")
    return outcome


def run_config(
    target: Target,
    config: Config,
    tree: Path,
    out: Path,
    digest: str,
    log_name: str,
    *,
    gpus: int,
    ranks: int | None = None,
    env: dict[str, str] | None = None,
    workers: WorkerPool | None = None,
) -> ProcessOutcome:
    """One run of `config` in `tree`; `env` (the GPU group) goes over the config's.
    With `workers`, a warm worker of the target's makes it (faults/pipeline/serve.py)."""
    command = substitute(
        target.run + config.args,
        tree=str(tree),
        out=str(out),
        python=sys.executable,
        digest=digest,
        gpus=str(gpus),
        ranks=str(gpus if ranks is None else ranks),
    )
    run_env = stage_env(target, tree, {**config.env, **(env or {})})
    log = out / f"{log_name}.log"
    try:
        if workers is not None:
            timeout_s = target.timeout_s
            return workers.run(command, log, timeout_s=timeout_s, env=run_env, tree=tree, out=out)
        return run_logged(command, log, timeout_s=target.timeout_s, env=run_env, cwd=tree)
    except WorkerError as error:
        raise RunError(f"run of {tree}: {error}") from None
    except OSError as error:
        raise RunError(f"run of {tree} could not start {command[0]!r}: {error}") from None


def judged_runs(
    catalog: Catalog,
    tree: Prepared,
    runs: list[tuple[Config, int]],
    *,
    out: Path,
    env: dict[str, str],
    fault: Fault | None = None,
    must_fail: bool = False,
    workers: WorkerPool | None = None,
) -> list[RunResult]:
    """Each (config, repeat) of `runs` run in `tree`, parsed and judged: as
    `fault`'s, else as a control's that must fail or pass. A tree decided
    already (not applied, not built, erased) is not run: one result a config.
    A run command that cannot start is BROKE, and says why (nothing ran)."""
    if tree.decided:
        return [RunResult.of(catalog, tree, c.name, 0, tree.decided) for c, r in runs if r == 0]
    patches = catalog.all_patches(fault.id) if fault else []
    results = []
    for config, repeat in runs:
        started = time.perf_counter()
        try:
            process = run_config(
                catalog.target,
                config,
                tree.tree,
                out,
                tree.digest,
                f"{tree.label}-{config.name}{f'-r{repeat}' if repeat else ''}",
                gpus=catalog.gpus_for(config),
                ranks=catalog.ranks_for(config),
                env=env,
                workers=workers,
            )
        except RunError as error:
            broke = Judgement(Verdict.BROKE, False, str(error))
            results.append(RunResult.of(catalog, tree, config.name, repeat, broke))
            continue
        outcome = parse_outcome(process, catalog.target.log, timeout_s=catalog.target.timeout_s)
        judgement = (
            judge(
                fault,
                outcome,
                tree.digest,
                patches=patches,
                guards=tree.guards,
                contract=tree.contract,
            )
            if fault
            else judge_control(outcome, tree.digest, must_fail)
        )
        judge_s = time.perf_counter() - started - outcome.wall_s
        results.append(
            RunResult.of(catalog, tree, config.name, repeat, judgement, outcome, judge_s)
        )
    return results
