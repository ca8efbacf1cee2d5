"""PTX as the publish contract reads it (docs/synchronization.md, "The publish
contract"): a module's functions, their instructions with the source line each
came from (`.loc`, `inlined_at`), the control-flow graph of each function, and
walks over the graph; what one instruction does to memory ordering is
invariants/sync/ptx_instruction.py.
Nothing here knows a site: invariants/sync/ptx_check.py holds the sites to it.

PTX this reader cannot follow (no line info, an indirect branch, an unknown
label, a function that never closes) raises PtxError with one line naming the
module and what is wrong: an unreadable module is never a silent pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from invariants.sync.ptx_dataflow import Bases, register_bases
from invariants.sync.ptx_divergence import Divergence
from invariants.sync.ptx_instruction import Instruction, Loc


class PtxError(ValueError):
    """PTX the contract checker cannot read; the message names the module."""


# Parsed modules kept per process: a target's variants (42 for afdep), some trees'.
MODULES_KEPT = 256

FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?\binlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
LABEL = re.compile(r"^\s*([$%\w.]+):\s*$")
HEADER = re.compile(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([$\w.]+)")
PREDICATE = re.compile(r"^@!?%?[\w$]+\s+")


@dataclass
class Function:
    name: str
    kind: str  # entry | func
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> next instruction
    _lines: dict[int, list[int | None]] = field(default_factory=dict, repr=False)
    _chains: dict[int, list[tuple[int, ...]]] = field(default_factory=dict, repr=False)

    @cached_property
    def successors(self) -> list[tuple[int, ...]]:
        result = []
        end = len(self.instructions)
        for index, ins in enumerate(self.instructions):
            after = (index + 1,) if index + 1 < end else ()
            if ins.base == "bra":
                target = self.labels[ins.operands.strip()]
                jump = (target,) if target < end else ()
                result.append(jump + after if ins.predicated else jump)
            elif ins.base in ("ret", "exit") and not ins.predicated:
                result.append(())
            else:
                result.append(after)
        return result

    @cached_property
    def predecessors(self) -> list[list[int]]:
        result: list[list[int]] = [[] for _ in self.instructions]
        for index, nexts in enumerate(self.successors):
            for successor in nexts:
                result[successor].append(index)
        return result

    @cached_property
    def back_edges(self) -> frozenset[tuple[int, int]]:
        """The edges that close a loop (to an instruction on the depth-first
        path from the entry to them): without them the graph has no cycle,
        and a walk stays in one iteration."""
        found, state = set(), [0] * len(self.instructions)  # 0 new, 1 on the path, 2 done
        stack = [(0, iter(self.successors[0]))] if self.instructions else []
        if stack:
            state[0] = 1
        while stack:
            index, nexts = stack[-1]
            following = next(nexts, None)
            if following is None:
                state[index] = 2
                stack.pop()
            elif state[following] == 1:
                found.add((index, following))
            elif state[following] == 0:
                state[following] = 1
                stack.append((following, iter(self.successors[following])))
        return frozenset(found)

    @cached_property
    def forward_successors(self) -> list[list[int]]:
        """The successors less the back edges (a loop's next iteration)."""
        back = self.back_edges
        return [[s for s in nexts if (i, s) not in back] for i, nexts in enumerate(self.successors)]

    @cached_property
    def forward_predecessors(self) -> list[list[int]]:
        """The predecessors less the back edges, so a walk back stays in one
        iteration: a load hoisted above its loop's wait is not excused by
        the wait of the iteration before."""
        back = self.back_edges
        return [
            [p for p in before if (p, i) not in back] for i, before in enumerate(self.predecessors)
        ]

    @cached_property
    def forward_reach(self) -> list[int | None]:
        """Per instruction, those some forward path from it leads to (no back
        edge: one iteration), as a bit set (bit k: instruction k), made once
        for every walk that asks; None where the forward graph still has a
        cycle (code the entry's depth-first search never reaches), which a
        walk must then take step by step."""
        count, nexts = len(self.instructions), self.forward_successors
        reach: list[int | None] = [None] * count
        state = [0] * count  # 0 new, 1 on the path, 2 done
        for root in range(count):
            if state[root]:
                continue
            state[root], stack = 1, [(root, iter(nexts[root]))]
            while stack:
                index, pending = stack[-1]
                following = next(pending, None)
                if following is None:
                    stack.pop()
                    state[index], bits = 2, 0
                    for successor in nexts[index]:
                        below = reach[successor] if state[successor] == 2 else None
                        if below is None:  # on the path (a cycle), or inexact below
                            bits = None
                            break
                        bits |= below | (1 << successor)
                    reach[index] = bits
                elif state[following] == 0:
                    state[following] = 1
                    stack.append((following, iter(nexts[following])))
        return reach

    @cached_property
    def bases(self) -> dict[str, Bases]:
        """Each register's parameter fields (invariants/sync/ptx_dataflow.py)."""
        return register_bases(self.instructions)

    @cached_property
    def divergence(self) -> Divergence:
        """Which of its barriers some threads skip (invariants/sync/ptx_divergence.py)."""
        return Divergence(self.instructions, self.successors)

    def lines_in(self, file_index: int) -> list[int | None]:
        """Each instruction's source line in file `file_index`: the innermost
        line of its inline chain there, else (a chain that never enters the
        file) the last line attributed before it."""
        if file_index not in self._lines:
            self._lines[file_index] = self._attribute(file_index)
        return self._lines[file_index]

    def chains_in(self, file_index: int) -> list[tuple[int, ...]]:
        """Each instruction's lines in file `file_index`, innermost first:
        where its code is, then each call site it was inlined at there (a
        publish in an inlined helper lies at its call site too)."""
        if file_index not in self._chains:
            self._chains[file_index] = [
                ins.loc.lines_in(file_index) if ins.loc else () for ins in self.instructions
            ]
        return self._chains[file_index]

    def _attribute(self, file_index: int) -> list[int | None]:
        lines, last = [], None
        for chain in self.chains_in(file_index):
            last = chain[0] if chain else last
            lines.append(last)
        return lines


@dataclass
class Module:
    name: str
    files: dict[int, str]
    functions: dict[str, Function]

    @cached_property
    def storing(self) -> set[str]:
        return storing_functions(self)

    @cached_property
    def acquiring(self) -> dict[str, int]:
        return acquiring_functions(self)

    def file_index(self, relative: str) -> int | None:
        """The `.file` entry of a source file, by its path relative to the
        sources (the PTX may come from a copy of the tree elsewhere)."""
        for index, path in self.files.items():
            if path == relative or path.endswith("/" + relative):
                return index
        return None


def parse_module(text: str, name: str) -> Module:
    """The functions of PTX `text`; `name` (the module's file) leads every error."""
    files: dict[int, str] = {}
    functions: dict[str, Function] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].split("//", 1)[0]
        file_entry = FILE.match(line)
        if file_entry:
            files[int(file_entry[1])] = file_entry[2]
        elif ".entry" in line or ".func" in line:
            index, function = _read_function(lines, index, name)
            if function is not None:
                functions[function.name] = function
            continue
        index += 1
    if not any(f.kind == "entry" for f in functions.values()):
        raise PtxError(f"{name}: no .entry function: not a kernel's PTX")
    _check_locations(name, files, functions)
    return Module(name, files, functions)


def _read_function(lines: list[str], start: int, name: str) -> tuple[int, Function | None]:
    """The function whose header starts at `start` and the line after it; a
    prototype (a header ended by `;`) gives None."""
    header, index = "", start
    while index < len(lines):
        code = lines[index].split("//", 1)[0]
        if "{" in code:
            break
        header += " " + code
        index += 1
        if code.strip().endswith(";"):
            return index, None
    match = HEADER.search(header + " " + lines[min(index, len(lines) - 1)])
    if match is None or index >= len(lines):
        raise PtxError(f"{name}:{start + 1}: a function header the checker cannot read")
    function = Function(match[2], match[1])
    return _read_body(lines, index, function, name), function


def _read_body(lines: list[str], start: int, function: Function, name: str) -> int:
    depth, statement, loc, begun = 1, "", None, start + 1
    callers: dict[Position, Position | None] = {}
    for index in range(start, len(lines)):
        code = lines[index].split("//", 1)[0].strip()
        if index == start:
            code = code.split("{", 1)[1].strip()  # the header's own line holds the body's `{`
        located = LOC.match(code)
        if located:
            loc = _located(located, callers)
            continue
        label = LABEL.match(code)
        if label and not statement:
            function.labels[label[1]] = len(function.instructions)
            continue
        depth += code.count("{") - code.count("}")
        code = code.replace("{", " ").replace("}", " ").strip() if not statement else code
        if not code:
            if depth == 0:
                return index + 1
            continue
        if not statement:
            begun = index + 1
        statement += " " + code
        if statement.rstrip().endswith(";"):
            _add_instruction(function, statement.strip().rstrip(";"), loc, begun, name)
            statement = ""
        if depth == 0:
            return index + 1
    raise PtxError(f"{name}: function {function.name} never closes")


Position = tuple[int, int, int]  # file, line, column


def _located(located: re.Match[str], callers: dict[Position, Position | None]) -> Loc:
    """The Loc a `.loc` line gives, its whole inline chain: nvcc writes only
    the nearest call site (`inlined_at`), after a `.loc` of that call site
    itself, so each position's caller is the one the function last gave it."""
    here = (int(located[1]), int(located[2]), int(located[3]))
    caller = (int(located[4]), int(located[5]), int(located[6])) if located[4] else None
    callers[here] = caller
    chain, seen = [here], {here}
    while caller is not None and caller not in seen:
        chain.append(caller)
        seen.add(caller)
        caller = callers.get(caller)
    return Loc(tuple((file, line) for file, line, _ in chain))


def _add_instruction(function: Function, text: str, loc: Loc | None, line: int, name: str):
    if text.startswith("."):
        return  # a declaration (.reg, .param, .local, .pragma ...)
    predicate = PREDICATE.match(text)
    body = text[predicate.end() :] if predicate else text
    opcode, _, operands = body.partition(" ")
    opcode = opcode.strip()
    guard = predicate[0].strip().lstrip("@!") if predicate else None
    if opcode.startswith("brx"):
        raise PtxError(f"{name}:{line}: indirect branch {opcode}: the checker cannot follow it")
    function.instructions.append(
        Instruction(opcode, operands.strip(), guard, loc, line)
    )


def _check_locations(name: str, files: dict[int, str], functions: dict[str, Function]) -> None:
    located = False
    for function in functions.values():
        for ins in function.instructions:
            if ins.base == "bra" and ins.operands.strip() not in function.labels:
                raise PtxError(
                    f"{name}:{ins.ptx_line}: branch to unknown label {ins.operands.strip()}"
                )
            if ins.loc is None:
                continue
            located = True
            for file_index, _ in ins.loc.chain:
                if file_index not in files:
                    raise PtxError(f"{name}:{ins.ptx_line}: .loc names file {file_index}, no .file")
    if not located:
        raise PtxError(f"{name}: no .loc line: compile with line info (-lineinfo)")


def read_module(path: Path) -> Module:
    """The module in `path`, parsed once per process for each text: a fault
    leaves most variants' PTX byte for byte the clean tree's (the PTX is
    cached by what each kernel includes), so a sweep parses those once."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise PtxError(f"{path.name}: cannot read it ({error})") from None
    return _parsed(text, path.name)


@lru_cache(maxsize=MODULES_KEPT)
def _parsed(text: str, name: str) -> Module:
    return parse_module(text, name)  # read only once made: one module serves every reader


def storing_functions(module: Module) -> set[str]:
    """Functions whose body (or a function it calls) stores to global memory."""
    return _closure(module, lambda ins: ins.is_data_store())


def acquiring_functions(module: Module) -> dict[str, int]:
    """Function -> the strongest scope rank its body (or a callee) acquires at:
    an acquire load or atom, or a relaxed load followed by a fence."""
    ranks = {name: _acquire_rank(f.instructions) for name, f in module.functions.items()}
    grew = True
    while grew:  # a caller acquires at least as strongly as what it calls
        grew = False
        for name, function in module.functions.items():
            called = [ranks.get(i.callee(), -1) for i in function.instructions if i.callee()]
            if max(called, default=-1) > ranks[name]:
                ranks[name], grew = max(called), True
    return {name: rank for name, rank in ranks.items() if rank >= 0}


def _acquire_rank(instructions: list[Instruction]) -> int:
    best, loaded = -1, -1
    for ins in instructions:
        best = max(best, ins.acquire_rank() or -1)
        loaded = max(loaded, ins.relaxed_load_rank() or -1)
        best = max(best, min(loaded, ins.fence_rank() or -1))
    return best


def _closure(module: Module, holds: Callable[[Instruction], bool]) -> set[str]:
    """Functions with an instruction `holds` for, or a call to one such."""
    found = {n for n, f in module.functions.items() if any(holds(i) for i in f.instructions)}
    grew = True
    while grew:
        grew = False
        for name, function in module.functions.items():
            if name not in found and any(i.callee() in found for i in function.instructions):
                found.add(name)
                grew = True
    return found
