"""Knobs from `AFDEP_*` environment variables, parsed once into a frozen Config.

Every variable afdep reads is listed in KNOBS (and in the README); any other
`AFDEP_*` name, or a value a knob does not accept, is an error that names it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass


class ConfigError(ValueError):
    """An `AFDEP_*` variable that is unknown or has a bad value."""


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a positive integer") from None
    if value <= 0:
        raise ConfigError(f"{name}={text!r}: expected a positive integer")
    return value


def _path(name: str, text: str) -> str:
    if not text.strip():
        raise ConfigError(f"{name}: expected a directory path, got an empty value")
    return text


@dataclass(frozen=True)
class Knob:
    field: str
    parse: Callable[[str, str], object]
    default: object
    doc: str


KNOBS: dict[str, Knob] = {
    "AFDEP_TIMEOUT_MS": Knob(
        "timeout_ms",
        _positive_int,
        10_000,
        "how long a device wait spins before it prints `afdep timeout: site=...` and traps",
    ),
    "AFDEP_JIT_CACHE": Knob(
        "jit_cache",
        _path,
        "~/.cache/afdep/jit",
        "directory of the cubin cache",
    ),
}


@dataclass(frozen=True)
class Config:
    timeout_ms: int = 10_000
    jit_cache: str = "~/.cache/afdep/jit"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        environ = os.environ if environ is None else environ
        unknown = sorted(k for k in environ if k.startswith("AFDEP_") and k not in KNOBS)
        if unknown:
            raise ConfigError(
                f"unknown afdep variable {unknown[0]}"
                + (f" (and {unknown[1:]})" if len(unknown) > 1 else "")
                + f"; known: {sorted(KNOBS)}"
            )
        values = {
            knob.field: knob.parse(name, environ[name])
            for name, knob in KNOBS.items()
            if name in environ
        }
        return cls(**values)

    def digest(self) -> str:
        """A short digest ranks compare to prove they run the same configuration."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]
