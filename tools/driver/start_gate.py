"""A common start for the logical ranks of one step (docs/synchronization.md,
"Launch skew"): each rank's stream waits, after its input copies and before
its launch skew, for a word in pinned host memory that the host sets only
once every rank's launches of the step are issued. One host thread issues the
ranks one after another, so without it the rank issued first starts first by
the time the host takes to issue the others (40-153 µs for the FFN after the
attention's dispatch, measured), and a sleep shorter than that lets no rank
lead. The word is set whatever happens while the step is issued, so no
stream is left waiting for it."""

from __future__ import annotations

import contextlib


class StartGateError(RuntimeError):
    """The driver refused a stream wait on the gate's word; one line."""


class StartGate:
    """`with gate.step(): ... gate.hold() ...`: each hold (on the current
    stream) waits for this step's token; leaving the block sets it."""

    def __init__(self) -> None:
        import torch
        from cuda.bindings import driver

        self._driver = driver
        self._word = torch.zeros(1, dtype=torch.int32, pin_memory=True)
        error, self._address = driver.cuMemHostGetDevicePointer(self._word.data_ptr(), 0)
        self._check(error, "cuMemHostGetDevicePointer")
        self._token = 0

    def _check(self, error, call: str) -> None:
        if error != self._driver.CUresult.CUDA_SUCCESS:
            raise StartGateError(f"start gate: {call} failed: {error.name}")

    @contextlib.contextmanager
    def step(self):
        """One step's gate: held streams start when the block is left."""
        self._token = (self._token + 1) & 0xFFFF_FFFF  # compared cyclically: wraps safely
        try:
            yield self
        finally:  # a host write: no GPU queue stands before it
            self._word.fill_(self._token - (1 << 32) if self._token >= 1 << 31 else self._token)

    def hold(self) -> None:
        """The current stream waits here until this step's gate opens."""
        import torch

        stream = torch.cuda.current_stream().cuda_stream
        flags = self._driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        (error,) = self._driver.cuStreamWaitValue32(stream, self._address, self._token, flags)
        self._check(error, "cuStreamWaitValue32")
