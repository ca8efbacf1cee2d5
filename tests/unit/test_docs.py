"""Every page and section the code and the docs cite exists.

A citation is a page of docs/ and a heading of it in quotes, as comments and
docstrings write it: `docs/<page>.md, "<heading>"`, the quote on the same line
or on the next one (after its `#`, `//` or indentation), the heading itself
free to wrap; `, and "<heading>"` right after one cites the same page again.
Each must name a page that exists and a `#` heading of it with exactly that
text (outside code blocks). A bare mention of `docs/<page>.md` must name a page
that exists. And docs/architecture.md stays a map: at most 300 lines, its
faults/ table naming every module of each part of the engine, and no other.

A failure reads `path:line: docs/<page>.md, "<heading>": no such heading`
(or `no such page`), so the one to fix is named."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Where citations are read: the code, the tests, the scripts, the catalogs,
# the corpus and the docs (not what the tools wrote, not the record).
SCANNED_DIRS = (
    "afdep",
    "invariants",
    "faults",
    "tools",
    "hostio",
    "tests",
    "scripts",
    "catalogs",
    "corpus",
    "docs",
)
SCANNED_FILES = ("README.md",)
SUFFIXES = (".py", ".cuh", ".toml", ".sh", ".md")
SKIPPED = ("docs/results/", "docs/history.md")
MAP_PAGE = "docs/architecture.md"
MAP_LINES = 300

# What opens a line of a comment or a docstring: indentation, then `#`,
# `//` or `*` (a C block comment's), then a space.
LINE_PREFIX = re.compile(r"^[ \t]*(?:#+|//+|\*+)?[ \t]?")
# A page: `docs/<page>.md`, or `<page>.md` alone where docs/<page>.md exists
# (an old citation that left the folder out), a backtick after it allowed.
PAGE = r"(?<![\w./-])(?P<page>(?:docs/)?[\w-]+\.md)`?"
# The quote may open on the next line; the heading may wrap once.
QUOTED = r'"(?P<heading>[^"\n]+(?:\n[^"\n]+)?)"'
CITATION = re.compile(PAGE + r"(?:,[ \t]*\n?[ \t]*|[ \t]+)" + QUOTED)
CHAINED = re.compile(r"(?:,[ \t]*item[ \t]+\d+)?,?[ \t\n]+and[ \t]*\n?[ \t]*" + QUOTED)
MENTION = re.compile(r"(?<![\w./-])docs/(?P<name>[\w-]+)\.md(?![\w/-])")
FENCE = re.compile(r"^[ \t]*(```|~~~)")
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")


@dataclass(frozen=True)
class Citation:
    path: str  # relative to the repository's root
    line: int
    page: str  # as docs/<page>.md
    heading: str  # whitespace folded to single spaces


def scanned_files(root: Path) -> list[Path]:
    found = []
    for folder in SCANNED_DIRS:
        base = root / folder
        if base.is_dir():
            found += [p for p in base.rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    found += [root / name for name in SCANNED_FILES if (root / name).is_file()]
    keep = []
    for path in sorted(set(found)):
        relative = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts or relative.startswith(SKIPPED):
            continue
        keep.append(path)
    return keep


def unprefixed(text: str) -> tuple[str, list[int]]:
    """The text with each line's comment opening taken off, and where each
    line starts in it: a citation wrapped over two comment lines reads as
    one."""
    bodies, starts, offset = [], [], 0
    for line in text.split("\n"):
        body = line[LINE_PREFIX.match(line).end() :]
        starts.append(offset)
        bodies.append(body)
        offset += len(body) + 1
    return "\n".join(bodies), starts


def fold(heading: str) -> str:
    return re.sub(r"\s+", " ", heading).strip()


def page_of(written: str, root: Path) -> str | None:
    """docs/<page>.md for what the citation wrote; None for a `<name>.md`
    alone that is no page of docs/ (README.md, a results file)."""
    if written.startswith("docs/"):
        return written
    return f"docs/{written}" if (root / "docs" / written).is_file() else None


def citations_in(text: str, path: str, root: Path) -> list[Citation]:
    flat, starts = unprefixed(text)

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset)

    found = []
    for match in CITATION.finditer(flat):
        page = page_of(match["page"], root)
        if page is None:
            continue
        found.append(Citation(path, line_of(match.start()), page, fold(match["heading"])))
        rest = CHAINED.match(flat, match.end())
        if rest:
            line = line_of(rest.start("heading"))
            found.append(Citation(path, line, page, fold(rest["heading"])))
    return found


def citations(root: Path) -> list[Citation]:
    found = []
    for file in scanned_files(root):
        relative = file.relative_to(root).as_posix()
        found += citations_in(file.read_text(errors="replace"), relative, root)
    return found


def mentions(root: Path) -> list[tuple[str, int, str]]:
    """(path, line, docs/<page>.md) for every mention of a page of docs/."""
    found = []
    for file in scanned_files(root):
        relative = file.relative_to(root).as_posix()
        for number, line in enumerate(file.read_text(errors="replace").split("\n"), 1):
            found += [(relative, number, f"docs/{m['name']}.md") for m in MENTION.finditer(line)]
    return found


def headings(page: Path) -> set[str]:
    """Every `#` heading's text of a Markdown page, code blocks left out."""
    found, fenced = set(), False
    for line in page.read_text().split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            found.add(fold(match["text"]))
    return found


def citation_problems(root: Path) -> list[str]:
    problems, known = [], {}
    for cited in citations(root):
        if cited.page not in known:
            page = root / cited.page
            known[cited.page] = headings(page) if page.is_file() else None
        where = f'{cited.path}:{cited.line}: {cited.page}, "{cited.heading}"'
        if known[cited.page] is None:
            problems.append(f"{where}: no such page")
        elif cited.heading not in known[cited.page]:
            problems.append(f"{where}: no such heading")
    return problems


def mention_problems(root: Path) -> list[str]:
    return [
        f"{path}:{line}: {page}: no such page"
        for path, line, page in mentions(root)
        if not (root / page).is_file()
    ]


def test_every_cited_section_is_a_heading_of_its_page():
    problems = citation_problems(REPO)
    assert not problems, f"{len(problems)} citations name no heading:\n" + "\n".join(problems)


def test_every_page_mentioned_exists():
    problems = mention_problems(REPO)
    assert not problems, "\n".join(problems)


def test_the_architecture_page_stays_a_map():
    lines = (REPO / MAP_PAGE).read_text().count("\n")
    assert lines <= MAP_LINES, f"{MAP_PAGE}: {lines} lines, a map has at most {MAP_LINES}"


def test_the_reader_finds_a_citation_over_two_lines_and_names_a_missing_heading(tmp_path):
    # Pages spelt apart, so that this file cites and mentions nothing itself.
    page, nowhere, missing = ("docs/" + name + ".md" for name in ("guide", "nowhere", "missing"))
    (tmp_path / "docs").mkdir()
    (tmp_path / page).write_text("# Guide\n\n## Real section\n\n```\n# Fenced is no heading\n```\n")
    (tmp_path / "faults").mkdir()
    (tmp_path / "faults" / "mod.py").write_text(
        f'"""What it does ({page},\n"Real section").\n\n'
        f'The wrapped one ({page}, "Real\nsection"), and an old one ({page},\n'
        '"Gone section")."""\n'
        f'# a comment: {page},\n#   "Fenced is no heading", and "Real section"\n'
    )
    (tmp_path / "faults" / "kern.cuh").write_text(
        f'// the map ({nowhere},\n//    "Any").\n// bare: {missing} and {page}\n'
    )
    found = [(c.path, c.line, c.heading) for c in citations(tmp_path)]
    assert ("faults/mod.py", 1, "Real section") in found  # the quote on the next line
    assert ("faults/mod.py", 4, "Real section") in found  # the heading wrapped
    assert ("faults/mod.py", 8, "Real section") in found  # `, and "..."`: the same page
    assert citation_problems(tmp_path) == [
        f'faults/kern.cuh:1: {nowhere}, "Any": no such page',
        f'faults/mod.py:5: {page}, "Gone section": no such heading',
        f'faults/mod.py:7: {page}, "Fenced is no heading": no such heading',
    ]
    assert mention_problems(tmp_path) == [
        f"faults/kern.cuh:1: {nowhere}: no such page",
        f"faults/kern.cuh:3: {missing}: no such page",
    ]


# A row of the map's faults/ table: | `<part>/` | `mod`, `mod`, ... | what |
PART_ROW = re.compile(r"^\| `(?P<part>\w+)/` \| (?P<modules>[^|]*) \|", re.M)


def map_mismatches(root: Path) -> list[str]:
    """Each part of faults/ whose modules the map lists otherwise than the code
    has them (every .py but __init__, and any .cuh), and each part one of the
    two lacks."""
    text = (root / MAP_PAGE).read_text()
    section = re.split(r"^##", text[text.index("### faults/") + 3 :], flags=re.M)[0]
    listed = {
        row["part"]: set(re.findall(r"`([\w.]+)`", row["modules"]))
        for row in PART_ROW.finditer(section)
    }
    found = []
    parts = sorted(p for p in (root / "faults").iterdir() if (p / "__init__.py").is_file())
    for part in parts:
        modules = {p.stem for p in part.glob("*.py") if p.stem != "__init__"}
        modules |= {p.name for p in part.glob("*.cuh")}
        if part.name not in listed:
            found.append(f"faults/{part.name}/: not in the map")
        elif listed[part.name] != modules:
            missing, stray = (
                sorted(modules - listed[part.name]),
                sorted(listed[part.name] - modules),
            )
            found.append(f"faults/{part.name}/: the map lacks {missing}, names {stray}")
    found += [
        f"faults/{name}/: in the map, not in the code"
        for name in sorted(set(listed) - {p.name for p in parts})
    ]
    return found


def test_the_map_lists_every_module_of_the_engine():
    assert map_mismatches(REPO) == []


def test_the_map_check_names_a_module_the_map_lacks(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / MAP_PAGE).write_text("### faults/\n\n| `judge/` | `verdict` | the rules |\n")
    (tmp_path / "faults/judge").mkdir(parents=True)
    for name in ("__init__.py", "verdict.py", "seeds.py"):
        (tmp_path / "faults/judge" / name).touch()
    assert map_mismatches(tmp_path) == ["faults/judge/: the map lacks ['seeds'], names []"]
