"""Where validate's runs put their ranks: a rank per GPU under torchrun, or
every rank of a run in one process on one GPU (docs/synchronization.md, "One
GPU, logical ranks"). The command of a run in each mode, the runs a mode
holds, and the names its results are filed under."""

from __future__ import annotations

from afdep.ranks import MAX_LOGICAL_RANKS, rank_mode_label
from hostio import RankMode, results_stem
from tools.driver.launch import driver_command
from tools.validate.matrix import Run

# The logical driver refuses --bench-iters (ranks sharing one GPU give no
# NVLink timings); the run keeps every check without the timed replays.
BENCH_ITERS = "--bench-iters"
DROPPED_BENCH = f"{BENCH_ITERS} dropped: logical ranks share one GPU, no NVLink timings"


def run_args(run: Run, mode: RankMode) -> list[str]:
    """The driver's arguments for `run` in `mode`."""
    if mode != RankMode.LOGICAL or BENCH_ITERS not in run.args:
        return list(run.args)
    at = run.args.index(BENCH_ITERS)
    return [*run.args[:at], *run.args[at + 2 :]]


def run_command(run: Run, mode: RankMode) -> list[str]:
    """torchrun on `run.nproc` GPUs, or one process of `run.nproc` logical ranks."""
    return driver_command(mode, run.nproc, run_args(run, mode))


def adaptations(runs: list[Run], mode: RankMode) -> dict[str, str]:
    """What `mode` changes of a run's arguments, by run name: said and recorded."""
    return {run.name: DROPPED_BENCH for run in runs if run_args(run, mode) != run.args}


def is_timed(run: Run, mode: RankMode) -> bool:
    return BENCH_ITERS in run_args(run, mode)


def holds(run: Run, mode: RankMode, gpus: int) -> bool:
    """Can this machine run `run` in `mode`? Logical: any run of 2..4 ranks on one GPU."""
    if mode == RankMode.LOGICAL:
        return run.nproc <= MAX_LOGICAL_RANKS
    return run.nproc <= gpus


def gpu_model(machine: str) -> str:
    """`H200` of `2xH200`."""
    return machine.partition("x")[2]


def mode_machine(mode: RankMode, machine: str) -> str:
    """The machine results are filed under: logical ranks use one of its GPUs."""
    return f"1x{gpu_model(machine)}" if mode == RankMode.LOGICAL else machine


def results_name(mode: RankMode, machine: str) -> str:
    """`validate-2xH200.json`, or `validate-1xH200-logical.json`: never mixed."""
    return (
        results_stem("validate", machine, "logical" if mode == RankMode.LOGICAL else None) + ".json"
    )


def run_label(run: Run, mode: RankMode, machine: str) -> str:
    """As the driver's result says it: `1xH200, 4 logical ranks`, `2xH200, 2 NVLink ranks`."""
    return rank_mode_label(mode, run.nproc, gpu_model(machine))


# `--rank-mode`: a RankMode, or `auto` from the GPUs here.
RANK_MODE_CHOICES = ("auto", *(str(mode) for mode in RankMode))


def mode_for_choice(choice: str, gpus: int) -> RankMode | None:
    """The mode `--rank-mode` gives on a machine of `gpus` GPUs; None where
    it cannot run (no GPU, or one GPU for a rank per GPU): the tool's CPU
    path. auto: logical on exactly one GPU, a rank per GPU on two or more."""
    if gpus < 1:
        return None
    if choice == str(RankMode.LOGICAL) or (choice == "auto" and gpus == 1):
        return RankMode.LOGICAL
    return RankMode.PER_GPU if gpus >= 2 else None
