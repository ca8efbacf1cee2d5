"""A source file read as lines for proposing sites: each line's brace depth,
where a statement starts and ends, and the shortest text on a line (or from
it on) that is found exactly once in the file, an anchor."""

from __future__ import annotations

import re
from dataclasses import dataclass

from invariants.sync.statements import line_of, occurrences

ANCHOR_LINES = 8  # an anchor grows this many lines at most before giving up
LOOP = re.compile(r"^(?:while|for|do)\b")


@dataclass(frozen=True)
class Lines:
    """One file: its raw lines and its code lines (comments and strings
    blanked), 1-based through `raw(n)` and `code(n)`."""

    text: str
    code_text: str

    def __post_init__(self) -> None:
        depth, parens, before, after = 0, 0, [0], [0]
        for line in self.code_text.split("\n"):
            before.append(depth)
            depth += line.count("{") - line.count("}")
            parens += line.count("(") - line.count(")")
            after.append(depth if parens == 0 else -1)  # -1: inside a parenthesis
        object.__setattr__(self, "_raw", [""] + self.text.split("\n"))
        object.__setattr__(self, "_code", [""] + self.code_text.split("\n"))
        object.__setattr__(self, "_before", before)
        object.__setattr__(self, "_after", after)

    def raw(self, number: int) -> str:
        """Line `number` as written ("" past either end: unbalanced sources walk there)."""
        return self._raw[number] if 0 < number < len(self._raw) else ""

    def code(self, number: int) -> str:
        return self._code[number].strip() if 0 < number < len(self._code) else ""

    def depth(self, number: int) -> int:
        """The brace depth at the start of line `number`."""
        return self._before[number] if 0 <= number < len(self._before) else 0

    @property
    def count(self) -> int:
        return len(self._raw) - 1

    def previous_code(self, number: int) -> int:
        """The nearest line before `number` with code on it (0: none)."""
        number -= 1
        while number > 0 and not self.code(number):
            number -= 1
        return number

    def next_code(self, number: int) -> int:
        number += 1
        while number <= self.count and not self.code(number):
            number += 1
        return number

    def statement_end(self, start: int) -> int:
        """The last line of the statement that starts on `start`: back at its
        depth, out of every parenthesis, after a `;` or `}` that no `else`
        (or a do-loop's `while`) continues."""
        depth, number = self.depth(start), start
        while number <= self.count:
            code = self.code(number)
            if self._after[number] == depth and code.endswith((";", "}")):
                after = self.code(self.next_code(number)) if number < self.count else ""
                continues = after.startswith("else") or (
                    after.startswith("while") and self.code(start).startswith("do")
                )
                if not continues:
                    return number
            if self._after[number] != -1 and self._after[number] < depth:
                return number
            number += 1
        return self.count

    def statement_start(self, number: int, depth: int) -> int:
        """The first line of the statement at brace depth `depth` that holds line `number`."""
        while number > 1:
            previous = self.previous_code(number)
            if previous == 0:
                break
            ends = self.code(previous).endswith((";", "{", "}", ":"))
            if self.depth(number) <= depth and ends and self._after[previous] != -1:
                break
            number = previous
        return number

    def enclosing_loop(self, number: int, reach: int) -> int | None:
        """The line of the innermost loop whose statement holds line
        `number`, starting at most `reach` lines above it."""
        for candidate in range(number, max(number - reach, 0), -1):
            if LOOP.match(self.code(candidate)) and self.depth(candidate) <= self.depth(number):
                if self.statement_end(candidate) >= number:
                    return candidate
        return None

    def occurrences(self, needle: str) -> int:
        return len(occurrences(self.text, needle))

    def span_text(self, first: int, last: int) -> str:
        """The text from line `first`'s first non-blank to line `last`'s last one."""
        return "\n".join(self._raw[first : last + 1]).strip()

    def anchor_from(self, first: int, last: int | None = None) -> str | None:
        """The shortest text starting on line `first` (growing down, not past
        `last`) that the file holds exactly once."""
        last = min(last or self.count, first + ANCHOR_LINES, self.count)
        for end in range(first, last + 1):
            text = self.span_text(first, end)
            if text and self.occurrences(text) == 1:
                return text
        return None

    def found_from(self, text: str, number: int) -> int | None:
        """The line where `text` is first found from line `number` on."""
        offset = sum(len(line) + 1 for line in self._raw[1:number])
        found = occurrences(self.text, text, offset)
        return line_of(self.text, found[0]) if found else None

    def after_anchor(self, number: int, text: str) -> str | None:
        """For `text` the file repeats: the nearest line above line `number`
        that the file holds once, from whose end `text` is first found on
        line `number`; None when another `text` lies between."""
        for candidate in range(number - 1, 0, -1):
            before = self.span_text(candidate, candidate)
            if not before or self.occurrences(before) != 1:
                continue
            found = occurrences(self.text, text, self.text.find(before) + len(before))
            return before if found and line_of(self.text, found[0]) == number else None
        return None

    def anchor_to(self, last: int, first: int = 1) -> str | None:
        """The shortest text ending on line `last` (growing up, not past
        `first`) that the file holds exactly once."""
        first = max(first, last - ANCHOR_LINES, 1)
        for start in range(last, first - 1, -1):
            text = self.span_text(start, last)
            if text and self.occurrences(text) == 1:
                return text
        return None
