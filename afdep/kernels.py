"""Each kernel's spec and launcher, named as its header: impls/<name>.cuh."""

from __future__ import annotations

from afdep._build import KernelSpec, load_kernel
from afdep.workspace import NUM_THREADS, Geometry

ROLE_KERNELS: dict[str, tuple[str, ...]] = {
    "attention": ("source_dispatch", "source_combine"),
    "ffn": ("copy_epilogue", "ffn_combine"),
}


def kernel_specs(g: Geometry) -> dict[str, KernelSpec]:
    """The instantiation of every kernel a buffer of geometry `g` launches."""
    fp8 = g.payload == "fp8"
    return {
        "source_dispatch": KernelSpec.make(
            "source_dispatch", kHidden=g.hidden, kTopK=g.top_k, kFp8=fp8, kNumThreads=NUM_THREADS
        ),
        "copy_epilogue": KernelSpec.make(
            "copy_epilogue",
            kHidden=g.hidden,
            kTopK=g.top_k,
            kFp8=fp8,
            kCollectView=g.collect_view,
            kNumThreads=NUM_THREADS,
        ),
        "ffn_combine": KernelSpec.make(
            "ffn_combine", kHidden=g.hidden, kTopK=g.top_k, kNumThreads=NUM_THREADS
        ),
        "source_combine": KernelSpec.make(
            "source_combine", kHidden=g.hidden, kNumThreads=NUM_THREADS
        ),
    }


def shared_bytes(name: str, g: Geometry) -> int:
    return {
        "source_dispatch": g.dispatch_smem_bytes,
        "copy_epilogue": g.epilogue_smem_bytes,
    }.get(name, 0)


class Launcher:
    """Launches one kernel on the current torch stream (graph capture included)."""

    def __init__(self, spec: KernelSpec, device_index: int, grid: int, smem_bytes: int) -> None:
        from cuda.core import LaunchConfig

        self.spec = spec
        self.kernel = load_kernel(spec, device_index)
        if smem_bytes > 48 * 1024:
            _allow_shared_bytes(self.kernel, device_index, smem_bytes)
        self.config = LaunchConfig(grid=grid, block=NUM_THREADS, shmem_size=smem_bytes)

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
