"""Which buffer a PTX access reaches (docs/synchronization.md, "The guarded
data"): every register's *bases*, the kernel-parameter fields its pointer is
built from, so that the publish contract knows which loads read the data a
site guards without a list per kernel.

- A field is a chain of loads at constant offsets from a kernel parameter:
  `ld.param [k_param_2+16]` (or through `mov.b64 %rd4, k_param_2`, the
  parameter's address) is `Field(2, (16,))`, and a load at `[r+48]`
  where `r` holds that field is `Field(2, (16, 48))`: afdep's
  `params->off_combine_rows` is `Field(0, (0, 120))`, flashinfer's
  `params.workspace[3]` `Field(0, (X, 24))`. Chains stop at MAX_CHAIN loads
  (a pointer chased through a list carries as it is).
- A base carries through what builds a pointer: an add or sub, a move, a
  cvta, a selp's two values, a mad's addend; a value loaded from a pointer
  (a peer table's entry) carries that pointer's bases. Not through what
  builds an index (mul, shl, cvt, and ...): `peers[rank] + off_rows + i * 16`
  has the bases {peers, off_rows}, whatever `rank` and `i` are.
- A pointer kept in the local frame keeps its bases: each 8-byte slot holds
  what was stored there at a constant offset, and a load with a run-time
  index (`comm_bufs[params.rank]`) reads every slot from its array's start
  to the next array's (the starts other indexed accesses use).
- Flow-insensitive, to a fixed point, like the divergence spreads; shared
  memory is not followed (a pointer kept there loses its bases: its loads
  are not taken for guarded ones).

The guarded data of a store site is then the bases its data stores reach that
the flags its releases publish do not (`guarded_bases`): for afdep's combine
rows, {peer_bases, off_combine_rows} less {peer_bases, off_combine_flags}.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from invariants.sync.ptx_divergence import REGISTER, _immediate
from invariants.sync.ptx_instruction import LOCAL_SPACES, Instruction

ADDRESS = re.compile(r"^\[\s*([^\]+\s]+)\s*(?:\+\s*(-?\d+))?\s*\]$")
PARAMETER = re.compile(r"_param_(\d+)$")
DEPOT = re.compile(r"__local_depot\d+")
# The operands (by index, the result being 0) that carry a pointer's bases.
CARRIES = {"add": (1, 2), "sub": (1,), "mov": (1,), "cvta": (1,), "selp": (1, 2), "mad": (3,)}


@dataclass(frozen=True, order=True)
class Field:
    """Kernel parameter `parameter`, then each load's constant offset (in
    bytes) from what the load before it read."""

    parameter: int
    offsets: tuple[int, ...]

    def __str__(self) -> str:
        return f"parameter {self.parameter}" + "".join(f"[+{o}]" for o in self.offsets)


MAX_CHAIN = 4  # loads followed from a parameter
SLOT = 8  # bytes of a pointer kept in the local frame
LAST_ARRAY_SLOTS = 64  # slots an indexed load reads from the frame's last array

Bases = frozenset[Field]


def address(ins: Instruction) -> tuple[str, int | None] | None:
    """The register (or parameter name) and offset (None: none written) of
    the access's `[...]` operand."""
    operand = next((o for o in ins.operands_split if o.startswith("[")), None)
    found = ADDRESS.match(operand.strip()) if operand else None
    if found is None:
        return None
    return found[1], None if found[2] is None else int(found[2])


def _loaded(ins: Instruction, where: tuple[str, int | None], bases: dict[str, Bases]) -> Bases:
    """The bases of what a load reads from `where`: each field its address
    holds, one load further (a parameter itself, read from param space)."""
    name, offset = where
    parameter = PARAMETER.search(name)
    if parameter:  # ld.param [k_param_2+16]
        return frozenset({Field(int(parameter[1]), (offset or 0,))})
    if any(space in ins.parts for space in LOCAL_SPACES) and "param" not in ins.parts:
        return frozenset()
    return frozenset(
        Field(f.parameter, f.offsets + (offset or 0,)) if len(f.offsets) < MAX_CHAIN else f
        for f in bases.get(name, frozenset())
    )


def frame_addresses(code: Sequence[Instruction]) -> dict[str, tuple[int, bool]]:
    """Each register holding an address in the function's local frame
    (`mov.u64 %SPL, __local_depot0`, then adds): its byte offset in the
    frame, and whether a run-time index was added (an element of an array
    kept there, like flashinfer's `comm_bufs[params.rank]`). In order: a
    frame address is made before it is used."""
    frame: dict[str, tuple[int, bool]] = {}
    for ins in code:
        operands = ins.operands_split
        if len(operands) < 2 or ins.base not in ("mov", "add"):
            continue
        if ins.base == "mov" and (DEPOT.fullmatch(operands[1]) or operands[1] in frame):
            frame[operands[0]] = frame.get(operands[1], (0, False))
        elif ins.base == "add" and len(operands) == 3:
            base, added = operands[1:]
            if base not in frame:
                base, added = added, base
            if base in frame:
                offset, indexed = frame[base]
                step = _immediate(added)
                indexed = indexed or step is None
                frame[operands[0]] = (offset + (step or 0), indexed)
    return frame


def _frame_cells(where, frame, arrays: list[int]) -> list[int] | None:
    """The frame offsets an access at `where` may touch: its own, or, with an
    index, every slot from its array's start to the next array's (`arrays`:
    the starts the indexed accesses use); None: not the frame."""
    if where is None or where[0] not in frame:
        return None
    offset, indexed = frame[where[0]]
    start = offset + (where[1] or 0)
    if not indexed:
        return [start]
    end = next((a for a in arrays if a > start), start + SLOT * LAST_ARRAY_SLOTS)
    return list(range(start, end, SLOT))


def register_bases(code: Sequence[Instruction]) -> dict[str, Bases]:
    """Every register that holds (part of) a pointer built from parameter
    fields, and those fields; a pointer kept in the local frame keeps them
    (each 8-byte slot holds what was stored there)."""
    frame = frame_addresses(code)
    steps = []  # (instruction, operands, where it loads from, registers written)
    kept = []  # (frame slot, the register stored there)
    for ins in code:
        operands = ins.operands_split
        where = address(ins) if ins.base in ("ld", "st") else None
        if ins.base == "st" and "local" in ins.parts and len(operands) == 2 and where:
            at = frame.get(where[0])
            if at is not None and not at[1]:
                kept.append((at[0] + (where[1] or 0), operands[1]))
            continue
        if not operands or operands[0].startswith("[") or ins.base not in {"ld", *CARRIES}:
            continue
        if ins.base == "ld" and where is None:
            continue
        steps.append((ins, operands, where, REGISTER.findall(operands[0])))
    indexed = [w for _, _, w, _ in steps if w and frame.get(w[0], (0, False))[1]]
    arrays = sorted({frame[w[0]][0] + (w[1] or 0) for w in indexed})
    bases: dict[str, Bases] = {}
    slots: dict[int, Bases] = {}
    grew = True
    while grew:
        grew = False
        for slot, register in kept:
            found = bases.get(register, frozenset())
            if not found <= slots.get(slot, frozenset()):
                slots[slot], grew = slots.get(slot, frozenset()) | found, True
        for ins, operands, where, written in steps:
            cells = _frame_cells(where, frame, arrays) if "local" in ins.parts else None
            if cells is not None:
                found = frozenset().union(*(slots.get(c, frozenset()) for c in cells))
            elif where is not None:
                found = _loaded(ins, where, bases)
            else:
                carried = [operands[i] for i in CARRIES[ins.base] if i < len(operands)]
                found = frozenset().union(
                    *(bases.get(r, frozenset()) for text in carried for r in REGISTER.findall(text))
                )
                # a parameter's address taken (`mov.b64 %rd4, k_param_0`): loads through it follow
                found |= {Field(int(p[1]), ()) for t in carried if (p := PARAMETER.search(t))}
            for register in written:
                known = bases.get(register, frozenset())
                if not found <= known:
                    bases[register], grew = known | found, True
    return bases


def access_bases(ins: Instruction, bases: dict[str, Bases]) -> Bases:
    """The fields the address of a load or store is built from."""
    where = address(ins)
    return frozenset() if where is None else bases.get(where[0], frozenset())


def guarded_bases(stored: Iterable[Bases], published: Iterable[Bases]) -> Bases:
    """A store site's guarded data: the bases its data stores reach that the
    flags published for it do not."""
    return frozenset().union(*stored) - frozenset().union(*published)
