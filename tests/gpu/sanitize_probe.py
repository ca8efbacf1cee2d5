"""Two kernels with a bug each, for compute-sanitizer's real reports
(tests/gpu/test_sanitize.py): `python sanitize_probe.py out-of-bounds` writes
far past any allocation (memcheck), `uninitialized` reads memory nothing
wrote (initcheck). Built by NVRTC with line info, as afdep's kernels are."""

import sys

import numpy as np
import torch
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, Stream, launch

SOURCE = r"""
extern "C" __global__ void probe_out_of_bounds(int* p) {
    p[(1ll << 34) + threadIdx.x] = 1;
}
extern "C" __global__ void probe_uninitialized(const int* p, int* out) {
    out[threadIdx.x] = p[threadIdx.x] + 1;
}
"""
LINES = {"out-of-bounds": 3, "uninitialized": 6}  # the faulty line of each, in probe.cu


def main(which: str) -> None:
    device = Device(0)
    device.set_current()
    major, minor = device.compute_capability
    options = ProgramOptions(arch=f"sm_{major}{minor}", lineinfo=True, name="probe.cu")
    code = Program(SOURCE, "c++", options).compile("cubin")
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    config = LaunchConfig(grid=1, block=32)
    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    if which == "out-of-bounds":
        launch(stream, config, code.get_kernel("probe_out_of_bounds"), np.uint64(out.data_ptr()))
    else:
        never_written = torch.empty(1 << 20, dtype=torch.int32, device="cuda")
        kernel = code.get_kernel("probe_uninitialized")
        launch(
            stream, config, kernel, np.uint64(never_written.data_ptr()), np.uint64(out.data_ptr())
        )
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
