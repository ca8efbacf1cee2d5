"""The host's deadline on one driver step (docs/synchronization.md, "The host's
step deadline").

Every device wait times out by itself (AFDEP_TIMEOUT_MS), prints its site and
traps, and the step's synchronize reports the trap. A step that outlives
that by far holds a kernel no device timeout can end (one that never
started, one that runs away on garbage), and the host would wait on it
forever, saying nothing. So the step runs under a timer: past the deadline
the host prints a timeout line per rank in the device's own format, naming
the step, and ends the process."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from afdep.vocab import TIMEOUT

SITE = "host.step"
EXIT_CODE = 3
# The device's timeouts come first: a wait times out after timeout_ms, and its
# trap surfaces at the next synchronize; three of them and half a minute more
# is far past any step that can still end.
SLACK_S = 30.0


def step_deadline_s(timeout_ms: int) -> float:
    return 3 * timeout_ms / 1000 + SLACK_S


def deadline_lines(step: int, ranks: list[int], seconds: float) -> list[str]:
    return [
        f"{TIMEOUT} site={SITE} rank={rank} step={step}: the step's kernels neither finished "
        f"nor timed out on the device in {seconds:g} s (a kernel that never started, or one "
        "that runs away)"
        for rank in ranks
    ]


@contextmanager
def step_deadline(
    seconds: float,
    step: int,
    ranks: list[int],
    *,
    end: Callable[[int], None] = os._exit,
) -> Iterator[None]:
    """Run the block (issue a step, synchronize) under `seconds`; past them,
    print the timeout lines and `end(EXIT_CODE)` the process (os._exit: the
    main thread is blocked in CUDA and no handler would run)."""

    def expire() -> None:
        for line in deadline_lines(step, ranks, seconds):
            print(line, file=sys.__stdout__, flush=True)
        end(EXIT_CODE)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
