"""afdep COMMAND [ARGS]: the kernel package's tools in one command.

build      compile every kernel (NVRTC, no GPU needed) and warm the cubin cache
validate   the correctness matrix: a rank per GPU on 2+ GPUs, logical ranks on one
           (--rank-mode); on a CPU: compile, check the reference
bench      screens: arms interleaved across processes, against NCCL and a peer copy
screen     count-first vs payload-first on 4 GPUs, beside the recorded table
sanitize   the one-GPU driver under compute-sanitizer (memcheck, racecheck, synccheck,
           initcheck): a verdict and the findings (kernel, file:line) per tool
drive      the correctness driver under torchrun: afdep drive [--nproc N] DRIVER-ARGS
           (N >= 2, default 2; `python -m afdep.testing.driver` is one rank of it);
           with `--mode logical --ranks N`, N ranks in one process on one GPU

`afdep COMMAND --help` gives each one's options. The same code runs as
`python -m afdep.build`, `afdep.validate`, `afdep.bench`, `afdep.bench.screen`,
`afdep.sanitize`.
"""

from __future__ import annotations

import importlib
import os
import sys

from hostio import entry_point

COMMANDS = {
    "build": "afdep.build",
    "validate": "afdep.validate",
    "bench": "afdep.bench",
    "screen": "afdep.bench.screen",
    "sanitize": "afdep.sanitize",
}


def drive(argv: list[str]) -> int:
    """Check the driver's arguments and the GPUs here, then replace this
    process by torchrun running the driver (its ranks die with it)."""
    from afdep.ranks import RankMode
    from afdep.testing.driver import parse_args
    from afdep.testing.launch import DRIVER, driver_command, torchrun_command
    from hostio import gpu_count

    nproc = 2
    if argv[:1] == ["--nproc"]:
        if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) < 2:
            print("afdep drive: error: --nproc needs an integer >= 2", file=sys.stderr)
            return 2
        nproc, argv = int(argv[1]), argv[2:]
    args = parse_args(argv)  # a bad argument is one line here, not one per rank
    if args.mode == RankMode.LOGICAL:  # every rank in one process, on one GPU
        if gpu_count() < 1:
            print("afdep drive: error: --mode logical: needs a GPU, found 0", file=sys.stderr)
            return 2
        command = driver_command(RankMode.LOGICAL, None, argv)
        os.execv(command[0], command)
    if gpu_count() < nproc:
        print(
            f"afdep drive: error: --nproc {nproc}: needs {nproc} GPUs, found {gpu_count()}",
            file=sys.stderr,
        )
        return 2
    command = torchrun_command(nproc, DRIVER, argv)
    os.execv(command[0], command)
    return 0  # not reached


@entry_point
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name == "drive":
        return drive(rest)
    if name not in COMMANDS:
        known = ", ".join([*COMMANDS, "drive"])
        print(f"afdep: error: unknown command {name!r}; known: {known}", file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[name]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
