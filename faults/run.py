"""The build and run stages: a command in a scratch tree, in its own process
group, with an outer timeout that kills the whole group (no orphan process
holding a GPU), its output kept in a log."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from faults.catalog import Config, Target


@dataclass
class ProcessOutcome:
    command: list[str]
    exit_code: int | None  # None when the outer timeout killed it
    wall_s: float
    outer_timeout: bool
    log_path: str
    log_sha256: str


def run_logged(
    command: list[str],
    log_path: Path,
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessOutcome:
    """Run `command` with stdout and stderr to `log_path`; past `timeout_s` the
    process group is killed."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        try:
            exit_code, outer_timeout = process.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            exit_code, outer_timeout = None, True
    wall = round(time.perf_counter() - started, 3)
    digest = hashlib.sha256(log_path.read_bytes()).hexdigest()
    return ProcessOutcome(command, exit_code, wall, outer_timeout, str(log_path), digest)


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # no torch with CUDA: a CPU machine
        return 0


def substitute(words: tuple[str, ...], **values: str) -> list[str]:
    """`{tree}`, `{out}`, `{python}`, `{digest}`, `{gpus}` in a command's words."""
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


def build_tree(target: Target, tree: Path, out: Path, digest: str) -> ProcessOutcome | None:
    if not target.build:
        return None
    out.mkdir(parents=True, exist_ok=True)
    command = substitute(
        target.build, tree=str(tree), out=str(out), python=sys.executable, digest=digest
    )
    outcome = run_logged(
        command,
        out / "build.log",
        timeout_s=target.timeout_s,
        env=stage_env(target, tree),
        cwd=tree,
    )
    if outcome.exit_code != 0:
        log = Path(outcome.log_path).read_text(errors="replace")
        raise BuildError(f"build of {tree} failed (exit {outcome.exit_code}):\n{log[-4000:]}")
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
    )
    return run_logged(
        command,
        out / f"{log_name}.log",
        timeout_s=target.timeout_s,
        env=stage_env(target, tree, {**config.env, **(env or {})}),
        cwd=tree,
    )
