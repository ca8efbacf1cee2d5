"""A trap on the device reaches the log as a line the afdep catalog's
`device_error` pattern reads (docs/log-lines.md, "The log-line contract"):
a fault that makes a kernel trap is KILLED for it, not judged BROKE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from afdep import vocab
from faults.catalog import load_catalog

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
PYTHONPATH = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this tree first

# A kernel that traps, launched through cuda.core as afdep's kernels are; the
# host then meets the error where the driver does, at torch.cuda.synchronize.
TRAP = r"""
import torch
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

torch.cuda.init()
device = Device(0)
device.set_current()
arch = "sm_" + "".join(map(str, device.compute_capability))
program = Program('extern "C" __global__ void trap_now() { asm volatile("trap;"); }', "c++",
                  ProgramOptions(arch=arch))
kernel = program.compile("cubin").get_kernel("trap_now")
stream = device.create_stream()
launch(stream, LaunchConfig(grid=1, block=1), kernel)
try:
    stream.sync()
except Exception as error:
    print(f"stream: {type(error).__name__}: {error}", flush=True)
torch.cuda.synchronize()
"""


def test_a_trapped_kernel_leaves_a_device_error_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", TRAP],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    lines = (done.stdout + done.stderr).splitlines()
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    found = [line for line in lines if catalog.target.log.device_error.search(line)]
    assert done.returncode != 0
    assert found, "\n".join(lines[-20:])
    assert all(vocab.DEVICE_ERROR.search(line) for line in found)
