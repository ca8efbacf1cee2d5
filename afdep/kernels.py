"""Each kernel's spec and launcher, named as its header: impls/<name>.cuh."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from afdep.jit import KernelSpec, load_kernel
from afdep.vocab import Protocol, Role
from afdep.workspace import NUM_THREADS, Geometry


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a protocol step: its spec, grid, shared bytes,
    whether it may start before the previous kernel ends (programmatic launch),
    and whether its CTAs may wait on another kernel (a wait spins, so the
    one-GPU mode must hold every such CTA resident at once: afdep/residency.py)."""

    spec: KernelSpec
    grid: int
    smem_bytes: int
    programmatic: bool = False
    waits: bool = True


def dispatch_launches(
    g: Geometry, role: Role, protocol: Protocol, expand_ctas: int | None = None
) -> list[Launch]:
    """The kernels of one dispatch, in launch order, for `role` and `protocol`
    (the attention side: attention_route, then attention_dispatch); the FFN's
    expansion kernel (ffn_expand, ffn_stream_expand) on `expand_ctas` CTAs
    (afdep/residency.py expansion_ctas), else num_sms."""
    count_first = protocol == Protocol.COUNT_FIRST
    # The row shape every dispatch kernel is specialized on.
    row = {"kHidden": g.hidden, "kTopK": g.top_k, "kFp8": g.payload == "fp8"}
    if role == Role.ATTENTION:
        route = KernelSpec.make("attention_route", kTopK=g.top_k, kNumThreads=NUM_THREADS)
        return [
            Launch(route, g.route_ctas, g.route_smem_bytes, waits=False),
            Launch(
                KernelSpec.make(
                    "attention_dispatch",
                    **row,
                    kCountFirst=count_first,
                    kArmAttention=count_first and g.arm_attention,
                    kNumThreads=NUM_THREADS,
                ),
                g.num_sms,
                g.dispatch_smem_bytes,
            ),
        ]
    if not count_first:
        return [
            Launch(
                KernelSpec.make(
                    "ffn_expand",
                    **row,
                    kCollectView=g.collect_view,
                    kNumThreads=NUM_THREADS,
                ),
                expand_ctas or g.num_sms,
                g.epilogue_smem_bytes,
            )
        ]
    return [
        Launch(
            KernelSpec.make("ffn_place", kNumThreads=NUM_THREADS),
            1,
            4 * g.experts_per_ffn,
        ),
        Launch(
            KernelSpec.make(
                "ffn_stream_expand",
                **row,
                kCollectView=g.collect_view,
                kArmAttention=g.arm_attention,
                kNumThreads=NUM_THREADS,
            ),
            expand_ctas or g.num_sms,
            4 * g.placement_ints,
            programmatic=True,
        ),
    ]


def combine_launch(g: Geometry, role: Role, combine_sms: int | None = None) -> Launch:
    """The combine kernel of `role`. The attention side waits for the FFN
    partials on `num_sms` CTAs; ffn_combine waits on nothing and reads every
    expert output once, so it runs on `combine_sms` CTAs (AFDEP_COMBINE_SMS;
    the Buffer's default: every SM of its device), else `num_sms`."""
    if role == Role.ATTENTION:
        spec = KernelSpec.make("attention_combine", kHidden=g.hidden, kNumThreads=NUM_THREADS)
        return Launch(spec, g.num_sms, 0)
    spec = KernelSpec.make("ffn_combine", kHidden=g.hidden, kTopK=g.top_k, kNumThreads=NUM_THREADS)
    return Launch(spec, combine_sms or g.num_sms, 0, waits=False)


def all_launches(g: Geometry, role: Role, protocols: tuple[Protocol, ...]) -> list[Launch]:
    launches = [launch for protocol in protocols for launch in dispatch_launches(g, role, protocol)]
    return [*launches, combine_launch(g, role)]


class Launcher:
    """Launches one kernel on the current torch stream (graph capture included)."""

    def __init__(self, launch: Launch, device_index: int, sources: Path | None = None) -> None:
        from cuda.core import LaunchConfig

        self.spec = launch.spec
        self.kernel = load_kernel(launch.spec, device_index, sources)
        if launch.smem_bytes > 48 * 1024:
            _allow_shared_bytes(self.kernel, device_index, launch.smem_bytes)
        options = {"programmatic_stream_serialization": True} if launch.programmatic else {}
        self.config = LaunchConfig(
            grid=launch.grid, block=NUM_THREADS, shmem_size=launch.smem_bytes, **options
        )

    def __call__(self, *args: int) -> None:
        """Every argument is a device pointer or an integer passed as 64 bits."""
        import numpy as np
        import torch
        from cuda.core import Stream, launch

        stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
        launch(stream, self.config, self.kernel, *(np.uint64(a) for a in args))


def _allow_shared_bytes(kernel, device_index: int, smem_bytes: int) -> None:
    from cuda.bindings import driver

    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if isinstance(handle, driver.CUkernel):
        _, device = driver.cuDeviceGet(device_index)
        (result,) = driver.cuKernelSetAttribute(attribute, smem_bytes, handle, device)
    else:
        (result,) = driver.cuFuncSetAttribute(handle, attribute, smem_bytes)
    if result != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot allow {smem_bytes} bytes of shared memory: {result}")
