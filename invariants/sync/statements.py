"""C and C++ text read as statements, for sites declared by anchors
(docs/synchronization.md, "The site grammar"): where a literal text occurs,
and the statement that encloses a place of the text. Comments and string
literals are blanked first (`code_only`: preprocessor lines made a `;`), so a `;` or a brace in them counts for nothing."""

from __future__ import annotations

import re

# The statements whose brace block is their end (`else` and `do` go on after it).
BLOCK_HEADS = re.compile(r"(if|while|for|switch|do|else|try)\b")


def code_only(text: str) -> str:
    """`text` with its comments, string and character literals blanked
    (newlines kept, so offsets and lines stay), and each preprocessor line
    (its continuations too) made a `;` and blanks."""
    out = list(text)

    def blank(start: int, end: int) -> None:
        for index in range(start, end):
            if out[index] != "\n":
                out[index] = " "

    index, size, line_start = 0, len(text), True
    while index < size:
        char = text[index]
        if char == "\n" or (line_start and char in " \t"):
            line_start = char == "\n" or line_start
            index += 1
            continue
        if line_start and char == "#":
            end = text.find("\n", index)
            while end >= 0 and text[index:end].rstrip(" \t\r").endswith("\\"):
                end = text.find("\n", end + 1)
            end = size if end < 0 else end
            blank(index, end)
            out[index] = ";"
            index = end
            continue
        line_start = False
        if text.startswith("//", index):
            end = text.find("\n", index)
            end = size if end < 0 else end
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            end = size if end < 0 else end + 2
        elif char == '"' or (char == "'" and not text[index - 1 : index].isalnum()):
            end = index + 1
            while end < size and text[end] not in (char, "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, size)
        else:
            index += 1
            continue
        blank(index, end)
        index = end
    return "".join(out)


def line_of(text: str, offset: int) -> int:
    """The 1-based line of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


def occurrences(text: str, anchor: str, after: int = 0) -> list[int]:
    """The offsets where `anchor` starts in `text` (overlapping ones too), from `after`."""
    found, at = [], text.find(anchor, after)
    while at >= 0:
        found.append(at)
        at = text.find(anchor, at + 1)
    return found


def _closing(code: str, opening: int) -> int | None:
    """The offset of the brace that closes the one at `opening`."""
    depth = 0
    for index in range(opening, len(code)):
        depth += {"{": 1, "}": -1}.get(code[index], 0)
        if depth == 0:
            return index
    return None


def _statement_start(code: str, offset: int) -> int:
    """Where the statement holding `offset` starts: after the nearest `;`,
    `{` or `}` before it that lies outside every parenthesis (a `for`'s `;`
    does not end a statement)."""
    depth, after = 0, 0
    for index, char in enumerate(code[:offset]):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char in ";{}" and depth <= 0:
            after, depth = index + 1, 0
    return after + len(code[after:]) - len(code[after:].lstrip())


def _statement_end(code: str, start: int) -> int | None:
    """The offset of the last character of the statement starting at
    `start`: its `;`, or the `}` closing the block it opens (then, for `do`,
    the `;` after its `while`; for an `if`, through its `else`)."""
    depth = 0
    for index in range(start, len(code)):
        char = code[index]
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth or char not in ";{":
            continue
        if char == ";":
            return index
        head = code[start:index].strip()
        closing = _closing(code, index)
        if closing is None:
            return None
        if head and not BLOCK_HEADS.match(head):  # an initializer or a lambda: on to its `;`
            return _statement_end(code, closing + 1)
        rest = code[closing + 1 :]
        follows = rest.lstrip()
        if head.startswith("do"):
            return _statement_end(code, closing + 1)
        if follows.startswith("else") and not re.match(r"else\w", follows):
            return _statement_end(code, closing + 1 + len(rest) - len(follows))
        return closing
    return None


def _do_of(code: str, start: int) -> int:
    """`start`, or, for the `while` that ends a `do { } while (...);`, where its `do` is."""
    before = code[:start].rstrip()
    if not code.startswith("while", start) or not before.endswith("}"):
        return start
    depth = 0
    for index in range(len(before) - 1, -1, -1):
        depth += {"}": 1, "{": -1}.get(before[index], 0)
        if depth == 0:
            head = before[:index].rstrip()
            return len(head) - 2 if re.search(r"(^|\W)do$", head) else start
    return start


def enclosing_statement(text: str, offset: int) -> tuple[int, int] | None:
    """The (first, last) offsets of the statement that encloses `offset`:
    from its start through its `;`, or through the `}` closing the brace
    block it opens (if, while, for, do, a plain block). None: none closes."""
    code = code_only(text)
    start = _do_of(code, _statement_start(code, offset))
    end = _statement_end(code, start)
    return None if end is None or end < offset else (start, end)


def _lines(text: str, offsets: list[int]) -> str:
    return ", ".join(str(line_of(text, offset)) for offset in offsets)


def _once(text: str, key: str, anchor: str, where: str) -> int:
    """The one offset of `anchor` in `text`, or the ValueError saying how often it is there."""
    found = occurrences(text, anchor)
    if len(found) != 1:
        lines = f" (lines {_lines(text, found)})" if found else ""
        raise ValueError(f"{key} found {len(found)} times in {where}{lines}")
    return found[0]


def _first_after(text: str, key: str, anchor: str, where: str, floor: int) -> int:
    """The first offset of `anchor` from `floor` on (the end of `after`'s
    text), or the ValueError saying it is not there."""
    found = occurrences(text, anchor, floor)
    if not found:
        raise ValueError(f"{key} not found after `after` in {where} (line {line_of(text, floor)})")
    return found[0]


def anchored_lines(
    text: str,
    where: str,
    *,
    begin: str | None,
    end: str | None,
    at: str | None,
    after: str | None = None,
) -> tuple[int, int]:
    """The (first, last) lines of the site these anchors declare in `text`
    (the file `where`): from `begin`'s first line through `end`'s last, or
    the statement enclosing `at`. Each is found exactly once; with `after`
    (itself found once), `at` or `begin` is the first after it and `end`
    the first after `begin`: a statement the file repeats is told apart by
    the text before it. Raises ValueError, one line naming the key."""

    def find(key: str, anchor: str, floor: int | None) -> int:
        if floor is None:
            return _once(text, key, anchor, where)
        return _first_after(text, key, anchor, where, floor)

    floor = None if after is None else _once(text, "after", after, where) + len(after)
    if at is not None:
        offset = find("at", at, floor)
        statement = enclosing_statement(text, offset)
        if statement is None:
            line = line_of(text, offset)
            raise ValueError(f"at: no statement ends around it in {where} (line {line})")
        return line_of(text, statement[0]), line_of(text, statement[1])
    first = find("begin", begin or "", floor)
    last = find("end", end or "", None if floor is None else first)
    if last < first:
        lines = f"line {line_of(text, last)}, begin at line {line_of(text, first)}"
        raise ValueError(f"end comes before begin in {where} ({lines})")
    return line_of(text, first), line_of(text, last + len(end or "") - 1)
