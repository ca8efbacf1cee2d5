"""The conditions a call of the source lies under, and how far each can
differ between the threads of a block (docs/synchronization.md, "The publish
contract"): a barrier under a condition that differs per thread is one some
threads skip. Read as text, with comments and strings out of the way
(invariants/sync/functions.py's code_only); it knows no target's words.

- The conditions of a call: each brace block still open around it whose
  header is an `if`, `else`, `for`, `while` or `switch` (the whole header: a
  loop's trip count is its condition), and the headers of a single statement
  (`if (c) call();`). An `else` stands under its `if`'s condition.
- How far a condition spreads: as far as the most spread name or call in it.
  `threadIdx` differs per thread, `blockIdx` per block; a name spreads as far as what the function
  assigns or binds to it (`x = e`, `T x = e`, `for (T x = e; ...)`); a call
  as far as its arguments and what the called function returns (a function
  whose code reads `%laneid` differs per thread); a structured binding from a
  call (`auto [a, b] = f()`) takes each name from its element of f's
  `return {...}`. A per-thread value divided by 32 or warpSize, or shifted
  right by 5, is per warp. What goes through memory (`a[i] = e`) is not
  followed, as the PTX check does not follow it; nor are early exits
  (`if (c) return;`): the PTX check sees those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from invariants.sync.divergence import Spread
from invariants.sync.functions import definitions
from invariants.sync.statements import code_only

SPREAD_WORDS = {"threadIdx": Spread.PER_THREAD, "blockIdx": Spread.PER_BLOCK}
LANE_ASM = "%laneid"  # an inline asm read of the lane
CONTROL = re.compile(r"\b(if|while|for|switch)\b\s*(?:constexpr\b\s*)?\(")
# Warp collectives whose result every lane of the warp gets alike.
WARP_COLLECTIVE = re.compile(r"\b(?:__reduce_\w+_sync|__ballot_sync|__all_sync|__any_sync)\s*\(")
# A `for` header that declares its variable: `for (int i = start; ...`.
FOR_DECLARES = re.compile(
    r"for\s*\(\s*(?:const\s+)?(?:[A-Za-z_][\w:<>]*\s+)+(?P<name>[A-Za-z_]\w*)\s*=\s*"
    r"(?P<value>[^;,]*);"
)
# What follows a name it is assigned to: `=` or a compound `op=`, never `==`.
ASSIGNS = r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)"
IDENTIFIER = re.compile(r"(?<![\w.])(?<!->)[A-Za-z_]\w*")
PER_WARP = re.compile(r"(?:\.[xyz])?\s*(?:/\s*(?:32|warpSize)\b|>>\s*5\b)")
CALLS = re.compile(r"\s*(?:<[^;()]*>)?\s*\(")
RETURN = re.compile(r"\breturn\b([^;]*);")
KEYWORDS = {"if", "else", "for", "while", "switch", "return", "sizeof", "const", "constexpr",
            "auto", "int", "unsigned", "static_cast", "reinterpret_cast", "true",
            "false"}  # fmt: skip
DEPTH = 4  # calls followed into their definitions, at most


@dataclass(frozen=True)
class Condition:
    """A condition a call lies under: as written, its line, how far it spreads."""

    text: str  # e.g. `if (thread_idx == 0)`
    line: int
    spread: Spread


@dataclass(frozen=True)
class _Block:
    open: int  # offset of `{`
    close: int  # offset of the matching `}`
    header: str  # the statement text before `{`
    headers: tuple[tuple[str, int], ...]  # its conditions: (text, offset)


class ThreadConditions:
    """The conditions around calls in the files of one source tree; each
    file read, and each function's returns weighed, once."""

    def __init__(self, sources: Path):
        self.sources = Path(sources)
        self._files: dict[Path, tuple[str, list[_Block]]] = {}
        # By name and depth: what a call reaches depends on how deep it is
        # (DEPTH cuts it), so a result weighed deep is never one weighed near;
        # a recursive call is one deeper, so DEPTH ends recursion too.
        self._returns: dict[tuple[str, int], list[Spread]] = {}

    def around(self, path: Path, line: int, column: int) -> list[Condition]:
        """The conditions the call at `path`:`line` (1-based), `column` lies
        under, outermost first."""
        code, blocks = self._file(path)
        offset = _offset(code, line, column)
        around = [b for b in blocks if b.open < offset < b.close]
        body = next((b for b in around if not _scope_only(b.header)), None)
        if body is None:
            return []
        names = _Names(self, code[body.open : body.close], 0)
        found = [h for b in around for h in b.headers]
        start = _statement_start(code, offset)
        found += _headers(code, start, offset, blocks)
        return [
            Condition(text, code.count("\n", 0, at) + 1, names.in_loop(text).spread(_inside(text)))
            for text, at in found
        ]

    def _file(self, path: Path) -> tuple[str, list[_Block]]:
        if path not in self._files:
            code = _code(Path(path).read_text())
            self._files[path] = code, _blocks(code)
        return self._files[path]

    def returns(self, name: str, depth: int) -> list[Spread]:
        """How far what function `name` returns spreads: one entry per
        element of a returned brace list, else one; as weighed from `depth`
        calls in (none followed past DEPTH)."""
        key = (name, depth)
        if key in self._returns:
            return self._returns[key]
        returned: list[list[Spread]] = []
        for found in definitions(self.sources, name) if depth < DEPTH else ():
            if LANE_ASM in found.text[found.body : found.close]:
                returned.append([Spread.PER_THREAD])
                continue
            body = _code(found.text)[found.body : found.close]
            names = _Names(self, body, depth + 1)
            for value in RETURN.finditer(body):
                text = value[1].strip()
                listed = text.startswith("{") and text.endswith("}")
                elements = _split(text[1:-1]) if listed else [text]
                returned.append([names.spread(element) for element in elements])
        if len({len(each) for each in returned}) == 1:  # element by element
            self._returns[key] = [max(spreads) for spreads in zip(*returned, strict=True)]
        else:
            spreads = [spread for each in returned for spread in each]
            self._returns[key] = [max(spreads, default=Spread.UNIFORM)]
        return self._returns[key]


class _Names:
    """How far the names of one function's code spread."""

    def __init__(self, tree: ThreadConditions, body: str, depth: int):
        self.tree, self.body, self.depth = tree, body, depth
        self.known: dict[str, Spread] = {}

    def spread(self, expression: str) -> Spread:
        """As far as the most spread name or call of `expression`; a warp
        collective's result is one value for its whole warp."""
        worst = Spread.UNIFORM
        while collective := WARP_COLLECTIVE.search(expression):
            close = _closing(expression, collective.end() - 1)
            inside = self.spread(expression[collective.end() : close])
            worst = max(worst, min(inside, Spread.PER_WARP))
            expression = expression[: collective.start()] + expression[close + 1 :]
        for word in IDENTIFIER.finditer(expression):
            if word[0] in KEYWORDS:
                continue
            after = expression[word.end() :]
            if CALLS.match(after):
                spread = max(self.tree.returns(word[0], self.depth))
            else:
                spread = self.name(word[0])
            if spread == Spread.PER_THREAD and PER_WARP.match(after):
                spread = Spread.PER_WARP
            worst = max(worst, spread)
        return worst

    def in_loop(self, header: str) -> _Names:
        """These names as a `for` header sees them: a variable it declares
        is its own, spread by its initial value and its steps there, not by
        whatever another loop's variable of that name holds (two grid-stride
        loops over `token_idx`, one per thread and one per warp)."""
        declared = FOR_DECLARES.match(header)
        if declared is None:
            return self
        variable, initial = declared["name"], declared["value"]
        step = header[header.rfind(";") + 1 :]
        spread = self.spread(initial)
        for value in re.finditer(rf"\b{variable}{ASSIGNS}([^,]*)", step):
            spread = max(spread, self.spread(_until_unbalanced(value[1])))
        scoped = _Names(self.tree, self.body, self.depth)
        scoped.known = {**self.known, variable: spread}
        return scoped

    def name(self, name: str) -> Spread:
        if name in SPREAD_WORDS:
            return SPREAD_WORDS[name]
        if name not in self.known:
            self.known[name] = Spread.UNIFORM  # `x = x + 1` adds nothing
            self.known[name] = self._assigned(name)
        return self.known[name]

    def _assigned(self, name: str) -> Spread:
        worst = Spread.UNIFORM
        assigned = rf"(?<![\w.])(?<!->){name}{ASSIGNS}([^;]*)"
        for value in re.finditer(assigned, self.body):
            worst = max(worst, self.spread(_until_unbalanced(value[1])))
        for bound in re.finditer(r"\bauto\s*&{0,2}\s*\[([^\]]*)\]\s*=\s*([^;]*)", self.body):
            names = [n.strip() for n in bound[1].split(",")]
            if name not in names:
                continue
            call = re.match(r"\s*(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)\s*\(", bound[2])
            each = self.tree.returns(call[1], self.depth) if call else []
            if len(each) == len(names):
                worst = max(worst, each[names.index(name)], self.spread(bound[2][call.end() :]))
            else:
                worst = max(worst, self.spread(bound[2]))
        return worst


@lru_cache(maxsize=64)
def _code(text: str) -> str:
    return code_only(text)


def _offset(code: str, line: int, column: int) -> int:
    start = 0
    for _ in range(line - 1):
        start = code.index("\n", start) + 1
    return start + column


def _statement_start(code: str, at: int) -> int:
    """Where the statement holding offset `at` starts: after the last `;`,
    `{` or `}` before it outside parentheses."""
    depth = 0
    for index in range(at - 1, -1, -1):
        char = code[index]
        if char in ")]":
            depth += 1
        elif char in "([":
            depth -= 1
        elif char in ";{}" and depth <= 0:
            return index + 1
    return 0


def _headers(code: str, start: int, end: int, blocks: list[_Block]) -> list[tuple[str, int]]:
    """The conditions of the statement text code[start:end]: its control
    headers, and for a leading `else`, the conditions of its `if`."""
    text, found = code[start:end], []
    if re.match(r"\s*else\b", text):
        found += _else_of(code, start, blocks)
    for control in CONTROL.finditer(text):
        close = _closing(text, control.end() - 1)
        condition = text[control.end() : close].strip()
        found.append((f"{control[1]} ({condition})", start + control.start()))
    return found


def _else_of(code: str, start: int, blocks: list[_Block]) -> list[tuple[str, int]]:
    """The conditions of the `if` whose `else` starts at `start`."""
    before = start - 1
    closed = next((b for b in blocks if b.close == before), None)
    if closed is not None:
        found = list(closed.headers)
    else:
        found = _headers(code, _statement_start(code, before), before, blocks)
    return [(text if text.startswith("else") else f"else of {text}", at) for text, at in found]


def _blocks(code: str) -> list[_Block]:
    """Every brace block of the code, with its header's conditions, in order of opening."""
    pairs, stack = [], []
    for index, char in enumerate(code):
        if char == "{":
            stack.append(index)
        elif char == "}" and stack:
            pairs.append((stack.pop(), index))
    blocks: list[_Block] = []
    for opened, closed in sorted(pairs):  # in order: an `else` finds its `if`'s block made
        start = _statement_start(code, opened)
        headers = tuple(_headers(code, start, opened, blocks))
        blocks.append(_Block(opened, closed, code[start:opened].strip(), headers))
    return blocks


def _scope_only(header: str) -> bool:
    """A namespace, a linkage block or a type: no function's body."""
    return bool(re.match(r"(?:namespace|extern|struct|class|union|enum)\b", header))


def _inside(condition: str) -> str:
    return condition[condition.index("(") + 1 : -1] if "(" in condition else ""


def _closing(text: str, at: int) -> int:
    depth = 0
    for index in range(at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return len(text)


def _until_unbalanced(text: str) -> str:
    """`text` up to the first `)` it did not open: an assignment in a `for`
    header's step (`i += step) { ...`) ends there, not at the next `;`."""
    depth = 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth < 0:
            return text[:index]
    return text


def _split(text: str) -> list[str]:
    """The elements of a list, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char in "{[(<") - (char in "}])>")
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]
