"""`pack_bf16x8` against torch's own cast on the GPU, bitwise, for every one
of the 2^32 fp32 bit patterns (NaNs, infinities, subnormals and every tie
included): the combines' outputs are compared bitwise with a reference that
torch computes on the GPU, so their rounding must be torch's there."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.bf16_probe import KERNEL, compile_probe

pytestmark = pytest.mark.gpu(1)

CHUNK = 1 << 28  # fp32 patterns per launch: 1 GiB of torch's reference input
THREADS = 256


def test_pack_bf16x8_matches_torch_for_every_fp32_pattern() -> None:
    from cuda.core import Device, LaunchConfig, Stream, launch

    device = Device(0)
    device.set_current()
    major, minor = device.compute_capability
    kernel = compile_probe(f"sm_{major}{minor}").get_kernel(KERNEL)
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    num_vecs = CHUNK // 8
    config = LaunchConfig(grid=num_vecs // THREADS, block=THREADS)
    packed = torch.empty(CHUNK, dtype=torch.int16, device="cuda")
    for base in range(0, 1 << 32, CHUNK):
        launch(
            stream,
            config,
            kernel,
            np.uint32(base),
            np.uint32(num_vecs),
            np.uint64(packed.data_ptr()),
        )
        patterns = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda")
        expected = patterns.to(torch.int32).view(torch.float32).to(torch.bfloat16)
        mismatched = (packed != expected.view(torch.int16)).nonzero()
        if mismatched.numel():
            first = int(mismatched[0, 0])
            got, want = int(packed[first]) & 0xFFFF, int(expected.view(torch.int16)[first]) & 0xFFFF
            pytest.fail(f"fp32 pattern {base + first:#010x}: packed {got:#06x}, torch {want:#06x}")
