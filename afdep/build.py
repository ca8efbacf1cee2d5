"""Compile every kernel for a set of configurations, with no GPU needed.

    python -m afdep.build [--hidden 2048 7168] [--top-k 8] [--payload bf16 fp8]
                          [--protocol payload-first count-first] [--view expanded collect]
                          [--arm ffn attention] [--csrc DIR] [--ptx DIR | --cubin DIR]

CI runs it; on a GPU machine it warms the cubin cache before the ranks start.
`--ptx DIR` writes each kernel's PTX with line info instead (`<variant>.ptx`
and `index.json`, file name -> kernel label), what the fault engine's publish
contract reads (docs/architecture.md, "The publish contract"); `--csrc DIR`
compiles the kernel sources under DIR instead of this package's. `--cubin
DIR` builds through the cache and also writes each cubin there
(`<variant>.cubin` and `index.json`), what the fault engine disassembles to
find a fault the compiler erased (docs/architecture.md, "Erased faults");
those cubins are cached by the files each kernel includes, as PTX is, so a
fault in one kernel recompiles only that kernel's variants, and each is
written the moment it is made, so the engine may stop the command at the
first that differs.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path

from afdep.config import environment_error
from afdep.jit import CSRC, CompileError, KernelSpec, compile_kernel, compile_ptx, source_digest
from afdep.kernels import all_launches
from afdep.vocab import Arm, Protocol, Role
from afdep.workspace import Geometry, GeometryError
from hostio import OneLineParser, die_with_parent, entry_point, write_bytes, write_json

# The geometry fields this command's options set; the others are fixed above.
OPTION_OF_FIELD = {"hidden": "--hidden", "top_k": "--top-k", "payload": "--payload"}


def all_specs(
    hiddens,
    top_ks,
    payloads,
    protocols=tuple(Protocol),
    views=("expanded", "collect"),
    arms=tuple(Arm),
):
    """Every kernel either role launches for the chosen configurations."""
    specs = {}
    for hidden, top_k, payload, view, arm in itertools.product(
        hiddens, top_ks, payloads, views, arms
    ):
        g = Geometry(
            world_size=2,
            ffn_ranks=1,
            num_experts=128,
            capacity=2048,
            hidden=hidden,
            top_k=top_k,
            payload=payload,
            collect_view=view == "collect",
            arm_attention=arm == Arm.ATTENTION,
        )
        for role in Role:
            for launch in all_launches(g, role, tuple(protocols)):
                specs[launch.spec] = None
    return list(specs)


def timed_compile(spec, root=CSRC, by_includes=False):
    started = time.perf_counter()
    try:
        compiled = compile_kernel(spec, root=root, by_includes=by_includes)
        return compiled, time.perf_counter() - started, None
    except CompileError as error:
        return None, time.perf_counter() - started, error


def variant_file_name(spec: KernelSpec, suffix: str = ".ptx") -> str:
    """`attention_dispatch-Hidden2048-...-NumThreads512.ptx` (or `.cubin`): one file a variant."""
    args = "-".join(f"{key.removeprefix('k')}{str(value).lower()}" for key, value in spec.template)
    return f"{spec.name}-{args}{suffix}"


def write_ptx(spec: KernelSpec, root: Path, out: Path) -> tuple[float, int, CompileError | None]:
    """One variant's PTX into `out`: seconds taken, bytes written, the error."""
    started = time.perf_counter()
    try:
        text = compile_ptx(spec, root)
    except CompileError as error:
        return time.perf_counter() - started, 0, error
    (out / variant_file_name(spec)).write_text(text)
    return time.perf_counter() - started, len(text), None


def build_ptx(specs: list[KernelSpec], root: Path, out: Path) -> int:
    """Every variant's PTX and `index.json` into `out`. Processes, not threads:
    NVRTC's PTX path holds the GIL long enough that threads barely overlap
    (41 variants on 2 cores: 12.7 s in threads, 7.9 s in processes)."""
    out.mkdir(parents=True, exist_ok=True)
    workers = os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent) as pool:
        outcomes = list(pool.map(write_ptx, specs, [root] * len(specs), [out] * len(specs)))
    failed = 0
    for spec, (seconds, size, error) in zip(specs, outcomes, strict=True):
        if error is not None:
            failed += 1
            print(f"FAILED {spec.label()}\n{error}", file=sys.stderr)
            continue
        print(f"ptx      {seconds:6.2f}s {size:7d} B  {spec.label()}")
    if failed:
        return 1
    write_json(out / "index.json", {variant_file_name(spec): spec.label() for spec in specs})
    return 0


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
    parser.add_argument("--payload", nargs="+", choices=("bf16", "fp8"), default=["bf16", "fp8"])
    parser.add_argument(
        "--protocol",
        nargs="+",
        choices=[p.value for p in Protocol],
        default=[p.value for p in Protocol],
    )
    parser.add_argument(
        "--view", nargs="+", choices=("expanded", "collect"), default=["expanded", "collect"]
    )
    parser.add_argument(
        "--arm", nargs="+", choices=[a.value for a in Arm], default=[a.value for a in Arm]
    )
    parser.add_argument("--csrc", type=Path, default=CSRC, help="the kernel sources to compile")
    written = parser.add_mutually_exclusive_group()
    written.add_argument("--ptx", type=Path, default=None, help="write each kernel's PTX here")
    written.add_argument("--cubin", type=Path, default=None, help="also write each cubin here")
    args = parser.parse_args(argv)
    if not (args.csrc / "impls").is_dir():
        print(f"error: --csrc {args.csrc}: no impls/ folder of kernel sources", file=sys.stderr)
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


def build_cubins(specs: list[KernelSpec], root: Path, out: Path | None) -> int:
    """Every variant through the cubin cache, each reported as it is done.
    NVRTC releases the GIL: kernels compile side by side. With `out`, each
    cubin is written there (whole, by a rename) the moment it is made, for
    a reader that may stop this command at the first cubin it needs (the
    fault engine's erasure check), and `index.json` (file name -> label)
    last, once all are; those cubins are keyed by what each kernel includes."""
    compile_one = functools.partial(timed_compile, root=root, by_includes=out is not None)
    failed = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        jobs = {pool.submit(compile_one, spec): spec for spec in specs}
        for job in as_completed(jobs):
            spec = jobs[job]
            compiled, seconds, error = job.result()
            if error is not None:
                failed += 1
                print(f"FAILED {spec.label()}\n{error}", file=sys.stderr, flush=True)
                continue
            if out is not None:
                write_bytes(out / variant_file_name(spec, ".cubin"), compiled.cubin)
            how = "cached" if compiled.from_cache else "compiled"
            print(f"{how:8} {seconds:6.2f}s {len(compiled.cubin):7d} B  {spec.label()}", flush=True)
    if failed:
        return 1
    if out is not None:
        index = {variant_file_name(spec, ".cubin"): spec.label() for spec in specs}
        write_json(out / "index.json", index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
