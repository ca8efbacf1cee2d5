"""The machine's GPUs: how many, which a worker's group gets, where a run's
ranks go on them (RankMode), each run's share of the CPU's threads, the name
results are filed under, and where its NVIDIA tools are. torch is imported
where it is asked, and its absence means a CPU machine."""

from __future__ import annotations

import os
import re
import shutil
import sys
from enum import Enum
from pathlib import Path


class RankMode(str, Enum):
    """Where a run's ranks go (docs/synchronization.md, "One GPU, logical ranks"):
    a GPU per rank (over NVLink), or every rank as a logical rank on one GPU.
    Every tool, document and command line spells it so."""

    PER_GPU = "per-gpu"
    LOGICAL = "logical"

    def __str__(self) -> str:
        return self.value


def gpu_count() -> int:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES honoured), asked of
    the driver itself: importing torch for it cost a static review 1.6 s of
    its 7 s. No driver, or none that answers: a CPU machine."""
    try:
        from cuda.bindings import driver

        (error,) = driver.cuInit(0)
        if error != driver.CUresult.CUDA_SUCCESS:
            return 0
        error, count = driver.cuDeviceGetCount()
        return count if error == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no CUDA bindings or no driver library
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


# The thread pools a run's libraries size by the machine's cores (torch's
# intra-op pool is OpenMP's): with N runs at once, each gets its share.
THREAD_KNOBS = ("OMP_NUM_THREADS",)


def cpu_share(runs_at_once: int, *set_by: dict[str, str]) -> dict[str, str]:
    """Each thread knob at this machine's cores over `runs_at_once` (one at
    least), for runs started that many at a time: N runs each sizing its pool
    to every core oversubscribe the CPU N times. A knob any of `set_by` (the
    caller's environment, a catalog's) sets is left as set."""
    share = str(max(1, (os.cpu_count() or 1) // max(runs_at_once, 1)))
    return {knob: share for knob in THREAD_KNOBS if not any(knob in env for env in set_by)}


CPU_MACHINE = "cpu"  # the machine name of one without a GPU

# Where the tools file what they measured, from the checkout's top, each file
# named by results_stem: a record a command writes over when it measures again.
RESULTS_DIR = Path("docs/results")


def machine_name() -> str:
    """`2xH200`, or `cpu`: the name results are filed under."""
    count = gpu_count()
    if not count:
        return CPU_MACHINE
    import torch

    return f"{count}x{torch.cuda.get_device_name(0).replace('NVIDIA ', '').split()[0]}"


def results_stem(
    kind: str,
    machine: str,
    rank_mode: RankMode | str | None = None,
    qualifiers: tuple[str, ...] = (),
) -> str:
    """`<kind>-<machine>`, `-logical` after it for logical ranks, then `-<q>`
    for each of `qualifiers` (what else tells two results of one machine
    apart, `sweep-cpu-flag_payload-partial`; any run of characters but
    letters, digits, '.' and '_' becomes '-'): the one name rule of every
    results file, so one GPU's results never take the name of a run with a
    GPU per rank (`sweep-1xH200-logical`, `validate-2xH200`)."""
    logical = rank_mode is not None and RankMode(rank_mode) is RankMode.LOGICAL
    said = [re.sub(r"[^A-Za-z0-9._]+", "-", q).strip("-") for q in qualifiers]
    return (
        f"{kind}-{machine}" + ("-logical" if logical else "") + "".join(f"-{q}" for q in said if q)
    )


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
