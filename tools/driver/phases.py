"""Where a driver run's wall goes (issue 48(b)): seconds per phase, summed
over the run, as the result line's `phases_s`. The phases are the driver's
own work after the process has started: the CUDA context, the ranks'
buffers and kernels, each step's inputs, its kernels (issued and waited
for), the reference and the checks."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from enum import Enum


class Phase(Enum):
    CONTEXT = "context"  # the CUDA context and the device's name
    BUFFERS = "buffers"  # every rank's buffers allocated, its kernels loaded
    INPUTS = "inputs"  # a step's sources made on the GPU
    STEPS = "steps"  # a step's kernels issued and synchronized
    REFERENCE = "reference"  # the step's expected outputs
    CHECKS = "checks"  # every rank's outputs compared with the reference


class PhaseClock:
    """Seconds spent in each Phase, summed; `timed(phase)` around the work."""

    def __init__(self) -> None:
        self.seconds: dict[Phase, float] = defaultdict(float)

    @contextmanager
    def timed(self, phase: Phase):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - started

    def as_dict(self) -> dict[str, float]:
        return {phase.value: round(self.seconds[phase], 4) for phase in Phase if phase in self.seconds}
