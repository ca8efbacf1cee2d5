"""The driver as a warm worker (catalogs/afdep.toml `[target.serve]`;
`python -m hostio.serve --in-process tools.driver.warm`, docs/catalog.md,
"Warm workers"): one CUDA context, made once, serves every run the worker
makes, so a run pays its driver's work and not a context's creation with
every module torch ships loaded (1.6 s of 2 s alone on one H100, 10 s eight
at once: issue 48).

A run that leaves the context unfit never reaches the next: the driver ends
its process at any CUDA error (a trap, a timeout, a failed launch), and what
an error left behind unsaid is found here after the run, which retires the
worker."""

from __future__ import annotations

import torch

from tools.driver.logical import use_connections


def start() -> None:
    """The context, made as a run's own process makes it (CONNECTIONS set first)."""
    use_connections()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def healthy() -> bool:
    """Whether the context may serve another run: every stream's work done,
    and no error, sticky or not, left by the last one."""
    torch.cuda.synchronize()  # raises on an error the run left (a trap is sticky)
    return True
