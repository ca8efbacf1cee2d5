"""The GPU side the one-GPU micro-benches share: the checked step each
measurement starts from, and the row it ends in. Kept out of micro.py, which
the bench package imports, since it imports the bench worker."""

from __future__ import annotations

import gc
from pathlib import Path

from afdep.workspace import Geometry
from tools.bench.micro import BUFFER_FIELDS


def stepped(tree: Path, tokens: int, g: Geometry, environ: dict[str, str]):
    """Two logical ranks (1A:1F) of `tree`'s kernels at `g`, each reading
    `environ`, after one eager step of `tokens` tokens: (ranks, attention,
    ffn, sources), the two StepRunners to time and check with and the step's
    inputs."""
    import torch

    from afdep.logical import logical_ranks
    from tools.bench.worker import bucket_inputs
    from tools.driver.logical_steps import LogicalStepper
    from tools.driver.steps import StepRunner

    ranks = logical_ranks(
        2, environs=[environ] * 2, sources=tree, **{k: getattr(g, k) for k in BUFFER_FIELDS}
    )
    attention, ffn = (StepRunner(buffer, graph=False) for buffer in ranks.buffers)
    sources = [bucket_inputs(0, tokens, g, ranks.buffers[0].device)]
    LogicalStepper([attention, ffn], ranks.streams, graph=False).step(sources, bucket=tokens)
    torch.cuda.synchronize()
    return ranks, attention, ffn, sources


def finished_row(tree: Path, tokens: int, mismatches: list, **figures) -> dict:
    """A measurement's row, once the caller has dropped its ranks: their
    memory is freed first (the next build's workspace takes it)."""
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    return {
        "tree": str(tree),
        "tokens": tokens,
        **figures,
        "bitwise": not mismatches,
        "mismatch": mismatches[0] if mismatches else None,
    }
