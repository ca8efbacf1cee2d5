"""Function definitions in C and C++ source, read as text: where a function's
declaration starts (its qualifier and template lines), where its body opens
and closes, with comments, strings and preprocessor lines out of the way. The
mutation operators copy a definition by it (a rule's twin,
faults/catalog/mutation.py), and the publish contract asks it which function
holds a site (invariants/sync/contract.py); it knows no target's words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from invariants.sync.sites import source_files
from invariants.sync.statements import code_only


@dataclass(frozen=True)
class Definition:
    """A function's definition in one file: from the first line of its
    declaration (its qualifier and template lines) through the line of the
    `}` that closes its body."""

    path: Path
    text: str  # the file's text
    start: int  # offset of the declaration's first line (or of its first word)
    name: int  # offset of the function's name
    body: int  # offset of the `{` that opens its body
    close: int  # offset of the `}` that closes it
    end: int  # offset past the closing line (its newline included)

    def where(self, sources: Path) -> str:
        line = self.text.count("\n", 0, self.name) + 1
        return f"{self.path.relative_to(sources).as_posix()}:{line}"

    @property
    def source(self) -> str:
        return self.text[self.start : self.end]


# A definition's parameter list is followed by its body, with at most these between.
BODY_OPENS = re.compile(r"(?:\s|\b(?:const|volatile|noexcept|override|final)\b|&)*\{")


def definitions(sources: Path, name: str) -> list[Definition]:
    """Every definition of the function `name` in the source files under
    `sources`: `name(` outside comments, strings and preprocessor lines,
    not a member access, whose parameter list is followed by a body."""
    call = re.compile(rf"(?<![\w.])(?<!->){re.escape(name)}\s*\(")
    found = []
    for path in source_files(sources):
        text = path.read_text()
        if name in text:
            found += _definitions_in(path, text, code_only(text), call)
    return found


# A name then `(`: a definition when a body follows its parameter list.
NAMED_CALL = re.compile(r"(?<![\w.])(?<!->)(?<!::)(?:\w+::)*([A-Za-z_]\w*)\s*\(")
NOT_FUNCTIONS = frozenset(
    "if constexpr else for while do switch case catch return throw new delete sizeof decltype"
    " alignof alignas typeid noexcept static_assert defined __launch_bounds__".split()
)


def file_definitions(path: Path, text: str) -> list[Definition]:
    """Every function definition in one file's `text`, in the order of the file."""
    return [
        definition
        for definition in _definitions_in(path, text, code_only(text), NAMED_CALL)
        if text[definition.name : definition.body].split("(")[0].split("::")[-1].strip()
        not in NOT_FUNCTIONS
    ]


def enclosing(path: Path, line: int) -> Definition | None:
    """The innermost function definition whose body holds `path`:`line`
    (1-based), or None (the line lies outside every function)."""
    text = Path(path).read_text()
    offset = sum(len(each) for each in text.splitlines(keepends=True)[: line - 1])
    around = [d for d in file_definitions(Path(path), text) if d.body < offset < d.close]
    return max(around, key=lambda d: d.body, default=None)


def _definitions_in(path: Path, text: str, code: str, call: re.Pattern[str]) -> list[Definition]:
    """The definitions whose name `call` matches in one file (`code`: its code_only)."""
    found = []
    for match in call.finditer(code):
        after = closing(code, match.end() - 1, "(", ")")
        opens = BODY_OPENS.match(code, after + 1) if after is not None else None
        close = closing(code, opens.end() - 1, "{", "}") if opens else None
        if close is None:
            continue
        name = match.start(match.lastindex) if match.lastindex else match.start()
        found.append(
            Definition(
                path,
                text,
                _declaration_start(code, name),
                name,
                opens.end() - 1,
                close,
                _line_end(code, close + 1),
            )
        )
    return found


def closing(code: str, at: int, opening: str, closer: str) -> int | None:
    """The offset of the bracket that closes the one at `at` (None: never closed)."""
    depth = 0
    for index in range(at, len(code)):
        depth += {opening: 1, closer: -1}.get(code[index], 0)
        if depth == 0:
            return index
    return None


def _declaration_start(code: str, name: int) -> int:
    """Where the declaration holding the name at `name` starts: its first
    word after the last `;`, `{` or `}` (a preprocessor line counts as `;`),
    or the start of its line when nothing else is on it before that word."""
    boundary = max(code.rfind(char, 0, name) for char in ";{}") + 1
    first = boundary + len(code[boundary:name]) - len(code[boundary:name].lstrip())
    line = code.rfind("\n", 0, first) + 1
    return line if not code[line:first].strip() else first


def _line_end(code: str, at: int) -> int:
    """Past the newline that ends the line at `at` when only blanks follow
    there (a comment is blank), else `at`."""
    newline = code.find("\n", at)
    end = len(code) if newline < 0 else newline + 1
    return end if not code[at:end].strip() else at
