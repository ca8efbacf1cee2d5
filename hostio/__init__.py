"""Host-side helpers the kernel package's tools and the fault engine share,
stdlib only, with no dependency on either (docs/architecture.md, "Layout"):
child processes that die with their parent (children.py, through the guard
in guard.py), the warm worker that forks a run per job (serve.py, run as a
script), atomic writes and where a command may write (files.py), the
machine's GPUs, where ranks go on them and the results files' names and
folder (machine.py), a release file pinned in a package registry (pins.py)
and one-line usage errors (usage.py). Every name is imported from here."""

from hostio.children import (
    CLI_STOP_SIGNALS,
    GUARD_GRACE_S,
    GUARD_SCRIPT,
    STOP_WAIT_S,
    ChildrenStopped,
    ProcessOutcome,
    die_with_parent,
    end_worker,
    entry_point,
    run_logged,
    start_worker,
    stop_children,
    stopping_children,
)
from hostio.files import (
    KeptFolder,
    cache_home,
    output_problem,
    refuse_output,
    write_bytes,
    write_json,
    write_text,
)
from hostio.machine import (
    CPU_MACHINE,
    RESULTS_DIR,
    RankMode,
    cpu_share,
    cuda_tool,
    cuda_toolkit_bin,
    gpu_count,
    gpu_group,
    machine_name,
    results_stem,
)
from hostio.pins import SHA256, Pin
from hostio.usage import (
    OneLineParser,
    UsageError,
    at_least,
    at_least_one,
    folder_problem,
    known_names,
    positive_seconds,
    writable_dir,
)

__all__ = [
    "CLI_STOP_SIGNALS",
    "CPU_MACHINE",
    "GUARD_GRACE_S",
    "GUARD_SCRIPT",
    "STOP_WAIT_S",
    "ChildrenStopped",
    "KeptFolder",
    "OneLineParser",
    "RESULTS_DIR",
    "Pin",
    "ProcessOutcome",
    "RankMode",
    "SHA256",
    "UsageError",
    "at_least",
    "at_least_one",
    "cache_home",
    "cpu_share",
    "die_with_parent",
    "end_worker",
    "entry_point",
    "folder_problem",
    "cuda_tool",
    "cuda_toolkit_bin",
    "gpu_count",
    "gpu_group",
    "known_names",
    "machine_name",
    "output_problem",
    "positive_seconds",
    "refuse_output",
    "results_stem",
    "run_logged",
    "start_worker",
    "stop_children",
    "stopping_children",
    "writable_dir",
    "write_bytes",
    "write_json",
    "write_text",
]
