"""Sites: the named regions of native source that faults, reviews and reports
refer to. A region is

    // @site <name> kind=<store|release|wait|compute> [guards=<site>]
    <code>
    // @end <name>

Rules (checked by `python -m faults sites --check DIR`): regions close and do
not nest, names are unique, kinds are valid, a wait names the site whose data
it guards and that site exists, and every use of an ordering primitive in a
kernel header lies inside exactly one site. Definitions under `common/` are
exempt from the last rule: they are where the primitives live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

KINDS = ("store", "release", "wait", "compute")
SOURCE_SUFFIXES = (".cuh", ".cu", ".h", ".hpp", ".cpp", ".cc")
EXEMPT_DIRS = ("common",)

OPEN = re.compile(r"^\s*//\s*@site\s+(?P<name>\S+)(?P<attrs>.*)$")
CLOSE = re.compile(r"^\s*//\s*@end\b\s*(?P<name>\S*)\s*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
ATTR = re.compile(r"(\w+)=(\S+)")
# Uses of ordering primitives: acquire/release loads and stores, fences,
# atomics and reductions, and the wait helper built on them.
PRIMITIVE = re.compile(
    r"\b(ld_acquire\w*|st_release\w*|red_\w+|atom_\w+|atomic[A-Z]\w*|fence_\w+"
    r"|__threadfence\w*|wait_until|std::atomic_thread_fence)\s*\("
    r"|(?:\.|->)(load|store|exchange|fetch_\w+|compare_exchange_\w+)\s*\([^;]*memory_order"
)


@dataclass(frozen=True)
class Site:
    name: str
    kind: str
    guards: str | None
    path: Path
    start: int  # line of `// @site`, 1-based
    end: int  # line of `// @end`

    def where(self) -> str:
        return f"{self.path}:{self.start}"


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def source_files(root: Path) -> list[Path]:
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)


def _code(line: str) -> str:
    """The line without its `//` comment (strings holding `//` are rare in kernels)."""
    return line.split("//", 1)[0]


def _exempt(path: Path, root: Path) -> bool:
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False
    return bool(parts) and parts[0] in EXEMPT_DIRS


def parse_file(path: Path, *, check_primitives: bool) -> tuple[list[Site], list[Violation]]:
    sites, violations = [], []
    open_site: tuple[str, str, str | None, int] | None = None
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        opened, closed = OPEN.match(line), CLOSE.match(line)
        if opened:
            name, attrs = opened["name"], dict(ATTR.findall(opened["attrs"]))
            if open_site is not None:
                violations.append(
                    Violation(
                        path,
                        number,
                        f"site {name} opens inside site "
                        f"{open_site[0]} (opened at line {open_site[3]})",
                    )
                )
                continue
            violations += _check_header(path, number, name, attrs, opened["attrs"])
            open_site = (name, attrs.get("kind", ""), attrs.get("guards"), number)
        elif closed:
            name = closed["name"]
            if open_site is None:
                violations.append(
                    Violation(path, number, f"@end {name or '(unnamed)'} without an open site")
                )
            elif name != open_site[0]:
                violations.append(
                    Violation(
                        path,
                        number,
                        f"@end {name or '(unnamed)'} closes "
                        f"site {open_site[0]} (opened at line {open_site[3]})",
                    )
                )
                open_site = None
            else:
                sites.append(
                    Site(open_site[0], open_site[1], open_site[2], Path(path), open_site[3], number)
                )
                open_site = None
        elif check_primitives and open_site is None:
            use = PRIMITIVE.search(_code(line))
            if use:
                violations.append(
                    Violation(
                        path, number, f"ordering primitive {use[1] or use[2]}( outside any site"
                    )
                )
    if open_site is not None:
        violations.append(Violation(path, open_site[3], f"site {open_site[0]} is never closed"))
    return sites, violations


def _check_header(path: Path, number: int, name: str, attrs: dict, text: str) -> list[Violation]:
    problems = []
    if not NAME.match(name):
        problems.append(f"site name {name!r} is not dotted lower_case (e.g. cf.source.row_store)")
    kind = attrs.get("kind")
    if kind not in KINDS:
        problems.append(f"site {name}: kind={kind} is not one of {', '.join(KINDS)}")
    unknown = sorted(set(attrs) - {"kind", "guards"})
    leftovers = ATTR.sub("", text).strip()
    if unknown or leftovers:
        problems.append(f"site {name}: unknown attributes {unknown or [leftovers]}")
    if kind == "wait" and "guards" not in attrs:
        problems.append(f"site {name}: a wait must name the site it guards (guards=...)")
    if kind != "wait" and "guards" in attrs:
        problems.append(f"site {name}: only a wait guards a site")
    return [Violation(path, number, message) for message in problems]


def parse_tree(root: Path) -> tuple[list[Site], list[Violation]]:
    """Every site under `root` and every rule it breaks, across files."""
    root = Path(root)
    sites, violations = [], []
    for path in source_files(root):
        found, problems = parse_file(path, check_primitives=not _exempt(path, root))
        sites += found
        violations += problems
    first: dict[str, Site] = {}
    for site in sites:
        if site.name in first:
            violations.append(
                Violation(
                    site.path,
                    site.start,
                    f"site {site.name} defined again (first at {first[site.name].where()})",
                )
            )
        else:
            first[site.name] = site
    for site in sites:
        if site.guards is not None and site.guards not in first:
            violations.append(
                Violation(
                    site.path, site.start, f"site {site.name} guards unknown site {site.guards}"
                )
            )
    return sites, violations


def site_body(site: Site) -> list[str]:
    """The source lines strictly between the site's markers."""
    lines = site.path.read_text().splitlines()
    return lines[site.start : site.end - 1]
