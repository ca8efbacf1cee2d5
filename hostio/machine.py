"""The machine's GPUs: how many, which a worker's group gets, and the name
results are filed under. torch is imported where it is asked, and its
absence means a CPU machine."""

from __future__ import annotations


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
