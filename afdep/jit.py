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
    from afdep.config import Settings

    config = Settings.from_env()
    return Path(config.jit_cache).expanduser(), config.jit_cache_max_mb * 2**20


# How an entry was made, in every key: entries of another way are never read.
CACHE_FORMAT = "nvrtc headers in memory"


def cache_key(spec: KernelSpec, digest: str, arch: str, nvrtc: str) -> str:
    material = json.dumps([CACHE_FORMAT, digest, spec.name, spec.template, arch, nvrtc])
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def compile_kernel(spec: KernelSpec, *, root: Path | None = None, arch: str = ARCH) -> CompiledKernel:
    """The cubin of `spec` for the sources under `root` (default: this
    package's), cached by the files the kernel includes: a change to one
    kernel's headers recompiles only the variants that include them, and a
    tree elsewhere with the same headers shares the entry. NVRTC reads the
    headers from memory, by the names they are included as, so `__FILE__` is
    `common/comm.cuh` in every tree and no instruction depends on where the
    tree lies (the line info names the header under the compiling process's
    working folder: a label, never read back as a path)."""
    root = CSRC if root is None else Path(root)
    headers = kernel_headers(spec, root)
    directory, max_bytes = _cache_settings()
    key = cache_key(spec, headers_digest(headers), arch, nvrtc_version())
    path = directory / f"{spec.name}-{key}.cubin"
    entry = _read_entry(path)
    if entry is not None:
        return CompiledKernel(spec, *entry, path, from_cache=True)
    symbol, cubin = _nvrtc(spec, headers, arch, cubin=True)
    _write_entry(path, symbol, cubin)
    evict(directory, max_bytes, keep=path)
    return CompiledKernel(spec, symbol, cubin, path, from_cache=False)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def kernel_headers(spec: KernelSpec, root: Path) -> dict[str, str]:
    """Every file under `root` that `spec`'s header includes, transitively,
    by the name it is included as (root-relative, or beside the file that
    includes it), in the order met: all a compile of `spec` reads of the tree."""
    headers: dict[str, str] = {}
    where: dict[str, str] = {}  # include name -> the file it named
    pending = [(f"impls/{spec.name}.cuh", f"impls/{spec.name}.cuh")]
    while pending:
        name, relative = pending.pop()
        path = root / relative
        if name in headers:
            if where[name] != relative:
                raise CompileError(
                    f"{spec.label()}: #include \"{name}\" names both {where[name]} and "
                    f"{relative}: include it by its path under the sources"
                )
            continue
        if not path.is_file():
            continue  # a system header, or a missing one NVRTC will name
        headers[name], where[name] = path.read_text(), relative
        for included in INCLUDE.findall(headers[name]):
            beside = (path.parent / included).relative_to(root).as_posix()
            pending.append((included, included if (root / included).is_file() else beside))
    return headers


def headers_digest(headers: dict[str, str]) -> str:
    """sha256 over a kernel's headers (name, text): what its code depends on."""
    digest = hashlib.sha256()
    for name, text in headers.items():
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def include_digest(spec: KernelSpec, root: Path) -> str:
    """The digest of the files `spec`'s header includes, transitively: what
    its PTX and cubin depend on, so a change to another kernel's header
    leaves them cached."""
    return headers_digest(kernel_headers(spec, root))


def compile_ptx(spec: KernelSpec, root: Path | None = None, *, arch: str = ARCH) -> str:
    """The PTX of `spec` for the sources under `root` (default: this package's),
    with line info, for the static publish contract (docs/synchronization.md, "The
    publish contract"). Cached beside the cubins (`ptx/`), keyed as they are."""
    root = CSRC if root is None else Path(root)
    headers = kernel_headers(spec, root)
    directory, max_bytes = _cache_settings()
    key = cache_key(spec, headers_digest(headers), arch, nvrtc_version())
    path = directory / "ptx" / f"{spec.name}-{key}.ptx"
    try:
        text = path.read_text()
        with contextlib.suppress(OSError):
            os.utime(path)
        return text
    except FileNotFoundError:
        pass
    text = _nvrtc(spec, headers, arch, cubin=False)[1].rstrip(b"\0").decode()
    write_bytes(path, text.encode())
    # PTX is small and a review compares a few trees: an eighth of the cubins' bound
    evict(path.parent, max_bytes // 8, keep=path, pattern="*.ptx")
    return text


def _nvrtc(spec: KernelSpec, headers: dict[str, str], arch: str, *, cubin: bool) -> tuple[str, bytes]:
    """Raw NVRTC (no driver needed) of `spec` from its `headers` in memory:
    the instantiation's lowered symbol, and its cubin or PTX."""
    with _IMPORT_LOCK:  # threads compile side by side: one import at a time
        from cuda.bindings import nvrtc

    expression = spec.name_expression().encode()
    options = [f"-arch={arch}", "-std=c++17", "-lineinfo"]
    names = list(headers)
    error, program = nvrtc.nvrtcCreateProgram(
        spec.jit_source().encode(),
        f"{spec.name}.cu".encode(),
        len(names),
        [headers[n].encode() for n in names],
        [n.encode() for n in names],
    )
    _check_nvrtc(nvrtc, error, spec, arch, "")
    try:
        (error,) = nvrtc.nvrtcAddNameExpression(program, expression)
        _check_nvrtc(nvrtc, error, spec, arch, "")
        (error,) = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        _check_nvrtc(nvrtc, error, spec, arch, _program_log(nvrtc, program))
        error, symbol = nvrtc.nvrtcGetLoweredName(program, expression)
        _check_nvrtc(nvrtc, error, spec, arch, "")
        size_of, get = (
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
            if cubin
            else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        )
        error, size = size_of(program)
        _check_nvrtc(nvrtc, error, spec, arch, "")
        code = b" " * size
        (error,) = get(program, code)
        _check_nvrtc(nvrtc, error, spec, arch, "")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return (symbol.decode() if isinstance(symbol, bytes) else symbol), code


def _program_log(nvrtc, program) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    return log.rstrip(b"\0").decode(errors="replace")


def _check_nvrtc(nvrtc, error, spec: KernelSpec, arch: str, log: str) -> None:
    if error != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(
            f"{spec.label()} failed to compile for {arch} ({error.name}):\n{log}"
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

    error, mode = driver.cuModuleGetLoadingMode()
    eager = driver.CUmoduleLoadingMode.CU_MODULE_EAGER_LOADING
    if error == driver.CUresult.CUDA_SUCCESS and mode == eager:
        return  # loaded with its module already
    handle = kernel.handle  # a CUkernel (library API), or a CUfunction (module API)
    if isinstance(handle, driver.CUkernel):
        error, function = driver.cuKernelGetFunction(handle)
    else:
        error, function = driver.CUresult.CUDA_SUCCESS, handle
    if error == driver.CUresult.CUDA_SUCCESS:
        (error,) = driver.cuFuncLoad(function)
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"loading {kernel!r} into the current context: {error.name}")
