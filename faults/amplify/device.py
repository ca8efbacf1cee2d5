"""Launching the litmus on the GPU (docs/operators.md, "Amplification").

One run is one shape under one stress: launches of `pairs` producer CTAs and
`pairs` consumer CTAs (consumer slot j runs instance perm[j], a permutation
drawn per launch from the run's seed so a pair lands on different SMs), plus,
under stress, extra CTAs of the same launch that hammer a scratch buffer: in
this GPU's memory (memory) or in the second GPU's, through NVLink (nvlink).
Every CTA must be resident at once, since a consumer spins on its producer:
the geometry is checked against the kernel's occupancy before any launch."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from faults.amplify.compile import load_litmus
from faults.amplify.shapes import Shape
from faults.catalog.errors import FaultsError

LINE_WORDS = 16  # litmus::kLineWords
SCRATCH_LINES = 1 << 16  # 8 MiB of scratch lines: more than L1, in L2


class AmplifyError(FaultsError):
    """A stress or a geometry this machine cannot run: one line naming the option."""


class Stress(str, Enum):
    NONE = "none"
    MEMORY = "memory"
    NVLINK = "nvlink"


@dataclass(frozen=True)
class Geometry:
    sms: int
    per_sm: int  # resident CTAs per SM (the kernel's occupancy)
    pairs: int
    stress_ctas: int

    def ctas(self, stress: Stress) -> int:
        return 2 * self.pairs + (0 if stress is Stress.NONE else self.stress_ctas)

    def to_dict(self) -> dict:
        return {
            "sms": self.sms,
            "resident_per_sm": self.per_sm,
            "pairs": self.pairs,
            "stress_ctas": self.stress_ctas,
        }


@dataclass(frozen=True)
class Budget:
    launches: int  # at most this many launches per run
    iterations: int  # message-passing steps per instance per launch
    spin_limit: int  # flag loads before a consumer gives a step up
    seconds: float  # no launch starts after this many seconds of the run


@dataclass
class LitmusRun:
    shape: Shape
    stress: Stress
    launches: int = 0
    observed: int = 0  # steps whose flag the consumer saw
    weak: int = 0  # of those, steps that read a stale payload word
    missed: int = 0  # steps whose spin ran out (no observation)
    seconds: float = 0.0


def plan_geometry(sms: int, per_sm: int, pairs: int | None, stress: tuple[Stress, ...]) -> Geometry:
    """Pairs (default: 3/8 of the SMs) and the stress CTAs that fill the rest
    of the SMs; a geometry that cannot be resident at once is refused."""
    pairs = pairs if pairs is not None else max(1, sms * 3 // 8)
    stress_ctas = max(sms - 2 * pairs, 1) if any(s is not Stress.NONE for s in stress) else 0
    geometry = Geometry(sms, per_sm, pairs, stress_ctas)
    total = max(geometry.ctas(s) for s in stress)
    if total > sms * per_sm:
        raise AmplifyError(
            f"amplify: --pairs {pairs}: {total} CTAs ({2 * pairs} litmus + {stress_ctas} stress) "
            f"cannot all be resident: the GPU holds {per_sm} per SM x {sms} SMs = {sms * per_sm}"
        )
    return geometry


def device_geometry(shape: Shape, sources: Path, pairs: int | None, stress) -> Geometry:
    """The geometry for GPU 0 from its SM count and the shape's occupancy."""
    import torch

    kernel = load_litmus(shape, 0, sources)
    per_sm = kernel.occupancy.max_active_blocks_per_multiprocessor(shape.threads, 0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return plan_geometry(sms, per_sm, pairs, tuple(stress))


def check_stress(stress: tuple[Stress, ...], gpus: int) -> None:
    if Stress.NVLINK in stress and gpus < 2:
        raise AmplifyError(f"amplify: --stress nvlink needs 2 GPUs, this machine has {gpus}")


def enable_peer_access() -> None:
    """GPU 0 may load and store GPU 1's memory (an NVLink peer)."""
    import torch
    from cuda.bindings import runtime

    torch.cuda.set_device(0)
    (error,) = runtime.cudaDeviceEnablePeerAccess(1, 0)
    enabled = runtime.cudaError_t.cudaErrorPeerAccessAlreadyEnabled
    if error not in (runtime.cudaError_t.cudaSuccess, enabled):
        raise RuntimeError(f"peer access from GPU 0 to GPU 1: {error}")


@dataclass(frozen=True)
class Part:
    """One launch of a step: its GPU, its CTAs, and the role index of its first CTA
    (litmus roles: [0, pairs) producers, [pairs, 2 pairs) consumers, then stress)."""

    device: int
    ctas: int
    first_cta: int


def launch_parts(shape: Shape, stress: Stress, geometry: Geometry) -> list[Part]:
    """On one GPU, one launch holds every role (so all are co-resident). Across
    GPUs, producers on GPU 0 and consumers on GPU 1, and the stress CTAs beside
    the consumers (memory) or beside the producers, across NVLink (nvlink)."""
    pairs = geometry.pairs
    if not shape.across_gpus:
        return [Part(0, geometry.ctas(stress), 0)]
    parts = [Part(0, pairs, 0), Part(1, pairs, pairs)]
    if stress is not Stress.NONE:
        parts.append(Part(0 if stress is Stress.NVLINK else 1, geometry.stress_ctas, 2 * pairs))
    return parts


def run_shape(
    shape: Shape, stress: Stress, geometry: Geometry, budget: Budget, sources: Path, seed: int
) -> LitmusRun:
    """Launches of one shape under one stress until the budget's launches or seconds run out."""
    import torch

    home = 1 if shape.across_gpus else 0  # where the litmus's locations live
    if shape.across_gpus or stress is Stress.NVLINK:
        enable_peer_access()
    zeros = lambda n, d=home: torch.zeros(n, dtype=torch.int64, device=f"cuda:{d}")  # noqa: E731
    pairs = geometry.pairs
    locations = [zeros(pairs * shape.words * LINE_WORDS), zeros(pairs * LINE_WORDS)]
    locations += [zeros(pairs * LINE_WORDS)]  # the acks
    counts, done = zeros(pairs * 3), zeros(1)
    scratch = zeros(SCRATCH_LINES * LINE_WORDS, 1 if stress is Stress.NVLINK else home)
    draw = random.Random(seed)
    perms = [draw.sample(range(pairs), pairs) for _ in range(budget.launches)]
    perms = torch.tensor(perms, dtype=torch.int64, device=f"cuda:{home}")
    parts = [
        (part, _launcher(shape, part, sources)) for part in launch_parts(shape, stress, geometry)
    ]
    for device in {home, 0, scratch.device.index}:  # the buffers' fills land before any launch
        torch.cuda.synchronize(device)
    result, started = LitmusRun(shape, stress), time.perf_counter()
    while result.launches < budget.launches and time.perf_counter() - started < budget.seconds:
        step = result.launches
        for part, launcher in parts:
            launcher(
                *(t.data_ptr() for t in locations), perms[step].data_ptr(), counts.data_ptr(),
                scratch.data_ptr(), SCRATCH_LINES, done.data_ptr(), (step + 1) * 2 * pairs,
                step * budget.iterations, pairs, budget.iterations, budget.spin_limit,
                part.first_cta,
            )  # fmt: skip
        for device in {part.device for part, _ in parts}:
            torch.cuda.synchronize(device)
        result.launches += 1
    result.seconds = time.perf_counter() - started
    result.observed, result.weak, result.missed = (int(v) for v in counts.view(pairs, 3).sum(0))
    return result


def _launcher(shape: Shape, part: Part, sources: Path):
    """A function launching `part` on a stream of its own GPU, every argument 64 bits."""
    import numpy as np
    import torch
    from cuda.core import Device, LaunchConfig, Stream, launch

    kernel = load_litmus(shape, part.device, sources)
    config = LaunchConfig(grid=part.ctas, block=shape.threads)
    torch_stream = torch.cuda.Stream(device=part.device)
    stream = Stream.from_handle(torch_stream.cuda_stream)

    def start(*args: int) -> None:
        Device(part.device).set_current()
        launch(stream, config, kernel, *(np.uint64(a) for a in args))

    start.stream = torch_stream  # kept alive as long as the launcher
    return start
