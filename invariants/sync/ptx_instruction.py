"""One PTX instruction as the publish contract reads it (docs/synchronization.md,
"The publish contract"): its opcode and operands, the source line it came from
(`.loc`, `inlined_at`), and what it does to memory ordering: a data store or
load, a release, an acquire or a fence at a scope, a barrier of a group, a
call. invariants/sync/ptx_read.py reads instructions out of a module's text;
this module only classifies one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from invariants.sync.sites import Group

# PTX scopes by strength: a release at `sys` also releases at `gpu` and `cta`.
SCOPE_RANK = {"cta": 1, "cluster": 2, "gpu": 3, "sys": 4}  # all true: `rank or -1` reads None
SEMANTICS = ("weak", "relaxed", "acquire", "release", "acq_rel", "volatile", "sc", "mmio")
LOCAL_SPACES = ("shared", "shared::cta", "shared::cluster", "local", "param", "const")
FULL_WARP_MASKS = ("-1", "0xffffffff", "0xFFFFFFFF", "4294967295")

CALLEE = re.compile(r"^\s*(?:\([^)]*\)\s*,\s*)?([$\w.]+)")


@dataclass(frozen=True)
class Loc:
    """Where an instruction came from: its own source position, then each
    call site it was inlined at, innermost first, as (file, line) pairs."""

    chain: tuple[tuple[int, int], ...]

    def lines_in(self, file_index: int) -> tuple[int, ...]:
        """The lines of its chain in file `file_index`, innermost first."""
        return tuple(line for file, line in self.chain if file == file_index and line > 0)


def split_operands(operands: str) -> list[str]:
    """The operands, split at the commas outside braces and brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(operands):
        depth += (char in "{[(") - (char in "}])")
        if char == "," and depth == 0:
            parts.append(operands[start:index].strip())
            start = index + 1
    return [*parts, operands[start:].strip()] if operands.strip() else parts


@dataclass(frozen=True)
class Instruction:
    opcode: str  # e.g. st.release.sys.global.u64
    operands: str
    guard: str | None  # the predicate register of `@%p` / `@!%p`; None: unpredicated
    loc: Loc | None
    ptx_line: int

    @property
    def predicated(self) -> bool:
        return self.guard is not None

    @cached_property
    def operands_split(self) -> list[str]:
        """The operands, split at the commas outside brackets (read once: every walk reads them)."""
        return split_operands(self.operands)

    @cached_property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.opcode.split("."))

    @property
    def base(self) -> str:
        return self.parts[0]

    def _space(self) -> str | None:
        return next((p for p in self.parts if p in ("global", *LOCAL_SPACES)), None)

    def semantics(self) -> str:
        """relaxed, acquire, release, ...; volatile reads as relaxed at sys, as PTX defines it."""
        sem = next((p for p in self.parts if p in SEMANTICS), None)
        if sem is None:
            return "relaxed" if self.base in ("atom", "red") else "weak"
        return "relaxed" if sem == "volatile" else sem

    def scope(self) -> str | None:
        scope = next((p for p in self.parts if p in SCOPE_RANK), None)
        if scope is None and "volatile" in self.parts:
            return "sys"
        if scope is None and self.base in ("atom", "red"):
            return "gpu"  # their default scope
        return scope

    def render(self) -> str:
        """The opcode as a finding names it: st.release.sys, st.relaxed.sys, st.weak."""
        scope = self.scope()
        return ".".join(p for p in (self.base, self.semantics(), scope) if p)

    def is_data_store(self) -> bool:
        """A store to global or generic memory: what a release must order."""
        if self.base in ("st", "red", "atom"):
            return self._space() not in LOCAL_SPACES and "async" not in self.parts
        if self.base == "cp" and "global" in self.parts:
            shared = [i for i, p in enumerate(self.parts) if p.startswith("shared")]
            return not shared or self.parts.index("global") < shared[0]
        return False

    def is_data_load(self) -> bool:
        """A coherent load of global or generic memory (not the read-only
        `.nc` path): what a wait's consumers must not do before the barrier."""
        if self.base == "atom":
            return self._space() not in LOCAL_SPACES
        if self.base == "ld":
            return self._space() not in LOCAL_SPACES and "nc" not in self.parts
        if self.base == "cp" and "global" in self.parts:
            shared = [i for i, p in enumerate(self.parts) if p.startswith("shared")]
            return bool(shared) and shared[0] < self.parts.index("global")
        return False

    def is_global_load(self) -> bool:
        """A load of global or generic memory, the read-only `.nc` path included."""
        if self.base in ("ld", "atom"):
            return self._space() not in LOCAL_SPACES
        return False

    def non_coherent(self) -> bool:
        """A load on the read-only path (`ld.global.nc`, `__ldg`): not coherent
        with another thread's writes during the kernel, whatever it acquired."""
        return self.base == "ld" and "nc" in self.parts

    def release_rank(self) -> int | None:
        """The scope rank of a store/red/atom with release semantics."""
        if self.base in ("st", "red", "atom") and self.semantics() in ("release", "acq_rel"):
            return SCOPE_RANK[self.scope() or "gpu"]
        return None

    def strong_rank(self) -> int | None:
        """The scope rank of a store, red or atom that is relaxed or stronger
        (volatile: relaxed at sys); None for a weak store, which no fence
        makes a publish (it is not morally strong with any reader)."""
        if self.base not in ("st", "red", "atom") or self.semantics() == "weak":
            return None
        return SCOPE_RANK[self.scope() or "gpu"]

    def acquire_rank(self) -> int | None:
        if self.base in ("ld", "atom") and self.semantics() in ("acquire", "acq_rel"):
            return SCOPE_RANK[self.scope() or "gpu"]
        return None

    def relaxed_load_rank(self) -> int | None:
        if self.base == "ld" and self.semantics() == "relaxed":
            return SCOPE_RANK[self.scope() or "gpu"]
        return None

    def fence_rank(self) -> int | None:
        """fence.acq_rel / fence.sc (and membar) order both ways at their scope;
        fence.proxy and the like order nothing between threads."""
        if self.predicated:
            return None
        if self.base == "membar":
            return SCOPE_RANK.get({"gl": "gpu"}.get(self.parts[-1], self.parts[-1]))
        if self.base != "fence" or not set(self.parts[1:]) <= {"sc", "acq_rel", *SCOPE_RANK}:
            return None
        scope = next((p for p in self.parts if p in SCOPE_RANK), None)
        return SCOPE_RANK[scope] if scope else None

    def barrier(self) -> Group | None:
        """The group an unpredicated barrier holds: bar.warp.sync over the whole
        warp, barrier 0 of the CTA with no thread count (__syncthreads), or a
        cluster barrier's wait (every thread of every CTA of the cluster
        arrived: a barrier of the block, the largest group the grammar names
        that it holds)."""
        if self.predicated or self.base not in ("bar", "barrier"):
            return None
        args = [a.strip() for a in self.operands.split(",") if a.strip()]
        if self.parts[1:3] == ("warp", "sync"):
            return Group.WARP if args and args[0] in FULL_WARP_MASKS else None
        if self.parts[1:3] == ("cluster", "wait"):
            return Group.BLOCK
        if "arrive" in self.parts or "warp" in self.parts:
            return None
        if "sync" in self.parts and args == ["0"]:
            return Group.BLOCK
        if "red" in self.parts and len(args) == 3 and args[1] == "0":
            return Group.BLOCK
        return None

    def callee(self) -> str | None:
        if self.base != "call":
            return None
        match = CALLEE.match(self.operands)
        return match[1] if match else None
