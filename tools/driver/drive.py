"""`afdep drive [--nproc N] DRIVER-ARGS`: the correctness driver under
torchrun (N >= 2 ranks, default 2), or with `--mode logical --ranks N` every
rank in one process on one GPU. Its arguments and the GPUs here are checked
once, before this process becomes the driver's."""

from __future__ import annotations

import os
import sys

from hostio import entry_point


@entry_point
def main(argv: list[str] | None = None) -> int:
    """Check the driver's arguments and the GPUs here, then replace this
    process by torchrun running the driver (its ranks die with it)."""
    from hostio import RankMode, UsageError, gpu_count
    from tools.driver.driver import parse_args, refuse_a_bad_environment
    from tools.driver.launch import DRIVER, driver_command, torchrun_command

    argv = sys.argv[1:] if argv is None else argv
    nproc = 2
    if argv[:1] == ["--nproc"]:
        if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) < 2:
            print("afdep drive: error: --nproc needs an integer >= 2", file=sys.stderr)
            return 2
        nproc, argv = int(argv[1]), argv[2:]
    args = parse_args(argv)  # a bad argument is one line here, not one per rank
    try:
        refuse_a_bad_environment()
    except UsageError as error:
        print(f"afdep drive: error: {error}", file=sys.stderr)
        return 2
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


if __name__ == "__main__":
    sys.exit(main())
