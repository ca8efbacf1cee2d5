"""Host-side helpers the kernel package's tools and the fault engine share,
with no dependency on either (docs/architecture.md, "Layout"): child
processes that die with their parent, atomic writes, the machine's GPUs."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


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
    """Run `command` with stdout and stderr to `log_path`, in its own process
    group; past `timeout_s` the group is killed."""
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


def machine_name() -> str:
    """`2xH200`, or `cpu`: the name results are filed under."""
    count = gpu_count()
    if not count:
        return "cpu"
    import torch

    return f"{count}x{torch.cuda.get_device_name(0).replace('NVIDIA ', '').split()[0]}"


def write_text(path: Path, text: str) -> None:
    """Written to a temporary file and renamed: no reader sees half a report,
    and a failed write leaves the old report and no temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:  # nothing half-written stays behind
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, document: dict) -> None:
    write_text(path, json.dumps(document, indent=1) + "\n")


def at_least_one(text: str) -> int:
    """argparse type for runs at a time (--slots, --jobs, --repeat): an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, got {value}")
    return value


class UsageError(ValueError):
    """Bad input: said in one line naming the argument, knob or file at fault
    (exit 2), before any work starts."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `prog: error: ...`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")
