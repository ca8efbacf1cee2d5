"""The build and run stages: a command in a scratch tree, through
hostio.run_logged's guard, with an outer timeout that kills its whole tree
(no orphan process holding a GPU, docs/architecture.md, "Pipeline of the
fault engine", item 5), its output kept in a log."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from faults.catalog import Config, Target
from hostio import ProcessOutcome, run_logged


def substitute(words: tuple[str, ...], **values: str) -> list[str]:
    """`{tree}`, `{out}`, `{python}`, `{digest}`, `{gpus}`, `{ranks}` in a command's words
    (faults.catalog.model.PLACEHOLDERS: the load refuses any other)."""
    return [word.format(**values) for word in words]


def stage_env(target: Target, tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage: the scratch tree first on PYTHONPATH, and
    PYTHONSAFEPATH so the current directory can never shadow it."""
    env = {**os.environ, **target.env, **(extra or {})}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONSAFEPATH"] = "1"
    return env


class BuildError(RuntimeError):
    """The scratch tree did not build; the message carries the build log's tail."""


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
        log = Path(outcome.log_path).read_text(errors="replace")[-4000:]
        if outcome.outer_timeout:
            raise BuildError(f"build of {tree} timed out after {target.timeout_s:g} s:\n{log}")
        raise BuildError(f"build of {tree} failed (exit {outcome.exit_code}):\n{log}")
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
) -> ProcessOutcome:
    """One run of `config` in `tree`; `env` (the GPU group) goes over the config's."""
    command = substitute(
        target.run + config.args,
        tree=str(tree),
        out=str(out),
        python=sys.executable,
        digest=digest,
        gpus=str(gpus),
        ranks=str(gpus if ranks is None else ranks),
    )
    try:
        return run_logged(
            command,
            out / f"{log_name}.log",
            timeout_s=target.timeout_s,
            env=stage_env(target, tree, {**config.env, **(env or {})}),
            cwd=tree,
        )
    except OSError as error:
        raise RunError(f"run of {tree} could not start {command[0]!r}: {error}") from None
