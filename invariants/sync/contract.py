"""The publish contract, checked with no GPU (docs/synchronization.md, "The
publish contract"). Each release site declares whose stores it publishes and
at what scope, each wait who reads after it and at what scope; this module
proves each declaration twice:

- on the source, with the target's spellings (`[target.contract]`): a barrier
  of the producers' group before the publish, the publish a release of the
  scope (or a fence of the scope before a relaxed store), the guarded store
  site ending before the release starts when both lie in one function; an acquire of the scope in a wait
  (or a relaxed load then a fence), then a barrier of the consumers' group;
  a barrier under a condition that parts its group counts for none of it
  (invariants/sync/thread_conditions.py);
- on the PTX of every kernel variant, the compiler's truth, through `.loc`:
  every path back from each publish meets a barrier the whole group reaches
  before a data store, the publish is `st/red/atom.release.<scope>` or follows a fence
  of the scope, and every path on from a wait's acquire meets the consumers'
  barrier before a data load.

The PTX side (making, caching and reading the PTX) is invariants/sync/ptx_check.py,
over the reader invariants/sync/ptx_read.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from invariants.sync.divergence import splits
from invariants.sync.finding import Finding, tree_relative
from invariants.sync.functions import NAMED_CALL, enclosing, file_definitions
from invariants.sync.ptx_check import covers, ptx_folder
from invariants.sync.ptx_memo import Memo, remembered_findings
from invariants.sync.ptx_read import PtxError
from invariants.sync.sites import Group, Scope, Site, SourceTree, site_body, source_files
from invariants.sync.statements import code_only
from invariants.sync.spellings import ContractSpellings, ContractTarget, spelling
from invariants.sync.thread_conditions import Condition, ThreadConditions

__all__ = [
    "ContractReport",
    "Finding",
    "PtxError",
    "TreeContract",
    "check_contracts",
    "static_contract",
    "tree_relative",
]


@dataclass
class ContractReport:
    violations: list[Finding] = field(default_factory=list)
    sites_checked: int = 0
    variants_checked: int = 0
    ptx_seconds: float = 0.0  # writing (or finding cached) and reading the PTX
    ptx_cached: bool = False

    @property
    def ok(self) -> bool:
        return not self.violations


# A tree's root and its sources (parsed already) -> its static contract
# violations on one line, or None.
TreeContract = Callable[[Path, SourceTree], str | None]


def static_contract(target: ContractTarget) -> TreeContract | None:
    """The check of a tree (source and PTX) on one line, for the engine's
    survivors; None for a target that declares no [target.contract]: then no
    survivor is UNOBSERVABLE."""
    if target.contract is None:
        return None

    def violations(tree: Path, sources: SourceTree) -> str | None:
        report = check_contracts(tree, target, ptx=True, sources=sources)
        return "; ".join(str(v.from_root(tree)) for v in report.violations) or None

    return violations


def contracted(sites: list[Site]) -> list[Site]:
    """The releases and waits whose contract parsed (a malformed one is a site violation)."""
    return [
        s
        for s in sites
        if s.kind in ("release", "wait") and s.scope is not None and (s.producers or s.consumers)
    ]


def check_contracts(
    tree_root: Path,
    catalog_target: ContractTarget,
    *,
    ptx: bool = True,
    sources: Path | SourceTree | None = None,
    cache: Path | None = None,
) -> ContractReport:
    """Every contract of the sources (default: the target's under `tree_root`;
    a SourceTree: sources parsed already, with their own anchors), on the
    source, and on the PTX when `ptx` and the catalog names its command.
    A target without `[target.contract]` has nothing to check: an empty report
    (sites_checked 0). Raises PtxError for PTX that cannot be made or read."""
    spellings = catalog_target.contract
    if spellings is None:
        return ContractReport()
    if isinstance(sources, SourceTree):
        parsed = sources
    else:
        root = Path(sources) if sources is not None else Path(tree_root) / catalog_target.sources
        parsed = SourceTree(root, catalog_target.anchors)
    sources, sites = parsed.root, parsed.sites
    checked = contracted(sites)
    by_name = {site.name: site for site in sites}
    report = ContractReport(sites_checked=len(checked))
    conditions, helpers = ThreadConditions(sources), Helpers(sources)
    for site in checked:
        report.violations += source_findings(site, by_name, spellings, conditions, helpers)
    if ptx and spellings.ptx and checked:  # no release or wait: no PTX to hold to one
        started = time.perf_counter()
        folder, report.ptx_cached = ptx_folder(Path(tree_root), sources, catalog_target, cache)
        # Beside the PTX folders (each a tree's), never among them: they are evicted by count.
        memo = Memo(folder.parent.with_name(f"{folder.parent.name}-findings"))
        found, report.variants_checked = remembered_findings(checked, sources, folder, sites, memo)
        report.violations += found
        report.ptx_seconds = time.perf_counter() - started
    return report


# --------------------------------------------------------- source findings
@dataclass(frozen=True, order=True)
class Call:
    line: int
    column: int
    name: str


def _calls(helpers: Helpers, site: Site, patterns: Iterable) -> list[Call]:
    """The calls of the site's code (comments left out) that `patterns` spell,
    and those of the sources' functions whose bodies make one (a helper), in order."""
    patterns, found = list(patterns), set()
    for offset, text in enumerate(site_body(site)):
        code = text.split("//", 1)[0]
        for pattern in patterns:
            for match in pattern.finditer(code):
                name = match[0].rstrip("( \t")
                found.add(Call(site.start + 1 + offset, match.start(), name))
        for match in NAMED_CALL.finditer(code):
            if patterns and helpers.makes(match[1], patterns):
                found.add(Call(site.start + 1 + offset, match.start(1), match[1]))
    return sorted(found)


HELPER_DEPTH = 3  # calls followed into the sources' functions from a site


class Helpers:
    """The functions of the sources, read once each by name: whether one's
    body, or a function it calls (HELPER_DEPTH deep), makes a call a
    pattern spells. A release moved into a helper the site calls is the
    site's release, as the PTX sees it once inlined."""

    def __init__(self, sources: Path):
        self.sources = sources
        self._bodies: dict[str, list[str]] | None = None

    def bodies(self, name: str) -> list[str]:
        """The code of each definition of `name` (every file read once, when first asked)."""
        if self._bodies is None:
            self._bodies = {}
            for path in source_files(self.sources) if self.sources.is_dir() else ():
                text = path.read_text()
                code = code_only(text)
                for d in file_definitions(path, text):
                    called = text[d.name : d.body].split("(")[0].split("::")[-1].strip()
                    self._bodies.setdefault(called, []).append(code[d.body : d.close])
        return self._bodies.get(name, [])

    def makes(self, name: str, patterns: list, depth: int = HELPER_DEPTH) -> bool:
        for body in self.bodies(name) if depth else ():
            if any(p.search(body) for p in patterns):
                return True
            called = {m[1] for m in NAMED_CALL.finditer(body)} - {name}
            if any(self.makes(c, patterns, depth - 1) for c in called):
                return True
        return False


def _scoped(table: dict, scope: Scope, *, covering: bool) -> list:
    """The spellings of the scopes that cover `scope` (or, not `covering`, of the weaker ones)."""
    return [table[s.value] for s in Scope if s.value in table and s.covers(scope) == covering]


def _named(patterns: list, what: str) -> str:
    return "|".join(spelling(p) for p in patterns) or f"{what} (the catalog spells none)"


def _barriers(
    site: Site, sp: ContractSpellings, group: Group, conditions: ThreadConditions, helpers: Helpers
) -> tuple[str, list[Call], list[tuple[Call, Condition]]]:
    """How the group's own barrier is spelled, the calls of it (or of a
    larger group's) in the site that every thread of the group reaches, and
    those under a condition that parts them, each with that condition."""
    own = [sp.barrier[group.value]] if group.value in sp.barrier else []
    spelled = [sp.barrier[g.value] for g in Group if g.value in sp.barrier and covers(g, group)]
    reached, partial = [], []
    for call in _calls(helpers, site, spelled):
        around = conditions.around(site.path, call.line, call.column)
        parting = next((c for c in around if splits(c.spread, group)), None)
        if parting is None:
            reached.append(call)
        else:
            partial.append((call, parting))
    return _named(own, f"barrier.{group.value}"), reached, partial


def _skipped(partial: list[tuple[Call, Condition]], counts: Callable[[Call], bool]) -> str:
    """Why the first barrier of `partial` that would count does not; else nothing."""
    for call, condition in partial:
        if counts(call):
            return (
                f": the {call.name} at line {call.line} is under `{condition.text}`, which"
                f" {condition.spread.said}: the threads that skip it are not covered"
            )
    return ""


def source_findings(
    site: Site,
    by_name: dict[str, Site],
    spellings: ContractSpellings,
    conditions: ThreadConditions,
    helpers: Helpers,
) -> list[Finding]:
    check = _release_source if site.kind == "release" else _wait_source
    found = dict.fromkeys(check(site, by_name, spellings, conditions, helpers))
    return [Finding(str(site.path), line, what, site.name) for line, what in found]


def _release_source(
    site: Site,
    by_name: dict[str, Site],
    sp: ContractSpellings,
    conditions: ThreadConditions,
    helpers: Helpers,
) -> list:
    """A barrier of the producers, then a release of the scope (or a fence of
    it, then a relaxed store), after the guarded site's end."""
    scope, group, findings = site.scope.value, site.producers, []
    guarded = by_name.get(site.guards or "")
    if (
        guarded is not None
        and guarded.lines.stop > site.lines.start
        and _same_function(guarded, site)
    ):
        where = f"{guarded.name} (lines {guarded.lines.start}-{guarded.lines.stop - 1})"
        said = f"the guarded site {where} does not end before it starts"
        findings.append((site.lines.start, said))
    releases = _scoped(sp.release, site.scope, covering=True)
    weak = _calls(helpers, site, _scoped(sp.release, site.scope, covering=False))
    relaxed = _calls(helpers, site, [sp.store] if sp.store else [])
    spelt = set(weak) | set(relaxed) | set(_calls(helpers, site, releases))
    atomics = [call for call in _calls(helpers, site, [CUDA_ATOMIC]) if call not in spelt]
    fence_spellings = _scoped(sp.fence, site.scope, covering=True)
    fences = _calls(helpers, site, fence_spellings)
    barrier, barriers, partial = _barriers(site, sp, group, conditions, helpers)
    publishes = sorted([*_calls(helpers, site, releases), *weak, *relaxed, *atomics])
    if not publishes:
        missing = _named(releases, f"release.{scope}")
        return [*findings, (site.lines.start, f"no publish: no {missing} in the site")]
    for call in publishes:
        fenced = any(
            f < call and (group == Group.THREAD or any(b < f for b in barriers)) for f in fences
        )
        unreleased = f"publish {call.name} is no release at scope {scope}"
        if call in weak:
            findings.append((call.line, f"{unreleased}: it releases at a narrower scope"))
        elif (call in relaxed or call in atomics) and not fenced:
            fence = _named(fence_spellings, f"fence.{scope}")
            findings.append((call.line, f"{unreleased} and no {fence} precedes it"))
        elif call in atomics and not atomic_scope(call.name).covers(site.scope):
            reach = atomic_scope(call.name).value
            findings.append(
                (call.line, f"{unreleased}: a relaxed atomic at scope {reach}, the fence "
                 f"before it publishes at {reach}")
            )
        if group != Group.THREAD and not any(b < call for b in barriers):
            why = _skipped(partial, lambda b, publish=call: b < publish)
            findings.append((call.line, f"no {barrier} before the publish {call.name}{why}"))
    return findings


# CUDA's atomics: relaxed read-modify-writes at the device's scope, or the
# system's or the block's by their suffix; after a fence, a publish as far
# as their scope reaches.
CUDA_ATOMIC = re.compile(
    r"\batomic(?:Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(?:_system|_block)?\s*\("
)
ATOMIC_SCOPES = {"_system": Scope.SYS, "_block": Scope.CTA}


def atomic_scope(name: str) -> Scope:
    """`atomicAdd_system` -> sys, `atomicAdd_block` -> cta, `atomicAdd` -> gpu."""
    return next((s for suffix, s in ATOMIC_SCOPES.items() if name.endswith(suffix)), Scope.GPU)


def _same_function(one: Site, other: Site) -> bool:
    """Whether two sites lie in one function's body, where their lines order
    them; a release in a function the guarded site's function calls (a
    barrier's member, defined above the kernel) is ordered by the call, not
    by where the text sits."""
    if one.path != other.path:
        return False
    where = enclosing(one.path, one.lines.start), enclosing(other.path, other.lines.start)
    return (where[0] and where[0].body) == (where[1] and where[1].body)


def _wait_source(
    site: Site,
    by_name: dict[str, Site],
    sp: ContractSpellings,
    conditions: ThreadConditions,
    helpers: Helpers,
) -> list:
    """An acquire of the scope (or a relaxed load, then a fence of it), then a
    barrier of the consumers."""
    scope, group = site.scope.value, site.consumers
    acquire_spellings = _scoped(sp.acquire, site.scope, covering=True)
    fence_spellings = _scoped(sp.fence, site.scope, covering=True)
    loads = _calls(helpers, site, [sp.load] if sp.load else [])
    fenced = [f for f in _calls(helpers, site, fence_spellings) if any(load < f for load in loads)]
    points = sorted([*_calls(helpers, site, acquire_spellings), *fenced])
    if not points:
        weak = _calls(helpers, site, _scoped(sp.acquire, site.scope, covering=False))
        if weak:
            return [(weak[0].line, f"acquire {weak[0].name} is no acquire at scope {scope}")]
        acquire = _named(acquire_spellings, f"acquire.{scope}")
        fence = _named(fence_spellings, f"fence.{scope}")
        said = f"no acquire at scope {scope}: no {acquire}, nor a load then {fence}"
        return [(site.lines.start, said)]
    if group == Group.THREAD:
        return []
    barrier, barriers, partial = _barriers(site, sp, group, conditions, helpers)
    findings = []
    for point in points:
        if not any(b > point for b in barriers):
            why = _skipped(partial, lambda b, acquire=point: b > acquire)
            findings.append((point.line, f"no {barrier} after the acquire {point.name}{why}"))
    return findings
