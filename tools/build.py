"""Compile every kernel for a set of configurations, with no GPU needed.

    python -m tools.build [--hidden 2048 7168] [--top-k 8] [--payload bf16 fp8]
                          [--protocol payload-first count-first] [--view expanded collect]
                          [--arm ffn attention] [--csrc DIR] [--ptx DIR | --cubin DIR]

CI runs it; on a GPU machine it warms the cubin cache before the ranks start.
`--ptx DIR` writes each kernel's PTX with line info instead (`<variant>.ptx`
and `index.json`, file name -> kernel label), what the fault engine's publish
contract reads (docs/synchronization.md, "The publish contract"); `--csrc DIR`
compiles the kernel sources under DIR instead of this package's. `--cubin
DIR` builds through the cache and also writes each cubin there
(`<variant>.cubin` and `index.json`), what the fault engine disassembles to
find a fault the compiler erased (docs/verdicts.md, "Erased faults");
those cubins are cached by the files each kernel includes, as PTX is, so a
fault in one kernel recompiles only that kernel's variants, and each is
written the moment it is made, so the engine may stop the command at the
first that differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from afdep.build import all_specs, build_cubins, build_ptx
from afdep.config import environment_error
from afdep.jit import CSRC, source_digest
from afdep.vocab import Arm, Protocol
from afdep.workspace import GeometryError
from hostio import OneLineParser, entry_point, output_problem

# The geometry fields this command's options set; the others are fixed above.
OPTION_OF_FIELD = {"hidden": "--hidden", "top_k": "--top-k", "payload": "--payload"}


def named_option(error: GeometryError) -> str:
    """The geometry error led by the option and value that caused it."""
    option = OPTION_OF_FIELD.get(error.field)
    if option is None:
        return str(error)
    return f"{option} {error.value}: {error}"


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="afdep build", description=__doc__)
    parser.add_argument("--hidden", type=int, nargs="+", default=[2048, 7168])
    parser.add_argument("--top-k", type=int, nargs="+", default=[8])
    parser.add_some_of("--payload", ("bf16", "fp8"))
    parser.add_some_of("--protocol", Protocol)
    parser.add_some_of("--view", ("expanded", "collect"))
    parser.add_some_of("--arm", Arm)
    parser.add_argument("--csrc", type=Path, default=CSRC, help="the kernel sources to compile")
    written = parser.add_mutually_exclusive_group()
    written.add_argument("--ptx", type=Path, default=None, help="write each kernel's PTX here")
    written.add_argument("--cubin", type=Path, default=None, help="also write each cubin here")
    args = parser.parse_args(argv)
    if not (args.csrc / "impls").is_dir():
        print(f"error: --csrc {args.csrc}: no impls/ folder of kernel sources", file=sys.stderr)
        return 2
    for argument, out in (("--ptx", args.ptx), ("--cubin", args.cubin)):
        problem = None if out is None else output_problem(out, [args.csrc])
        if problem is not None:
            print(f"error: {argument} {out}: {problem}", file=sys.stderr)
            return 2
    problem = environment_error()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    protocols = [Protocol(text) for text in args.protocol]
    arms = [Arm(text) for text in args.arm]
    try:
        specs = all_specs(args.hidden, args.top_k, args.payload, protocols, args.view, arms)
    except GeometryError as error:
        print(f"error: {named_option(error)}", file=sys.stderr)
        return 2
    print(f"native_source_sha256 {source_digest(args.csrc)}")
    if args.ptx is not None:
        return build_ptx(specs, args.csrc.resolve(), args.ptx)
    return build_cubins(specs, args.csrc, args.cubin)


if __name__ == "__main__":
    sys.exit(main())
