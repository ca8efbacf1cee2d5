"""The machine's GPUs: how many, which a worker's group gets, the name
results are filed under, and where its NVIDIA tools are. torch is imported
where it is asked, and its absence means a CPU machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # no torch with CUDA: a CPU machine
        return 0


def gpu_group(index: int, size: int, visible: str | None, count: int) -> list[str]:
    """The devices of group `index`: the index-th run of `size` devices of
    those visible (an outer CUDA_VISIBLE_DEVICES, else 0..count-1)."""
    devices = [d for d in visible.split(",") if d] if visible else [str(i) for i in range(count)]
    group = devices[index * size : (index + 1) * size]
    if len(group) < size:
        raise LookupError(
            f"GPU group {index} needs devices {index * size}..{(index + 1) * size - 1} "
            f"of {devices}: run fewer workers"
        )
    return group


def machine_name() -> str:
    """`2xH200`, or `cpu`: the name results are filed under."""
    count = gpu_count()
    if not count:
        return "cpu"
    import torch

    return f"{count}x{torch.cuda.get_device_name(0).replace('NVIDIA ', '').split()[0]}"


def cuda_toolkit_bin() -> Path:
    return Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin"


def cuda_tool(name: str) -> Path | None:
    """An NVIDIA command-line tool (nvdisasm, compute-sanitizer, ...): on PATH,
    in the CUDA toolkit ($CUDA_HOME/bin, default /usr/local/cuda/bin), or in
    the bin folder of an NVIDIA wheel on sys.path (nvidia/<package>/bin);
    None where none has it."""
    found = shutil.which(name)
    if found:
        return Path(found)
    wheels = [
        c for entry in sys.path for c in sorted(Path(entry or ".", "nvidia").glob(f"*/bin/{name}"))
    ]
    for candidate in [cuda_toolkit_bin() / name, *wheels]:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None
