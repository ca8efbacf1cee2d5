"""Launching ranks under torchrun, the record of one driver run and the
folder of the runs' logs: what validate, bench and the GPU tests share (the
words they read are afdep.vocab's)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from afdep.vocab import LogFacts
from hostio import ProcessOutcome

DRIVER = "afdep.testing.driver"


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
        digests=facts.digests,
        result=facts.final_result,
    )
    return record


def folder(text: str) -> Path:
    """argparse type for a folder a command writes into (--logs-dir,
    --results-dir): refused before any run when a file is in the way."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a folder")
    return path


class LogsFolder:
    """Where a command's run logs go. An explicit folder is the user's and
    stays; a temporary one is removed once every run met its expectation and
    kept otherwise (a run missed, `keep`, Ctrl-C, an error), its path said
    in one line, `logs kept: PATH`.

        with LogsFolder(args.logs_dir, "afdep-validate-", keep=args.keep) as logs:
            ...  # runs logging under logs.path
            logs.finished(every_run_met)
    """

    def __init__(self, explicit: Path | None, prefix: str, *, keep: bool = False) -> None:
        self.explicit, self.prefix = explicit, prefix
        self.removable = explicit is None and not keep
        self.every_run_met = False

    def finished(self, every_run_met: bool) -> None:
        self.every_run_met = every_run_met

    def __enter__(self) -> LogsFolder:
        if self.explicit is None:
            self.path = Path(tempfile.mkdtemp(prefix=self.prefix))
        else:
            self.path = Path(self.explicit)
            self.path.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is None and self.every_run_met and self.removable:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            print(f"logs kept: {self.path}", flush=True)
