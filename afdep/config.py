"""Knobs from `AFDEP_*` environment variables, parsed once into a frozen Settings.

Every variable afdep reads is listed in KNOBS (and in the README); any other
`AFDEP_*` name, or a value a knob does not accept, is an error that names it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from afdep.vocab import Arm
from hostio import folder_problem


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


def _count(name: str, text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a non-negative integer") from None
    if value < 0:
        raise ConfigError(f"{name}={text!r}: expected a non-negative integer")
    return value


# The device waits read the timeout in nanoseconds from the Params block, which
# is written as an int64 tensor (afdep/buffer.py): ms * 10**6 must fit in it.
MAX_TIMEOUT_MS = (2**63 - 1) // 1_000_000


def _timeout_ms(name: str, text: str) -> int:
    value = _positive_int(name, text)
    if value > MAX_TIMEOUT_MS:
        raise ConfigError(
            f"{name}={text!r}: at most {MAX_TIMEOUT_MS} (the device wait counts nanoseconds "
            "in an int64)"
        )
    return value


def _flag(name: str, text: str) -> bool:
    if text not in ("0", "1"):
        raise ConfigError(f"{name}={text!r}: expected 0 or 1")
    return text == "1"


def _arm(name: str, text: str) -> Arm:
    try:
        return Arm(text)
    except ValueError:
        expected = " or ".join(arm.value for arm in Arm)
        raise ConfigError(f"{name}={text!r}: expected {expected}") from None


def _warps(name: str, text: str) -> int:
    value = _positive_int(name, text)
    if value > 16:
        raise ConfigError(f"{name}={text!r}: an epilogue CTA has 16 warps at most")
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
        _timeout_ms,
        10_000,
        "how long a device wait spins before it prints `afdep timeout: site=...` and traps",
    ),
    "AFDEP_JIT_CACHE": Knob(
        "jit_cache",
        _path,
        "~/.cache/afdep/jit",
        "directory of the cubin cache",
    ),
    # Measured (NVRTC 13.5, sm_90a): a default `python -m tools.build` is ~4.4 MB
    # of cubins per source state, a fault sweep ~40 states of ~1.6 MB. 2048 MB
    # keeps the clean tree's builds and dozens of sweeps (a re-run is served
    # from the cache) while capping what a long-lived machine gives the cache.
    "AFDEP_JIT_CACHE_MAX_MB": Knob(
        "jit_cache_max_mb",
        _positive_int,
        2048,
        "size bound of the cubin cache in MiB; a write evicts the least recently used entries",
    ),
    "AFDEP_PAYLOAD_FIRST": Knob(
        "payload_first", _flag, False, "1 forces payload-first (the control) at every bucket"
    ),
    "AFDEP_COUNT_FIRST_MIN_BUCKET": Knob(
        "min_bucket",
        _positive_int,
        None,
        "count-first for buckets >= this many tokens; unset: count-first is off",
    ),
    "AFDEP_COUNT_FIRST_EPILOGUE_SMS": Knob(
        "epilogue_sms",
        _positive_int,
        None,
        "at most this many CTAs for the streaming epilogue (default: every SM its FFN rank "
        "can hold beside what runs with it)",
    ),
    "AFDEP_EXPAND_SMS": Knob(
        "expand_sms",
        _positive_int,
        None,
        "at most this many CTAs for payload-first's ffn_expand (default: every SM its FFN "
        "rank can hold beside what runs with it)",
    ),
    "AFDEP_COMBINE_SMS": Knob(
        "combine_sms",
        _positive_int,
        None,
        "CTAs of ffn_combine, which waits on nothing (default: every SM of the device)",
    ),
    "AFDEP_COUNT_FIRST_ARM": Knob(
        "arm",
        _arm,
        Arm.FFN,
        "ffn: the epilogue expands each row to its experts; attention: the attention rank "
        "stores every expert row itself, at offsets it reads from the FFN",
    ),
    "AFDEP_COUNT_FIRST_WARP_COUNT": Knob(
        "warp_count", _warps, 16, "warps per epilogue CTA that expand rows (1-16)"
    ),
    "AFDEP_COUNT_FIRST_UNIT_MIN_ROWS": Knob(
        "unit_min_rows", _positive_int, 1, "consecutive slots an epilogue warp claims at once"
    ),
    "AFDEP_COUNT_FIRST_UNGATE": Knob(
        "ungate",
        _flag,
        False,
        "1: the epilogue relies on per-row flags only; 0: it first waits for the source's "
        "all-rows-sent flag (the payload gate)",
    ),
    "AFDEP_COUNT_FIRST_UNGATED_TOKENS": Knob(
        "ungated_tokens", _count, 0, "steps with at most this many tokens per source run ungated"
    ),
}

# The knobs every rank must agree on: they decide the protocol each step runs.
PROTOCOL_FIELDS = (
    "payload_first",
    "min_bucket",
    "epilogue_sms",
    "arm",
    "warp_count",
    "unit_min_rows",
    "ungate",
    "ungated_tokens",
)


@dataclass(frozen=True)
class Settings:
    """The AFDEP_* knobs' values one process runs with (a catalog's run config is
    faults.catalog.Config, another thing)."""

    timeout_ms: int = 10_000
    jit_cache: str = "~/.cache/afdep/jit"
    jit_cache_max_mb: int = 2048
    payload_first: bool = False
    min_bucket: int | None = None
    epilogue_sms: int | None = None
    expand_sms: int | None = None
    combine_sms: int | None = None
    arm: Arm = Arm.FFN
    warp_count: int = 16
    unit_min_rows: int = 1
    ungate: bool = False
    ungated_tokens: int = 0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
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

    def protocol(self) -> dict[str, object]:
        """The protocol knobs, which every rank must share (checked at buffer creation)."""
        return {name: getattr(self, name) for name in PROTOCOL_FIELDS}

    def count_first(self, bucket: int) -> bool:
        """Does a step of `bucket` tokens (a host-known bound) run count-first?"""
        return not self.payload_first and self.min_bucket is not None and bucket >= self.min_bucket


def environment_error(environ: Mapping[str, str] | None = None) -> str | None:
    """The one-line error for the `AFDEP_*` variables, or None when they parse
    and the cubin cache's folder is one or can be made (a read-only cache is
    read all the same): entry points check it before any work starts."""
    try:
        config = Settings.from_env(environ)
    except ConfigError as error:
        return str(error)
    problem = folder_problem(Path(config.jit_cache).expanduser())
    if problem is not None and problem != "not writable":
        return f"AFDEP_JIT_CACHE={config.jit_cache!r}: {problem}"
    return None


def disagreement(configs: list[dict[str, object]]) -> str | None:
    """The agreement error for per-rank protocol knobs, or None when all agree."""
    for name in PROTOCOL_FIELDS:
        values = [c[name] for c in configs]
        if len(set(map(repr, values))) > 1:
            per_rank = ", ".join(
                f"rank {r}: {getattr(v, 'value', v)!r}" for r, v in enumerate(values)
            )
            variable = next(k for k, knob in KNOBS.items() if knob.field == name)
            return (
                f"all ranks must use the same count-first configuration: {variable} "
                f"differs ({per_rank})"
            )
    return None


# The environment that runs count-first at every bucket (validate's and bench's CF).
COUNT_FIRST_EVERY_BUCKET = {"AFDEP_COUNT_FIRST_MIN_BUCKET": "1"}
