"""What `init` looks for when a codebase's own spellings are not given: CUDA's
ordering primitives as calls, as cuda::atomic_ref and cuda::std::atomic
member calls with a memory_order, and as inline PTX, each read as the
[target.contract] key it would be spelled under (docs/tools.md, "Onboarding
a codebase")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from invariants.sync.spellings import CONTRACT_PATTERNS, CONTRACT_TABLES

# Every key of [target.contract] a spelling may be given for: `release.sys`, `store`...
CONTRACT_KEYS = (
    *(f"{table}.{name}" for table, names in CONTRACT_TABLES.items() for name in names),
    *CONTRACT_PATTERNS,
)

# CUDA's own names, by key. CUDA's atomic functions are relaxed: a fence
# before one makes a release, so they are `store`s.
DEFAULT_CALLS = {
    "barrier.block": r"__syncthreads(?:_or|_and|_count)?",
    "barrier.warp": r"__syncwarp",
    "barrier.grid": r"grid\.sync",
    "fence.sys": r"__threadfence_system",
    "fence.gpu": r"__threadfence",
    "fence.cta": r"__threadfence_block",
    "store": r"atomic(?:Add|Sub|Exch|CAS|Or|And|Xor|Max|Min|Inc|Dec)(?:_system|_block)?",
}

# A member call of an atomic with its order, or the free fence with its order.
MEMBER_CALL = re.compile(
    r"(?:(?:\.|->)\s*(?P<op>load|store|exchange|fetch_\w+|compare_exchange_\w+)"
    r"|\b(?P<fence>atomic_thread_fence))\s*\("
)
MEMORY_ORDER = re.compile(r"memory_order(?:_|::)(\w+)")
THREAD_SCOPE = re.compile(r"thread_scope(?:_|::)(system|device|block)")
SCOPE_OF_THREAD_SCOPE = {"system": "sys", "device": "gpu", "block": "cta"}

# An asm statement, and one PTX instruction's mnemonic (a predicate before it).
ASM = re.compile(r"\b(?:asm|__asm__)\b(?:\s+(?:volatile|__volatile__))?\s*\(")
MNEMONIC = re.compile(r"^\s*\{?\s*(?:@!?\w+\s+)?([a-z][\w.:]*)")
PTX_SCOPES = {"sys": "sys", "gpu": "gpu", "cta": "cta", "cluster": "gpu"}


@dataclass(frozen=True)
class Reading:
    """What one primitive is under the contract: its key, and whether its
    access is a volatile one (relaxed: it orders nothing)."""

    key: str
    volatile: bool = False


def member_reading(op: str | None, arguments: str) -> Reading | None:
    """A member call `op` (None: atomic_thread_fence) with these arguments;
    None without a memory_order (it is no ordering primitive then)."""
    order = MEMORY_ORDER.search(arguments)
    if order is None:
        return None
    scope_said = THREAD_SCOPE.search(arguments)
    scope = SCOPE_OF_THREAD_SCOPE[scope_said[1]] if scope_said else "sys"
    order_name = order[1]
    if op is None:
        return Reading(f"fence.{scope}") if order_name != "relaxed" else None
    releases = order_name in ("release", "acq_rel", "seq_cst")
    acquires = order_name in ("acquire", "acq_rel", "seq_cst", "consume")
    if op == "load":
        return Reading(f"acquire.{scope}" if acquires else "load")
    if op == "store":
        return Reading(f"release.{scope}" if releases else "store")
    if releases:  # a read-modify-write
        return Reading(f"release.{scope}")
    return Reading(f"acquire.{scope}" if acquires else "store")


def ptx_reading(mnemonic: str) -> Reading | None:
    """One PTX mnemonic (`st.release.sys.global.u64`) read as a key; None
    when it orders nothing (a weak load or store, arithmetic)."""
    op, *qualifiers = mnemonic.split(".")
    said = set(qualifiers)
    scope = next((PTX_SCOPES[q] for q in qualifiers if q in PTX_SCOPES), "gpu")
    if op == "membar":
        return Reading(f"fence.{'sys' if 'sys' in said else 'cta' if 'cta' in said else 'gpu'}")
    if op == "fence":
        return Reading(f"fence.{scope}") if said & {"acq_rel", "sc"} else None
    if op in ("bar", "barrier") and said & {"sync", "red"}:
        return Reading("barrier.warp" if "warp" in said else "barrier.block")
    if op not in ("st", "ld", "red", "atom"):
        return None
    volatile = "volatile" in said
    if said & {"release", "acq_rel"} and op != "ld":
        return Reading(f"release.{scope}")
    if "acquire" in said and op in ("ld", "atom"):
        return Reading(f"acquire.{scope}")
    weak = op in ("st", "ld") and not said & {"relaxed", "volatile"}
    if weak:
        return None
    return Reading("load" if op == "ld" else "store", volatile)


def asm_mnemonics(literals: str) -> list[str]:
    """The mnemonics of the PTX instructions in an asm statement's string
    literals (their text, escapes as written)."""
    text = literals.replace("\\n", "\n").replace("\\t", " ")
    found = []
    for instruction in re.split(r"[;\n]", text):
        match = MNEMONIC.match(instruction)
        if match and not match[1].startswith("%"):
            found.append(match[1])
    return found
