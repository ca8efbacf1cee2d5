"""Sites: the named regions of native source that faults, reviews and reports
refer to. A region is

    // @site <name> kind=store|compute
    // @site <name> kind=release producers=<group> scope=<scope> guards=<site>
    // @site <name> kind=wait consumers=<group> scope=<scope> guards=<site>
    <code>
    // @end <name>

A release and a wait carry their publish contract (docs/synchronization.md, "The
publish contract"): `producers` is whose stores the release publishes (thread,
warp, block, grid), `consumers` who reads after the wait (thread, warp,
block), `scope` the scope of the release or acquire (sys, gpu, cta), `guards`
the store (or compute) site whose data is published or awaited.

A site may instead be declared by anchors, outside the sources (a catalog's
`[[target.site]]`, read into `Anchor`s): the literal text that opens it and
the one that closes it, or one text whose enclosing statement it is
(invariants/sync/statements.py). Its `Site` is the comment site it would
be, its marker lines the lines just outside it: `start` the line before its
first, `end` the line after its last, `anchored` set.

Rules (checked by `python -m faults sites --check DIR`): regions close and do
not nest, names are unique, kinds are valid, a release or a wait declares its
whole contract (and no other kind any of it), what it guards exists and is a
store or compute site, and every use of an ordering primitive in a kernel
header lies inside exactly one site. Definitions under `common/` are exempt
from the last rule: they are where the primitives live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from invariants.sync.finding import Finding
from invariants.sync.statements import anchored_lines

class SiteKind(str, Enum):
    """Where data is made (store, compute), published (release) or awaited (wait)."""

    STORE = "store"
    RELEASE = "release"
    WAIT = "wait"
    COMPUTE = "compute"


KINDS = tuple(kind.value for kind in SiteKind)


class Group(str, Enum):
    """Threads that move together: whose stores a release publishes, who reads after a wait."""

    THREAD = "thread"
    WARP = "warp"
    BLOCK = "block"
    GRID = "grid"


class Scope(str, Enum):
    """The scope of a release or an acquire, strongest first."""

    SYS = "sys"
    GPU = "gpu"
    CTA = "cta"

    def covers(self, other: Scope) -> bool:
        """sys covers gpu covers cta."""
        order = list(Scope)
        return order.index(self) <= order.index(other)


# The contract attributes each kind must declare (and no other kind may).
CONTRACT = {
    "release": ("producers", "scope", "guards"),
    "wait": ("consumers", "scope", "guards"),
}
CONTRACT_VALUES = {
    "producers": tuple(Group),
    "consumers": (Group.THREAD, Group.WARP, Group.BLOCK),
    "scope": tuple(Scope),
}
# Kinds whose sites make what a release publishes (the only ones a site
# guards); a store is preferred.
GUARDABLE_KINDS = (SiteKind.STORE.value, SiteKind.COMPUTE.value)
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
    r"|__threadfence\w*|wait_until\w*|std::atomic_thread_fence)\s*\("
    r"|(?:\.|->)(load|store|exchange|fetch_\w+|compare_exchange_\w+)\s*\([^;]*memory_order"
)


OUTSIDE = "outside any site"  # how a primitive outside every site is said


@dataclass(frozen=True)
class Site:
    name: str
    kind: str
    guards: str | None
    path: Path
    start: int  # line of `// @site`, 1-based (anchored: the line before its first)
    end: int  # line of `// @end` (anchored: the line after its last)
    producers: Group | None = None  # releases
    consumers: Group | None = None  # waits
    scope: Scope | None = None  # releases and waits
    anchored: bool = False  # declared by anchors: no marker line is its own

    @property
    def lines(self) -> range:
        """The lines that are the site: its markers and body, or (anchored) its body."""
        return range(self.start + self.anchored, self.end + 1 - self.anchored)

    def where(self) -> str:
        return f"{self.path}:{self.lines.start}"

    def header(self) -> str:
        """Its `// @site` line's words after `// `, as a comment site declares it."""
        said = {"kind": self.kind, "producers": self.producers, "consumers": self.consumers}
        said |= {"scope": self.scope, "guards": self.guards}
        words = [f"{k}={getattr(v, 'value', v)}" for k, v in said.items() if v]
        return " ".join(["@site", self.name, *words])


@dataclass(frozen=True)
class Anchor:
    """A site declared by the text around it: `begin` and `end` (the site
    runs from the first line of `begin` through the last of `end`, each found
    exactly once in `file`, `end` after `begin`), or `at` (the statement
    enclosing it). `file` is relative to the sources; `attrs` the header's
    attributes as a `// @site` line spells them (kind, producers, ...)."""

    name: str
    file: str
    attrs: tuple[tuple[str, str], ...]
    begin: str | None = None
    end: str | None = None
    at: str | None = None
    # Text found once before `at` or `begin`, which are then the first after
    # it: a statement the file repeats, told apart by what precedes it.
    after: str | None = None
    # The (first, last) lines of a region carried through a change's diff
    # (faults/review/carry.py): its text rewritten, where its site lies now.
    lines: tuple[int, int] | None = None


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


def parse_file(
    path: Path, *, check_primitives: bool, primitives: re.Pattern[str] = PRIMITIVE
) -> tuple[list[Site], list[Finding]]:
    """The comment sites of one file and the rules it breaks; `primitives`:
    what an ordering primitive outside every site is (the target's words)."""
    sites, violations = [], []
    open_site: tuple[str, dict[str, str], int] | None = None  # name, attributes, line
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        opened, closed = OPEN.match(line), CLOSE.match(line)
        if opened:
            name, attrs = opened["name"], dict(ATTR.findall(opened["attrs"]))
            if open_site is not None:
                inside = f"site {open_site[0]} (opened at line {open_site[2]})"
                said = f"site {name} opens inside {inside}"
                violations.append(Finding(str(path), number, said))
                continue
            violations += _check_header(path, number, name, attrs, opened["attrs"])
            open_site = (name, attrs, number)
        elif closed:
            name = closed["name"]
            if open_site is None:
                violations.append(
                    Finding(str(path), number, f"@end {name or '(unnamed)'} without an open site")
                )
            elif name != open_site[0]:
                violations.append(
                    Finding(
                        str(path),
                        number,
                        f"@end {name or '(unnamed)'} closes "
                        f"site {open_site[0]} (opened at line {open_site[2]})",
                    )
                )
                open_site = None
            else:
                sites.append(_site(open_site, Path(path), number))
                open_site = None
        elif check_primitives and open_site is None:
            code = _code(line)
            use = next((m for m in primitives.finditer(code) if not _defines(code, m)), None)
            if use:
                said = f"ordering primitive {next(g for g in use.groups() if g)}( {OUTSIDE}"
                violations.append(Finding(str(path), number, said))
    if open_site is not None:
        violations.append(Finding(str(path), open_site[2], f"site {open_site[0]} is never closed"))
    return sites, violations


# Words that can stand before a call and are no return type of a definition.
STATEMENT_WORDS = frozenset(
    "return co_return co_yield else case do throw new delete sizeof goto".split()
)
RETURN_TYPE = re.compile(r"([A-Za-z_][\w:<>,]*[*&]*)\s+$|([A-Za-z_][\w:<>,]*[*&]+)$")


def _defines(code: str, match: re.Match[str]) -> bool:
    """Whether `match` names the function a definition or declaration on this
    line introduces (`__device__ void st_flag(int* addr)`), not a call:
    a return type stands right before the name. A target's own helper is a
    spelling where it is called, not where it is written."""
    if not match[0][:1].isidentifier():  # `.store(`, `->load(`: a member call
        return False
    # `ptx::st_release_sys(` is a qualified call; `void ptx::st_release_sys(` defines it.
    before = RETURN_TYPE.search(re.sub(r"(?:\w+::)+$", "", code[: match.start()]))
    return before is not None and (before[1] or before[2]) not in STATEMENT_WORDS


def _site(opened: tuple[str, dict[str, str], int], path: Path, end: int) -> Site:
    """The closed site; a contract value that is not valid (a violation already
    says so) is left out."""
    name, attrs, start = opened

    def value(key: str, kind: type[Enum]) -> Enum | None:
        try:
            return kind(attrs[key]) if key in attrs else None
        except ValueError:
            return None

    return Site(
        name,
        attrs.get("kind", ""),
        attrs.get("guards"),
        path,
        start,
        end,
        producers=value("producers", Group),
        consumers=value("consumers", Group),
        scope=value("scope", Scope),
    )


def _check_header(path: Path, number: int, name: str, attrs: dict, text: str) -> list[Finding]:
    problems = header_problems(name, attrs, ATTR.sub("", text).strip())
    return [Finding(str(path), number, message) for message in problems]


def header_problems(name: str, attrs: dict, leftovers: str = "") -> list[str]:
    """What a site's name and attributes get wrong, as a `// @site` line (its
    `leftovers`: words that are no attribute) or an anchor declares them."""
    problems = []
    if not NAME.match(name):
        problems.append(
            f"site name {name!r} is not dotted lower_case (e.g. cf.attention_dispatch.row_store)"
        )
    kind = attrs.get("kind")
    if kind not in KINDS:
        problems.append(f"site {name}: kind={kind} is not one of {', '.join(KINDS)}")
    unknown = sorted(set(attrs) - {"kind", "guards", *CONTRACT_VALUES})
    if unknown or leftovers:
        problems.append(f"site {name}: unknown attributes {unknown or [leftovers]}")
    return problems + _contract_problems(name, kind, attrs)


def _contract_problems(name: str, kind: str | None, attrs: dict) -> list[str]:
    """What the header's contract attributes get wrong (docs/synchronization.md,
    "The publish contract"): a release or a wait declares all of its own, no
    other kind any, and every value is one its enum knows."""
    problems = []
    needed = CONTRACT.get(kind or "", ())
    missing = [key for key in needed if key not in attrs]
    if missing:
        declare = ", ".join(f"{key}=" for key in needed)
        problems.append(
            f"site {name}: a {kind} must declare {declare}; missing {', '.join(missing)}"
        )
    for key in ("producers", "consumers", "scope", "guards"):
        if key not in attrs or key in needed or kind not in KINDS:
            continue
        owners = " or a ".join(k for k, keys in CONTRACT.items() if key in keys)
        problems.append(f"site {name}: {key}= belongs to a {owners}, not a {kind}")
    for key, allowed in CONTRACT_VALUES.items():
        if key in attrs and attrs[key] not in allowed:
            known = ", ".join(item.value for item in allowed)
            problems.append(f"site {name}: {key}={attrs[key]} is not one of {known}")
    return problems


def anchored_sites(
    root: Path, anchors, declared: list[Site]
) -> tuple[list[Site], list[Finding]]:
    """The sites `anchors` declare in the sources `root`, and, for each that
    cannot be, a finding of that site naming the key at fault: its file
    missing, a text not found exactly once, `end` before `begin`, a name the
    sources declare too, a site overlapping another."""
    root = Path(root)
    sites, problems = [], []
    for anchor in anchors:
        path = root / anchor.file
        try:
            clash = next((s for s in declared if s.name == anchor.name), None)
            if clash is not None:
                raise ValueError(f"declared in the source too ({clash.where()})")
            if not path.is_file():
                raise ValueError(f"file {anchor.file} does not exist in {root}")
            where = Path(anchor.file).as_posix()
            keys = {key: getattr(anchor, key) for key in ("begin", "end", "at", "after")}
            if anchor.lines is not None:
                first, last = anchor.lines
            else:
                first, last = anchored_lines(path.read_text(), where, **keys)
            site = _site((anchor.name, dict(anchor.attrs), first - 1), path, last + 1)
            site = replace(site, anchored=True)
            other = next((s for s in [*declared, *sites] if _overlap(s, site)), None)
            if other is not None:
                span = f"lines {other.lines.start}-{other.lines.stop - 1}"
                raise ValueError(f"overlaps site {other.name} ({span}) in {where}")
            sites.append(site)
        except ValueError as error:
            problems.append(Finding(str(path), None, str(error), site=anchor.name))
    return sites, problems


def _overlap(one: Site, other: Site) -> bool:
    return one.path == other.path and bool(set(one.lines) & set(other.lines))


def parse_tree(
    root: Path, anchors=(), primitives: re.Pattern[str] = PRIMITIVE
) -> tuple[list[Site], list[Finding]]:
    """Every site under `root` and every rule it breaks, read once
    (SourceTree's sites and violations); `primitives`: what the rule calls
    an ordering primitive (invariants.sync.spellings.primitive_pattern:
    CUDA's and the target's own spellings)."""
    tree = SourceTree(root, anchors, primitives)
    return tree.sites, tree.violations


class SourceTree:
    """The sources under `root` (a folder, or one file) parsed once: each
    file's comment sites kept per file, and the tree's sites and violations
    made from them (its comment sites, then the sites `anchors` declare;
    names defined twice, guards naming no site) and kept until a write. A
    write through `write` parses that file alone again, when next asked: the
    stages that read and patch one scratch tree (annotate, apply, bound, the
    contract) share one parse. The texts are not kept: an engine holds every
    tree it prepared for its whole sweep, and the disk has them. No lock:
    the threads that read one tree (its runs) at worst parse a file twice."""

    def __init__(self, root: Path, anchors=(), primitives: re.Pattern[str] = PRIMITIVE):
        self.root = Path(root)
        self.anchors = tuple(anchors)
        self.primitives = primitives
        # Each source file and its parse (None: not parsed since it was listed or written).
        self._files: dict[Path, tuple[list[Site], list[Finding]] | None] | None = None
        self._whole: tuple[list[Site], list[Finding]] | None = None

    def write(self, path: Path, text: str) -> None:
        """`path` made to hold `text`; the tree's sites are those of the new text."""
        path = Path(path)
        path.write_text(text)
        self._whole = None
        if self._files is None:
            return  # not listed yet: the file is read when the tree is
        if path in self._files or (self.root in path.parents and path.suffix in SOURCE_SUFFIXES):
            self._files[path] = None
            self._files = dict(sorted(self._files.items()))  # a new one in source_files' order

    def _parsed(self) -> dict[Path, tuple[list[Site], list[Finding]]]:
        if self._files is None:
            self._files = dict.fromkeys(source_files(self.root))
        for path, parsed in self._files.items():
            if parsed is None:
                check = not _exempt(path, self.root)
                self._files[path] = parse_file(
                    path, check_primitives=check, primitives=self.primitives
                )
        return self._files

    @property
    def comment_sites(self) -> list[Site]:
        """The sites the sources declare in `// @site` comments, in file order."""
        return [site for found, _ in self._parsed().values() for site in found]

    def _sites_and_violations(self) -> tuple[list[Site], list[Finding]]:
        if self._whole is None:
            files = self._parsed().values()
            sites = [site for found, _ in files for site in found]
            violations = [violation for _, problems in files for violation in problems]
            found, problems = anchored_sites(self.root, self.anchors, sites)
            held = {(str(site.path), line) for site in found for line in site.lines}
            violations = [
                v for v in violations if (v.file, v.line) not in held or OUTSIDE not in v.message
            ]
            sites += found
            violations += problems
            first: dict[str, Site] = {}
            for site in sites:
                if site.name in first:
                    again = f"site {site.name} defined again (first at {first[site.name].where()})"
                    violations.append(Finding(str(site.path), site.lines.start, again))
                else:
                    first[site.name] = site
            for site, problem in guard_problems(sites, first):
                violations.append(Finding(str(site.path), site.lines.start, problem))
            self._whole = (sites, violations)
        return self._whole

    @property
    def sites(self) -> list[Site]:
        """Every site: the comment sites, then those `anchors` declare."""
        return list(self._sites_and_violations()[0])

    @property
    def violations(self) -> list[Finding]:
        """Every rule the sources break, across files."""
        return list(self._sites_and_violations()[1])

    def site(self, name: str) -> Site:
        """The site `name`; a LookupError says it is missing or defined more than once."""
        found = [site for site in self._sites_and_violations()[0] if site.name == name]
        if len(found) != 1:
            state = "missing" if not found else f"defined {len(found)} times"
            raise LookupError(f"site {name} is {state}")
        return found[0]

    def guards(self) -> dict[str, str | None]:
        """Each site and the site it guards (None: it guards none), as a
        survivor's hint names them."""
        return {site.name: site.guards for site in self._sites_and_violations()[0]}

    def with_anchors(self, anchors) -> SourceTree:
        """The same sources, not parsed again, read with other anchors (a
        copy, to read: a write to one is not seen by the other)."""
        other = SourceTree(self.root, anchors, self.primitives)
        other._files = dict(self._parsed())
        return other


def guard_problems(sites: list[Site], by_name: dict[str, Site]) -> list[tuple[Site, str]]:
    """Each site whose `guards=` names no site, or one that is no store or compute site."""
    problems = []
    for site in sites:
        guarded = by_name.get(site.guards) if site.guards is not None else None
        if site.guards is not None and guarded is None:
            problems.append((site, f"site {site.name} guards unknown site {site.guards}"))
        elif guarded is not None and guarded.kind not in GUARDABLE_KINDS:
            problems.append(
                (
                    site,
                    f"site {site.name} guards {site.guards}, a {guarded.kind} site: "
                    f"a site guards a {' or '.join(GUARDABLE_KINDS)} site",
                )
            )
    return problems


def site_body(site: Site) -> list[str]:
    """The source lines strictly between the site's markers (anchored: its lines)."""
    lines = site.path.read_text().splitlines()
    return lines[site.start : site.end - 1]



def published_store(release: Site, sites: list[Site]) -> Site | None:
    """The site whose data `release` publishes: its `guards=`, else the
    nearest store site above it in its file (a compute site when there is no
    store), one of the release's own stage (`cf.attention_dispatch.`) first."""
    by_name = {site.name: site for site in sites}
    if release.guards:
        return by_name.get(release.guards)
    stage = release.name.rsplit(".", 1)[0] + "."
    above = [
        site
        for site in sites
        if site.path == release.path
        and site.lines.stop <= release.lines.start
        and site.kind in GUARDABLE_KINDS
    ]
    if not above:
        return None
    return max(above, key=lambda s: (s.name.startswith(stage), s.kind == SiteKind.STORE, s.start))
