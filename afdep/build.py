"""Compile every kernel for a set of configurations, with no GPU needed:
the variants either role launches, their cubins through the cache (each
written whole the moment it is made, for the fault engine's erasure check,
docs/verdicts.md, "Erased faults"), or their PTX with line info (what the
publish contract reads, docs/synchronization.md, "The publish contract"). The
command is tools/build.py."""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path

from afdep.jit import CSRC, CompileError, KernelSpec, compile_kernel, compile_ptx
from afdep.kernels import all_launches
from afdep.vocab import Arm, Protocol, Role
from afdep.workspace import Geometry
from hostio import die_with_parent, write_bytes, write_json


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


def timed_compile(spec, root=CSRC):
    started = time.perf_counter()
    try:
        compiled = compile_kernel(spec, root=root)
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


def build_cubins(specs: list[KernelSpec], root: Path, out: Path | None) -> int:
    """Every variant through the cubin cache, each reported as it is done.
    NVRTC releases the GIL: kernels compile side by side. With `out`, each
    cubin is written there (whole, by a rename) the moment it is made, for
    a reader that may stop this command at the first cubin it needs (the
    fault engine's erasure check), and `index.json` (file name -> label)
    last, once all are."""
    compile_one = functools.partial(timed_compile, root=root)
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
