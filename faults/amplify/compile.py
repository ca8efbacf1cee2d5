"""NVRTC compilation of the litmus (no GPU), its digest, and loading it.

The litmus includes the target's primitives header (`common/ptx.cuh`) from the
catalog's sources folder, compiled with the options the target's own kernels
use (sm_90a, C++17, line info). The faults package never imports the target's
package, so this is cuda.core's Program called here, not the target's
compile function; the source digest is `faults.pipeline.scratch.tree_digest`, the same
rule as the target's."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from faults.amplify.shapes import Shape

LITMUS = Path(__file__).resolve().with_name("litmus.cuh")
ARCH = "sm_90a"
_IMPORT_LOCK = threading.Lock()


class LitmusCompileError(RuntimeError):
    """NVRTC rejected a litmus instantiation; the message carries its log."""


@dataclass(frozen=True)
class CompiledLitmus:
    shape: Shape
    symbol: str
    cubin: bytes


def litmus_digest() -> str:
    """sha256 of the litmus source, recorded beside the target's source digest."""
    return hashlib.sha256(LITMUS.read_bytes()).hexdigest()


@cache
def _program_api():
    with _IMPORT_LOCK:  # cuda.core sets itself up while importing: one thread at a time
        from cuda.core import Program, ProgramOptions
    return Program, ProgramOptions


def nvrtc_available() -> str | None:
    """None when NVRTC can be used here, else why not (one line)."""
    try:
        _program_api()
        with _IMPORT_LOCK:
            from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as error:  # a missing wheel or library: said, not raised
        return f"NVRTC is not available here: {error}"
    return None


def compile_litmus(shape: Shape, sources: Path, arch: str = ARCH) -> CompiledLitmus:
    """The cubin of one shape; `sources` is the folder holding common/ptx.cuh."""
    Program, ProgramOptions = _program_api()
    options = ProgramOptions(
        arch=arch,
        std="c++17",
        include_path=[str(LITMUS.parent), str(Path(sources))],
        name="litmus.cu",
        lineinfo=True,
    )
    expression = shape.name_expression()
    try:
        program = Program('#include "litmus.cuh"\n', "c++", options)
        code = program.compile("cubin", name_expressions=(expression,))
    except Exception as error:  # cuda.core raises NVRTCError with the log in its text
        raise LitmusCompileError(
            f"{shape.label()} failed to compile for {arch}:\n{error}"
        ) from error
    symbol = code.symbol_mapping[expression]
    return CompiledLitmus(
        shape, symbol.decode() if isinstance(symbol, bytes) else symbol, bytes(code.code)
    )


_loaded: dict[tuple[Shape, int, Path], object] = {}


def load_litmus(shape: Shape, device_index: int, sources: Path):
    """The cuda.core Kernel of `shape` on a device (needs the GPU)."""
    key = (shape, device_index, Path(sources))
    if key not in _loaded:
        from cuda.core import Device, ObjectCode

        Device(device_index).set_current()
        compiled = compile_litmus(shape, sources)
        module = ObjectCode.from_cubin(compiled.cubin, name="litmus")
        _loaded[key] = module.get_kernel(compiled.symbol)
    return _loaded[key]
