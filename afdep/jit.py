"""Source digest, NVRTC compilation and the cubin cache.

A kernel is named once: `impls/<name>.cuh` defines `afdep::<name>_impl`, a
`KernelSpec` names it with its template arguments, and its cache entry is
`<name>-<key>.cubin`. Compilation needs no GPU (CI compiles every kernel);
loading does. The cache is bounded (`AFDEP_JIT_CACHE_MAX_MB`): a hit marks its
entry used, a write evicts the least recently used entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hostio import write_bytes

_IMPORT_LOCK = threading.Lock()

CSRC = Path(__file__).resolve().parent / "csrc"
ARCH = "sm_90a"

# Template parameters of each kernel, in declaration order.
KERNEL_TEMPLATES: dict[str, tuple[str, ...]] = {
    "attention_route": ("kTopK", "kNumThreads"),
    "attention_dispatch": (
        "kHidden",
        "kTopK",
        "kFp8",
        "kCountFirst",
        "kArmAttention",
        "kNumThreads",
    ),
    "ffn_expand": ("kHidden", "kTopK", "kFp8", "kCollectView", "kNumThreads"),
    "ffn_place": ("kNumThreads",),
    "ffn_stream_expand": (
        "kHidden",
        "kTopK",
        "kFp8",
        "kCollectView",
        "kArmAttention",
        "kNumThreads",
    ),
    "ffn_combine": ("kHidden", "kTopK", "kNumThreads"),
    "attention_combine": ("kHidden", "kNumThreads"),
}


class CompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries the compiler's log."""


def source_digest(root: Path = CSRC) -> str:
    """sha256 over every file under `root`: sorted relative path, then bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@cache
def _tree_digest() -> str:
    return source_digest(CSRC)


@dataclass(frozen=True)
class KernelSpec:
    """One instantiation: the kernel's name and its template arguments by name."""

    name: str
    template: tuple[tuple[str, int | bool], ...]

    @classmethod
    def make(cls, name: str, **template: int | bool) -> KernelSpec:
        expected = KERNEL_TEMPLATES.get(name)
        if expected is None:
            raise ValueError(f"unknown kernel {name!r}; known: {sorted(KERNEL_TEMPLATES)}")
        if set(template) != set(expected):
            raise ValueError(
                f"kernel {name!r} takes template arguments {list(expected)}, got {sorted(template)}"
            )
        return cls(name, tuple((key, template[key]) for key in expected))

    def name_expression(self) -> str:
        return f"afdep::{self.name}_impl<{', '.join(_render(v) for _, v in self.template)}>"

    def jit_source(self) -> str:
        """An include plus one instantiation, its template arguments named."""
        args = ",\n    ".join(f"/* {key} */ {_render(value)}" for key, value in self.template)
        return (
            f'#include "impls/{self.name}.cuh"\n\n'
            f"static constexpr auto* afdep_instance = &afdep::{self.name}_impl<\n    {args}>;\n"
        )

    def label(self) -> str:
        return f"{self.name}<{', '.join(f'{k}={_render(v)}' for k, v in self.template)}>"


def _render(value: int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(int(value))


@dataclass(frozen=True)
class CompiledKernel:
    spec: KernelSpec
    symbol: str  # the mangled name NVRTC gave the instantiation
    cubin: bytes
    path: Path
    from_cache: bool


@cache
def nvrtc_version() -> str:
    with _IMPORT_LOCK:  # threads compile side by side: one import at a time
        from cuda.bindings import nvrtc
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _cache_settings() -> tuple[Path, int]:
    """The cache's directory and its size bound in bytes."""
    from afdep.config import Config

    config = Config.from_env()
    return Path(config.jit_cache).expanduser(), config.jit_cache_max_mb * 2**20


def cache_key(spec: KernelSpec, digest: str, arch: str, nvrtc: str) -> str:
    material = json.dumps([digest, spec.name, spec.template, arch, nvrtc])
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def compile_kernel(
    spec: KernelSpec, *, root: Path | None = None, arch: str = ARCH, by_includes: bool = False
) -> CompiledKernel:
    """The cubin of `spec` for the sources under `root` (default: this package's),
    cached by the whole tree's digest. `by_includes`: a cubin only to be
    disassembled, never loaded, keyed like its PTX by the files the kernel
    includes, so a change to one kernel recompiles only its variants; the
    tree's path, compiled into `__FILE__` strings, is not in that key and
    changes data, not instructions."""
    root = CSRC if root is None else Path(root)
    if by_includes:
        digest = f"includes {include_digest(spec, root)}"
    else:
        digest = _tree_digest() if root == CSRC else source_digest(root)
    nvrtc = nvrtc_version()
    directory, max_bytes = _cache_settings()
    path = directory / f"{spec.name}-{cache_key(spec, digest, arch, nvrtc)}.cubin"
    entry = _read_entry(path)
    if entry is not None:
        return CompiledKernel(spec, *entry, path, from_cache=True)
    symbol, cubin = _nvrtc_compile(spec, root, arch)
    _write_entry(path, symbol, cubin)
    evict(directory, max_bytes, keep=path)
    return CompiledKernel(spec, symbol, cubin, path, from_cache=False)


@cache
def _program_api():
    """cuda.core's Program API, imported once: cuda.core picks its CUDA-version
    module while importing, and threads importing it at once (afdep.build
    compiles side by side) could see it half set up."""
    with _IMPORT_LOCK:
        from cuda.core import Program, ProgramOptions
    return Program, ProgramOptions


def _nvrtc_compile(spec: KernelSpec, root: Path, arch: str) -> tuple[str, bytes]:
    Program, ProgramOptions = _program_api()

    options = ProgramOptions(
        arch=arch, std="c++17", include_path=[str(root)], name=f"{spec.name}.cu", lineinfo=True
    )
    expression = spec.name_expression()
    program = Program(spec.jit_source(), "c++", options)
    try:
        code, failure = program.compile("cubin", name_expressions=(expression,)), None
    except Exception as error:  # cuda.core raises NVRTCError with the log in its text
        code, failure = None, f"{spec.label()} failed to compile for {arch}:\n{error}"
    # Freed now, while cuda.core is whole: a failed Program that a raised error's
    # frame keeps until interpreter shutdown prints a traceback from its
    # __dealloc__ there (cuda.core 1.2).
    program.close()
    del program
    if failure is not None:
        raise CompileError(failure)
    symbol = code.symbol_mapping[expression]
    return (symbol.decode() if isinstance(symbol, bytes) else symbol), bytes(code.code)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def include_digest(spec: KernelSpec, root: Path) -> str:
    """sha256 over the files `spec`'s header includes, transitively (relative
    path, bytes): what its PTX depends on, so a change to another kernel's
    header leaves its PTX cached."""
    digest, seen, pending = hashlib.sha256(), set(), [f"impls/{spec.name}.cuh"]
    while pending:
        name = pending.pop()
        path = root / name
        if name in seen or not path.is_file():
            continue  # a system header, or a missing one NVRTC will name
        seen.add(name)
        text = path.read_text()
        for included in INCLUDE.findall(text):
            beside = (path.parent / included).relative_to(root).as_posix()
            pending.append(included if (root / included).is_file() else beside)
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def compile_ptx(spec: KernelSpec, root: Path | None = None, *, arch: str = ARCH) -> str:
    """The PTX of `spec` for the sources under `root` (default: this package's),
    with line info, for the static publish contract (docs/synchronization.md, "The
    publish contract"). Cached beside the cubins (`ptx/`), keyed by the files
    the kernel includes, so a change to one kernel recompiles only its variants."""
    root = CSRC if root is None else Path(root)
    directory, max_bytes = _cache_settings()
    key = cache_key(spec, include_digest(spec, root), arch, nvrtc_version())
    path = directory / "ptx" / f"{spec.name}-{key}.ptx"
    try:
        text = path.read_text()
        with contextlib.suppress(OSError):
            os.utime(path)
        return text
    except FileNotFoundError:
        pass
    text = _nvrtc_ptx(spec, root, arch)
    write_bytes(path, text.encode())
    # PTX is small and a review compares a few trees: an eighth of the cubins' bound
    evict(path.parent, max_bytes // 8, keep=path, pattern="*.ptx")
    return text


def _nvrtc_ptx(spec: KernelSpec, root: Path, arch: str) -> str:
    """Raw NVRTC: cuda.core's PTX target wants a driver, this needs none."""
    with _IMPORT_LOCK:
        from cuda.bindings import nvrtc

    expression = spec.name_expression().encode()
    options = [f"-arch={arch}", "-std=c++17", f"-I{root}", "-lineinfo"]
    error, program = nvrtc.nvrtcCreateProgram(
        spec.jit_source().encode(), f"{spec.name}.cu".encode(), 0, [], []
    )
    _check_nvrtc(nvrtc, error, spec, arch, "")
    try:
        (error,) = nvrtc.nvrtcAddNameExpression(program, expression)
        _check_nvrtc(nvrtc, error, spec, arch, "")
        (error,) = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        _check_nvrtc(nvrtc, error, spec, arch, _program_log(nvrtc, program))
        error, size = nvrtc.nvrtcGetPTXSize(program)
        _check_nvrtc(nvrtc, error, spec, arch, "")
        ptx = b" " * size
        (error,) = nvrtc.nvrtcGetPTX(program, ptx)
        _check_nvrtc(nvrtc, error, spec, arch, "")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return ptx.rstrip(b"\0").decode()


def _program_log(nvrtc, program) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    return log.rstrip(b"\0").decode(errors="replace")


def _check_nvrtc(nvrtc, error, spec: KernelSpec, arch: str, log: str) -> None:
    if error != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(
            f"{spec.label()} failed to compile to PTX for {arch} ({error.name}):\n{log}"
        )


# A cache entry is one file: the mangled symbol, a newline, then the cubin. It
# is written to a temporary file and renamed, so no reader sees half of it.
def _write_entry(path: Path, symbol: str, cubin: bytes) -> None:
    write_bytes(path, symbol.encode() + b"\n" + cubin)


def _read_entry(path: Path) -> tuple[str, bytes] | None:
    """The entry's symbol and cubin, marked as just used; None when there is none
    (never written, or evicted by another process a moment ago)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    # Its modification time is its place in the LRU order. Evicted meanwhile, or
    # a read-only cache: the bytes are read all the same.
    with contextlib.suppress(OSError):
        os.utime(path)
    symbol, _, cubin = data.partition(b"\n")
    if not symbol or not cubin:
        raise CompileError(f"corrupt cache entry {path}: delete it to rebuild")
    return symbol.decode(), cubin


def evict(directory: Path, max_bytes: int, *, keep: Path, pattern: str = "*.cubin") -> list[Path]:
    """Remove the least recently used entries (oldest modification time first)
    until the cache holds at most `max_bytes`; never `keep`, the entry just
    written. Processes and threads evict side by side: an entry another one
    removed first is skipped. Returns the entries this call removed, in order."""
    entries = []
    for path in directory.glob(pattern):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        entries.append((stat.st_mtime_ns, path.name, stat.st_size, path))
    total = sum(size for _, _, size, _ in entries)
    removed = []
    for _, _, size, path in sorted(entries):
        if total <= max_bytes:
            break
        if path.name == keep.name:
            continue
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass  # another process evicted it first; its bytes are gone all the same
        total -= size
    return removed


_loaded: dict[tuple[KernelSpec, int], object] = {}


def load_kernel(spec: KernelSpec, device_index: int, root: Path | None = None):
    """The cuda.core Kernel for `spec` on a device (compiling when not cached),
    built from the sources under `root` (default: this package's)."""
    key = (spec, device_index, root)
    if key not in _loaded:
        from cuda.core import Device, ObjectCode

        Device(device_index).set_current()
        compiled = compile_kernel(spec, root=root)
        module = ObjectCode.from_cubin(compiled.cubin, name=spec.name)
        kernel = module.get_kernel(compiled.symbol)
        load_now(kernel)
        _loaded[key] = kernel
    return _loaded[key]


def load_now(kernel) -> None:
    """Load `kernel` into the current context now, whatever CUDA_MODULE_LOADING
    says: under lazy loading its first launch would load it, and a load
    waits for the context, where another logical rank's kernel may already
    spin waiting for this one (docs/synchronization.md, "One GPU, logical
    ranks"). Only afdep's own kernels load at once; torch's stay lazy."""
    from cuda.bindings import driver

    error, function = driver.cuKernelGetFunction(kernel.handle)
    if error == driver.CUresult.CUDA_SUCCESS:
        (error,) = driver.cuFuncLoad(function)
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"loading {kernel!r} into the current context: {error.name}")
