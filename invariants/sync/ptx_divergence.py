"""The barriers of a PTX function that some threads skip
(docs/synchronization.md, "The publish contract"): a barrier counts for the
publish contract only where every thread of its group reaches it.

Two steps, each simple and stated:

- every register's spread (invariants/sync/divergence.py): `%tid` and
  `%laneid` differ per thread, `%warpid` per warp, `%ctaid` per block, and a
  result spreads as far as its operands and guard do (flow-insensitive, to a
  fixed point; a load spreads as its address does). A shift right by 5 or
  more, a division by a multiple of 32, an `and` keeping no lane bit or a
  bit-field from bit 5 on narrows a per-thread value to per-warp; so do vote
  and redux, and a shuffle from a lane the warp agrees on. Values that differ only through
  memory or through which branch assigned them are not followed.
- a barrier is skipped by some threads when it is control dependent,
  directly or through other branches, on a conditional branch (or a
  predicated ret/exit) whose guard spreads: some path from that branch
  reaches the function's end without the barrier, and another meets it on
  every way out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from invariants.sync.divergence import Spread
from invariants.sync.ptx_instruction import Instruction

SPECIAL = {
    "%tid": Spread.PER_THREAD,
    "%laneid": Spread.PER_THREAD,
    "%warpid": Spread.PER_WARP,
    "%ctaid": Spread.PER_BLOCK,
}
REGISTER = re.compile(r"%[A-Za-z_$][\w$]*(?:\.[xyzw])?")
NO_RESULT = {"st", "red", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "trap",
             "call", "nanosleep", "prefetch", "prefetchu"}  # fmt: skip
WARP_WIDE = ("vote", "redux")  # one result for the whole warp
LANE_BITS = 5  # a warp is 32 threads of consecutive index


@dataclass(frozen=True)
class Origin:
    """How far a register spreads, and the special register it comes from."""

    spread: Spread
    source: str  # e.g. %tid.x


@dataclass(frozen=True)
class Skip:
    """A barrier some threads skip: the branch they part at and how far its guard spreads."""

    branch: int  # the instruction index of the branch (or predicated ret/exit)
    origin: Origin


def _immediate(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _narrows(ins: Instruction, operands: list[str]) -> bool:
    """Whether the instruction drops the lane bits of its first source."""
    last = _immediate(operands[-1]) if len(operands) > 2 else None
    if ins.base == "bfe" and len(operands) == 4:
        last = _immediate(operands[2])
        return last is not None and last >= LANE_BITS
    if last is None:
        return False
    if ins.base == "shr":
        return last >= LANE_BITS
    if ins.base == "div":
        return last != 0 and last % (1 << LANE_BITS) == 0
    if ins.base == "and":
        return last & ((1 << LANE_BITS) - 1) == 0
    return False


def _source(register: str, spreads: dict[str, Origin]) -> Origin | None:
    special = SPECIAL.get(register.split(".")[0])
    return Origin(special, register) if special is not None else spreads.get(register)


def _result(ins: Instruction, operands: list[str], spreads: dict[str, Origin]) -> Origin | None:
    """How far the instruction's result spreads (None: uniform)."""
    registers = [r for text in operands[1:] for r in REGISTER.findall(text)]
    inputs = [_source(r, spreads) for r in [*registers, *filter(None, [ins.guard])]]
    inputs = [origin for origin in inputs if origin is not None]
    if not inputs:
        return None
    worst = max(inputs, key=lambda origin: origin.spread)
    narrow = ins.base in WARP_WIDE or _narrows(ins, operands)
    if ins.base == "shfl" and "idx" in ins.parts and len(operands) > 2:
        lanes = [_source(r, spreads) for r in REGISTER.findall(operands[2])]
        narrow = all(o is None or o.spread < Spread.PER_THREAD for o in lanes)
    if narrow and worst.spread > Spread.PER_WARP:
        return Origin(Spread.PER_WARP, worst.source)
    return worst


def register_spreads(code: Sequence[Instruction]) -> dict[str, Origin]:
    """Every register that does not hold one value across the block, and how far it spreads."""
    results = []  # (instruction, operands, the registers it writes)
    for ins in code:
        operands = ins.operands_split
        if ins.base not in NO_RESULT and operands and not operands[0].startswith("["):
            results.append((ins, operands, REGISTER.findall(operands[0])))
    spreads: dict[str, Origin] = {}
    grew = True
    while grew:
        grew = False
        for ins, operands, written in results:
            origin = _result(ins, operands, spreads)
            for register in written if origin is not None else ():
                if register not in spreads or spreads[register].spread < origin.spread:
                    spreads[register], grew = origin, True
    return spreads


def register_sources(code: Sequence[Instruction]) -> dict[str, frozenset[str]]:
    """Every register's special registers (`%ctaid.x`, `%tid.x` ...), through
    every operand and guard, none narrowed, but not through memory: which
    thread it is computed from, not what data it holds (a mask loaded at a
    per-block address is data, not the block's index)."""
    results = []
    for ins in code:
        operands = ins.operands_split
        if ins.base in ("ld", "atom", "shfl", "vote", "redux"):
            continue
        if ins.base not in NO_RESULT and operands and not operands[0].startswith("["):
            reads = [r for text in operands[1:] for r in REGISTER.findall(text)]
            results.append((reads + list(filter(None, [ins.guard])), REGISTER.findall(operands[0])))
    sources: dict[str, frozenset[str]] = {}
    grew = True
    while grew:
        grew = False
        for reads, written in results:
            found = frozenset(
                r for r in reads if r.split(".")[0] in SPECIAL
            ).union(*(sources.get(r, frozenset()) for r in reads))
            for register in written if found else ():
                if not found <= sources.get(register, frozenset()):
                    sources[register], grew = sources.get(register, frozenset()) | found, True
    return sources


class Divergence:
    """Which barriers of one function some threads skip, each found once when asked."""

    def __init__(self, code: Sequence[Instruction], successors: Sequence[tuple[int, ...]]):
        self.code, self.successors = code, successors
        self.predecessors: list[list[int]] = [[] for _ in code]
        for index, nexts in enumerate(successors):
            for following in nexts:
                self.predecessors[following].append(index)
        self.exits = [
            i for i, ins in enumerate(code) if not successors[i] or (ins.predicated and _exits(ins))
        ]
        self._spreads: dict[str, Origin] | None = None
        self._sources: dict[str, frozenset[str]] | None = None
        self._controlling: dict[int, list[int]] = {}
        self._skips: dict[int, Skip | None] = {}

    def skip(self, barrier: int) -> Skip | None:
        """How threads part before instruction `barrier`: the most spread
        branch it depends on (None: every thread that enters the function reaches it)."""
        if barrier not in self._skips:
            self._skips[barrier] = self._worst(barrier)
        return self._skips[barrier]

    def _worst(self, barrier: int) -> Skip | None:
        worst = None
        for branch in self.branches(barrier):
            origin = self._guard(branch)
            if origin is not None and (worst is None or origin.spread > worst.origin.spread):
                worst = Skip(branch, origin)
        return worst

    def branches(self, node: int) -> list[int]:
        """Every conditional branch `node` is control dependent on, directly or
        through other branches, nearest first."""
        found, seen, todo = [], {node}, [node]
        while todo:
            for branch in self._controllers(todo.pop(0)):
                if branch not in seen:
                    seen.add(branch)
                    found.append(branch)
                    todo.append(branch)
        return found

    def parting(self, node: int, spreads: tuple[Spread, ...]) -> Skip | None:
        """The nearest branch `node` depends on whose guard reads a special
        register of one of `spreads` (through any operand, the worst aside):
        `tid == 0 && ctaid == 0` parts blocks, though it differs per thread."""
        if self._sources is None:
            self._sources = register_sources(self.code)
        for branch in self.branches(node):
            guard = self.code[branch].guard
            for source in sorted(self._sources.get(guard, ())):
                spread = SPECIAL[source.split(".")[0]]
                if spread in spreads:
                    return Skip(branch, Origin(spread, source))
        return None

    def _guard(self, branch: int) -> Origin | None:
        if self._spreads is None:
            self._spreads = register_spreads(self.code)
        return _source(self.code[branch].guard, self._spreads)

    def _controllers(self, node: int) -> list[int]:
        """The conditional branches `node` is directly control dependent on (found once each)."""
        if node not in self._controlling:
            self._controlling[node] = self._find_controllers(node)
        return self._controlling[node]

    def _find_controllers(self, node: int) -> list[int]:
        """The predicated branches and exits x from which some path reaches an
        exit without passing `node` (node does not post-dominate x), with a
        successor from which every path that reaches an exit passes `node`
        and some path reaches it (node post-dominates it, or it reaches node
        and no exit): read from the post-dominator tree, made once."""
        tree, successors = self._post_dominators, self.successors
        reaching: set[int] | None = None

        def avoids(index: int) -> bool:  # some path from index reaches an exit without node
            return index != node and tree.reaches_exit(index) and not tree.dominates(node, index)

        def leads_to_node(index: int) -> bool:  # index not avoiding, and it reaches node
            nonlocal reaching
            if avoids(index):
                return False
            if index == node or tree.reaches_exit(index):
                return True  # every path to an exit passes node, and there is one
            if reaching is None:
                reaching = _backward(self.predecessors, [node], None)
            return index in reaching

        return [
            x for x in self._conditional if avoids(x) and any(map(leads_to_node, successors[x]))
        ]

    @cached_property
    def _conditional(self) -> list[int]:
        """The predicated branches and exits: the only instructions that can control another."""
        return [
            x
            for x, ins in enumerate(self.code)
            if ins.predicated and (ins.base == "bra" or _exits(ins))
        ]

    @cached_property
    def _post_dominators(self) -> PostDominators:
        return PostDominators(self.successors, self.predecessors, self.exits)


class PostDominators:
    """The post-dominator tree of a function's instructions, over a virtual
    exit that every exit instruction leads to (Cooper, Harvey and Kennedy's
    iterative algorithm on the reversed graph), with each node's interval in
    a depth-first numbering of the tree: `dominates(a, b)` in constant time."""

    def __init__(self, successors, predecessors, exits: list[int]) -> None:
        count = len(successors)
        root = count  # the virtual exit
        exiting = set(exits)
        # The reversed graph: from the root to the exits, from a node to its predecessors.
        order, state, stack = [], [0] * (count + 1), [(root, iter(exits))]
        state[root] = 1
        while stack:
            index, pending = stack[-1]
            following = next(pending, None)
            if following is None:
                stack.pop()
                order.append(index)
            elif not state[following]:
                state[following] = 1
                stack.append((following, iter(predecessors[following])))
        number = {index: n for n, index in enumerate(order)}  # postorder numbers
        idom: dict[int, int] = {root: root}

        def intersect(a: int, b: int) -> int:
            while a != b:
                while number[a] < number[b]:
                    a = idom[a]
                while number[b] < number[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for index in reversed(order[:-1]):  # reverse postorder, the root aside
                after = [s for s in successors[index] if s in idom]
                if index in exiting:
                    after.append(root)
                new = after[0]
                for other in after[1:]:
                    new = intersect(other, new)
                if idom.get(index) != new:
                    idom[index], changed = new, True
        children: dict[int, list[int]] = {}
        for index, parent in idom.items():
            if index != root:
                children.setdefault(parent, []).append(index)
        self.enter, self.leave, clock, stack = {}, {}, 0, [(root, False)]
        while stack:
            index, done = stack.pop()
            if done:
                self.leave[index] = clock
                continue
            self.enter[index] = clock
            clock += 1
            stack.append((index, True))
            stack.extend((child, False) for child in children.get(index, ()))

    def reaches_exit(self, index: int) -> bool:
        return index in self.enter

    def dominates(self, a: int, b: int) -> bool:
        """Whether every path from `b` to an exit passes `a` (`a` == `b` too);
        False where either reaches none."""
        if a not in self.enter or b not in self.enter:
            return False
        return self.enter[a] <= self.enter[b] and self.leave[b] <= self.leave[a]


def _exits(ins: Instruction) -> bool:
    return ins.base in ("ret", "exit")


def _backward(predecessors: list[list[int]], starts: list[int], avoid: int | None) -> set[int]:
    """The instructions from which some path reaches one of `starts` without passing `avoid`."""
    seen = set(starts)
    stack = list(starts)
    while stack:
        for previous in predecessors[stack.pop()]:
            if previous != avoid and previous not in seen:
                seen.add(previous)
                stack.append(previous)
    return seen
