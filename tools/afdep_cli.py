"""afdep COMMAND [ARGS]: the kernel package's tools in one command.

build      compile every kernel (NVRTC, no GPU needed) and warm the cubin cache
validate   the correctness matrix: a rank per GPU on 2+ GPUs, logical ranks on one
           (--rank-mode); on a CPU: compile, check the reference
bench      screens: arms interleaved across processes, against NCCL and a peer copy
screen     count-first vs payload-first on 4 GPUs, beside the recorded table
sanitize   the one-GPU driver under compute-sanitizer (memcheck, racecheck, synccheck,
           initcheck): a verdict and the findings (kernel, file:line) per tool
drive      the correctness driver under torchrun: afdep drive [--nproc N] DRIVER-ARGS
           (N >= 2, default 2; `python -m tools.driver` is one rank of it);
           with `--mode logical --ranks N`, N ranks in one process on one GPU

`afdep COMMAND --help` gives each one's options. Each command is one module
with its `main`, and runs as `python -m tools.build`, `tools.validate`,
`tools.bench`, `tools.bench.screen`, `tools.sanitize` and `tools.driver.drive`.
"""

from __future__ import annotations

import importlib
import sys

from hostio import entry_point

COMMANDS = {
    "build": "tools.build",
    "validate": "tools.validate.validation",
    "bench": "tools.bench.arms",
    "screen": "tools.bench.screen",
    "sanitize": "tools.sanitize.stage",
    "drive": "tools.driver.drive",
}


@entry_point
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        known = ", ".join(COMMANDS)
        print(f"afdep: error: unknown command {name!r}; known: {known}", file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[name]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
