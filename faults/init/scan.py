"""A source tree scanned for ordering primitives: every call, member call,
inline-PTX statement and volatile flag access that a spelling names, with its
file:line and enclosing function. A small function whose body holds one kind
of primitive (the asm helper `st_flag_release`) becomes a spelling of that
kind itself, and its callers are the uses (docs/tools.md, "Onboarding a codebase")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from faults.init.defaults import (
    ASM,
    DEFAULT_CALLS,
    MEMBER_CALL,
    Reading,
    asm_mnemonics,
    member_reading,
    ptx_reading,
)
from faults.init.errors import InitError
from faults.init.lines import Lines
from invariants.sync.functions import Definition, closing, file_definitions
from invariants.sync.statements import code_only, line_of
from invariants.sync.sites import source_files
from invariants.sync.spellings import call_pattern

HELPER_LINES = 12  # a function this short (its body's lines) is a primitive's wrapper
HELPER_STATEMENTS = 6  # ... or this few statements (an asm wrapper's operand lists run long)
HELPER_ROUNDS = 4  # wrappers of wrappers, this deep
INCLUDE_ROOTS = 4  # folders above the scanned one an `#include` is looked for from
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
VOLATILE_NAME = re.compile(r"\bvolatile\b[\w\s:<>,]*?[\s*&]+(\w+)\s*(?=[=;,)\[])")
LOOP_CONDITION = re.compile(r"\bwhile\s*\(")


class Form(str, Enum):
    """How a use spells its primitive."""

    CALL = "call"  # a called name a spelling matches (a wrapper's too)
    MEMBER = "member"  # an atomic's member call with a memory_order
    ASM = "asm"  # an inline-PTX statement
    VOLATILE = "volatile"  # a volatile access of a flag: relaxed


@dataclass(frozen=True)
class Use:
    """One use of an ordering primitive."""

    path: str  # from the scanned root
    line: int
    offset: int  # in the file's text
    key: str  # its [target.contract] key: release.sys, barrier.block, store...
    name: str  # the called name, the PTX mnemonic, the member call, or `volatile`
    form: Form
    function: str  # the enclosing function ("" at file scope)
    volatile: bool = False

    @property
    def action(self) -> str:
        return self.key.split(".")[0]

    @property
    def qualifier(self) -> str:
        return self.key.partition(".")[2]


@dataclass(frozen=True)
class Helper:
    """A small function made a spelling: its name now means its primitive."""

    name: str
    reading: Reading
    path: str
    line: int
    why: str  # the primitives its body holds


@dataclass(frozen=True)
class SourceFile:
    text: str
    code: str  # comments, strings and preprocessor lines blanked
    definitions: tuple[Definition, ...]

    def line_of(self, offset: int) -> int:
        return line_of(self.text, offset)

    def function_at(self, offset: int) -> Definition | None:
        inside = [d for d in self.definitions if d.body < offset < d.close]
        return max(inside, key=lambda d: d.body, default=None)


@dataclass
class Scan:
    """The uses found under `root`, the wrappers made spellings, and the
    spellings each key was found by (the starter's [target.contract])."""

    root: Path
    files: dict[str, SourceFile]
    uses: list[Use]
    helpers: dict[str, Helper] = field(default_factory=dict)
    spellings: dict[str, list[str]] = field(default_factory=dict)


def read_sources(root: Path) -> dict[str, SourceFile]:
    """Every source file under `root` (a file: itself), by its path from `root`."""
    files = {}
    for path in source_files(root):
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        try:
            text = path.read_text()
        except UnicodeDecodeError as error:
            raise InitError(f"{path}: not a text source ({error.reason})") from None
        files[relative] = SourceFile(text, code_only(text), tuple(file_definitions(path, text)))
    return files


def included_sources(root: Path, files: dict[str, SourceFile]) -> dict[str, SourceFile]:
    """The headers the scanned files `#include` from outside `root` (found
    from `root`'s folder or one of the INCLUDE_ROOTS above it, as `-I` would
    find them), by their include text: read for wrappers only (a library's
    load and store helpers live beside the code that calls them), never for uses."""
    top = root.parent if root.is_file() else root
    bases = [top, *list(top.resolve().parents)[:INCLUDE_ROOTS]]
    found: dict[str, SourceFile] = {}
    for source in files.values():
        for name in INCLUDE.findall(source.text):
            for base in bases:
                path = base / name
                inside = path.resolve().is_relative_to(top.resolve())
                if name in found or inside or not path.is_file():
                    continue
                try:
                    text = path.read_text()
                except (OSError, UnicodeDecodeError):
                    continue  # an unreadable header proposes nothing
                found[name] = SourceFile(text, code_only(text), tuple(file_definitions(path, text)))
                break
    return found


def scan(root: Path, given: dict[str, str]) -> Scan:
    """The uses under `root`: `given` spellings (key -> regular expression)
    first, then the wrappers found (in the sources and the headers they
    include), then CUDA's defaults for the other keys."""
    files = read_sources(root)
    readable = {**included_sources(root, files), **files}
    first = [(Reading(key), call_pattern(text)) for key, text in given.items()]
    last = [(Reading(k), call_pattern(t)) for k, t in DEFAULT_CALLS.items() if k not in given]
    helpers: dict[str, Helper] = {}
    for _ in range(HELPER_ROUNDS):
        wrappers = [(h.reading, call_pattern(re.escape(h.name))) for h in helpers.values()]
        uses = all_uses(readable, [*first, *wrappers, *last])
        found = {h.name: h for h in find_helpers(readable, uses) if h.name not in helpers}
        found = {name: h for name, h in found.items() if not _given(name, given)}
        if not found:
            break
        helpers.update(found)
    uses = [u for u in uses if u.path in files]  # an included header's own uses are not ours
    # A wrapper is a spelling where it is called: one nothing here calls (its
    # callers lie outside the folder scanned) keeps its body's uses as uses.
    called = {u.name for u in uses if u.form is Form.CALL}
    helpers = {name: h for name, h in helpers.items() if name in called}
    # A primitive's own definition (a wrapper, or a function a spelling names) is no use of it.
    primitive = set(helpers) | {name for name in _defined(files) if _given(name, given)}
    bodies = [(p, d) for p, f in files.items() for d in f.definitions if _name(d) in primitive]
    uses = [
        u for u in uses if not any(p == u.path and d.body < u.offset < d.close for p, d in bodies)
    ]
    return Scan(root, files, uses, helpers, spellings_used(uses, given))


def _defined(files: dict[str, SourceFile]) -> set[str]:
    return {_name(d) for source in files.values() for d in source.definitions}


def _given(name: str, given: dict[str, str]) -> bool:
    """Whether a given spelling already names the function `name`."""
    return any(call_pattern(text).fullmatch(name + "(") for text in given.values())


def all_uses(files: dict[str, SourceFile], patterns) -> list[Use]:
    """Every use in every file; a primitive two spellings find counts once,
    by the first of `patterns` (given, wrapper, default)."""
    uses: dict[tuple[str, int], Use] = {}
    for path, source in files.items():
        found = call_uses(path, source, patterns)
        found += member_uses(path, source) + asm_uses(path, source) + volatile_uses(path, source)
        for use in found:
            uses.setdefault((path, use.offset), use)
    return sorted(uses.values(), key=lambda u: (u.path, u.offset))


def call_uses(path: str, source: SourceFile, patterns) -> list[Use]:
    """The calls each (reading, pattern) finds in one file."""
    names = {d.name for d in source.definitions}  # a definition is not a use
    found = []
    for reading, pattern in patterns:
        for match in pattern.finditer(source.code):
            name_at = match.start() + len(match[0]) - len(match[0].lstrip())
            if name_at in names or source.code[match.start() - 1 : match.start()] == ".":
                continue
            name = re.sub(r"\s*\($", "", match[0])
            found.append(_use(path, source, match.start(), reading, name, Form.CALL))
    return found


def member_uses(path: str, source: SourceFile) -> list[Use]:
    found = []
    for match in MEMBER_CALL.finditer(source.code):
        close = closing(source.code, match.end() - 1, "(", ")")
        reading = member_reading(match["op"], source.code[match.end() : close or match.end()])
        if reading is not None:
            name = match["op"] or match["fence"]
            found.append(_use(path, source, match.start(), reading, name, Form.MEMBER))
    return found


def asm_uses(path: str, source: SourceFile) -> list[Use]:
    found = []
    for match in ASM.finditer(source.code):
        close = closing(source.code, match.end() - 1, "(", ")") or match.end()
        literals = "".join(STRING.findall(source.text[match.end() : close]))
        for mnemonic in asm_mnemonics(literals):
            reading = ptx_reading(mnemonic)
            if reading is not None:
                found.append(_use(path, source, match.start(), reading, mnemonic, Form.ASM))
    return found


def volatile_uses(path: str, source: SourceFile) -> list[Use]:
    """Flags read or written through `volatile`: a spin loop's condition
    (a relaxed load) and a store through a volatile pointer (a relaxed store)."""
    code = source.code
    names = set(VOLATILE_NAME.findall(code))
    found = []
    for match in LOOP_CONDITION.finditer(code):
        close = closing(code, match.end() - 1, "(", ")") or match.end()
        condition = code[match.end() : close]
        if "volatile" in condition or any(re.search(rf"\b{n}\b", condition) for n in names):
            reading = Reading("load", volatile=True)
            found.append(_use(path, source, match.start(), reading, "volatile", Form.VOLATILE))
    deref = "|".join(re.escape(n) for n in sorted(names)) or "(?!)"
    store = re.compile(
        rf"(?:\*\s*\(\s*volatile\b[^;=]*?\)\s*[\w\[\]+ ]*"
        rf"|\*\s*(?:{deref})\b|\b(?:{deref})\s*\[[^\]]*\])"
        rf"\s*=(?!=)"
    )
    for match in store.finditer(code):
        reading = Reading("store", volatile=True)
        found.append(_use(path, source, match.start(), reading, "volatile", Form.VOLATILE))
    return found


def _use(path, source: SourceFile, offset: int, reading: Reading, name: str, form: Form) -> Use:
    definition = source.function_at(offset)
    function = _name(definition) if definition else ""
    line = source.line_of(offset)
    return Use(path, line, offset, reading.key, name, form, function, reading.volatile)


def _name(definition: Definition) -> str:
    return definition.text[definition.name : definition.body].split("(")[0].strip()


def find_helpers(files: dict[str, SourceFile], uses: list[Use]) -> list[Helper]:
    """The small functions whose body's primitives read as one (a release:
    a release, or a fence then a relaxed store), and the wait helpers of any
    length (a spin on an acquire, with nothing else but loads), kernels aside."""
    helpers = []
    for path, source in files.items():
        for definition in source.definitions:
            lines = source.line_of(definition.close) - source.line_of(definition.body) + 1
            declared = source.code[definition.start : definition.name]
            if "__global__" in declared:
                continue
            body = range(definition.body + 1, definition.close)
            inside = [u for u in uses if u.path == path and u.offset in body]
            statements = source.code.count(";", definition.body, definition.close)
            small = lines <= HELPER_LINES or statements <= HELPER_STATEMENTS
            if not small and not spins_on_acquire(source, definition, inside):
                continue
            reading = helper_reading(inside)
            if reading is not None:
                why = ", ".join(dict.fromkeys(u.name for u in inside))
                line = source.line_of(definition.name)
                helpers.append(Helper(_name(definition), reading, path, line, why))
    return helpers


def spins_on_acquire(source: SourceFile, definition: Definition, inside: list[Use]) -> bool:
    """A wait helper: its primitives are acquires and plain loads only, and
    one acquire is in a loop of its body (a spin on a flag, however long the
    function around it: a timeout, an abort word, a message)."""
    if not inside or any(u.action != "acquire" and u.key != "load" for u in inside):
        return False
    lines, top = Lines(source.text, source.code), source.line_of(definition.body)
    return any(
        u.action == "acquire" and lines.enclosing_loop(u.line, u.line - top) is not None
        for u in inside
    )


def helper_reading(uses: list[Use]) -> Reading | None:
    """What a wrapper's primitives make together, or None when they are mixed."""
    keys = [u.key for u in uses]
    volatile = any(u.volatile for u in uses)
    for action in ("release", "acquire"):
        if any(k.startswith(action + ".") for k in keys):
            return Reading(next(k for k in keys if k.startswith(action + ".")))
    fences = [k for k in keys if k.startswith("fence.")]
    if fences and "store" in keys and keys.index(fences[0]) < keys.index("store"):
        return Reading("release." + fences[0].partition(".")[2])
    if fences and "load" in keys and keys.index("load") < keys.index(fences[-1]):
        return Reading("acquire." + fences[-1].partition(".")[2])
    return Reading(keys[0], volatile) if len(set(keys)) == 1 else None


def spellings_used(uses: list[Use], given: dict[str, str]) -> dict[str, list[str]]:
    """Each key's spellings for the starter's [target.contract]: the given
    regular expression as given, else the names its uses called."""
    used: dict[str, list[str]] = {key: [text] for key, text in given.items()}
    for use in uses:
        if use.form is Form.CALL and use.key not in given:
            names = used.setdefault(use.key, [])
            if re.escape(use.name) not in names:
                names.append(re.escape(use.name))
    return used
