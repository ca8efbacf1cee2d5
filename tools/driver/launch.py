"""Launching ranks under torchrun and the record of one driver run: what
validate, bench and the GPU tests share (the words they read are
afdep.vocab's; the folder their logs go to is hostio.KeptFolder)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from afdep.jit import CSRC
from afdep.vocab import LogFacts
from hostio import ProcessOutcome, RankMode, folder_problem, output_problem

DRIVER = "tools.driver"


def torchrun_command(nproc: int, module: str, args: list[str], *, tee: bool = True) -> list[str]:
    """`module` on `nproc` ranks of this machine. With `tee`, every rank's output
    is teed line by line (prefixed `[defaultN]:`): ranks writing one file directly
    would interleave device printf mid-line."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *(["--tee", "3"] if tee else []),
        "-m",
        module,
        *args,
    ]


def outcome_record(outcome: ProcessOutcome, facts: LogFacts) -> dict:
    """A driver run as the validate document records it: the process outcome
    and what its log said."""
    record = asdict(outcome)
    record.update(
        mismatches=facts.mismatches,
        timeouts=facts.timeouts,
        assertions=len(facts.assertions),
        route_asserts=facts.route_asserts,
        agreement_ranks=facts.agreement_ranks,
        failed_ranks=facts.failed_ranks,
        digests=facts.digests,
        result=facts.final_result,
    )
    return record


def folder(text: str) -> Path:
    """argparse type for a folder a command writes into (--logs-dir,
    --results-dir): refused before any run when a file is in the way, it
    lies in the kernel sources (hostio.output_problem), or it cannot be made
    or written (hostio.folder_problem; nothing is made here)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a folder")
    problem = output_problem(path, [CSRC]) or folder_problem(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return path


def driver_command(mode: RankMode, ranks: int | None, args: list[str]) -> list[str]:
    """The driver on `ranks` ranks (None: its default): under torchrun, a rank
    per GPU (per-gpu), or one plain process holding every rank on one GPU
    (logical, docs/synchronization.md "One GPU, logical ranks")."""
    if mode == RankMode.LOGICAL:
        count = [] if ranks is None else ["--ranks", str(ranks)]
        return [sys.executable, "-m", DRIVER, "--mode", str(mode), *count, *args]
    return torchrun_command(2 if ranks is None else ranks, DRIVER, args)
