"""Uses grouped into proposed sites: a release is a release-spelled store, or
a fence then a relaxed store, from the barrier just before it when there is
one (producers: that barrier's group, else thread); a wait is an acquire, or
the spin loop around it, through the barrier just after it when there is one
(consumers: its group). Each site is given by anchors, the shortest text the
file holds once; a release's stores before it are proposed as the store site
it guards. A proposal overlapping a site the tree already declares (a
`// @site` comment) is left out (docs/tools.md, "Onboarding a codebase")."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import groupby
from pathlib import PurePosixPath

from faults.init.lines import Lines
from faults.init.scan import Form, Scan, Use
from invariants.sync.sites import Group, Scope, Site, SiteKind, parse_tree

BARRIER_REACH = 3  # code lines between a barrier and the release or wait it belongs to
FENCE_REACH = 4  # code lines between a fence and the relaxed access it orders
SPIN_REACH = 12  # lines from a spin loop's first line to its acquire
GROUPS = {"block": Group.BLOCK, "warp": Group.WARP, "grid": Group.GRID}


@dataclass(frozen=True)
class Proposal:
    """One proposed site: its name, kind and contract, the lines it spans,
    and the anchors that find them (`at`, or `begin` and `end`)."""

    name: str
    kind: SiteKind  # store, release or wait: init proposes no compute site
    path: str
    line: int  # its primitive's line (a store site: its first line)
    start: int
    end: int
    at: str | None = None
    begin: str | None = None
    end_text: str | None = None
    after: str | None = None  # where `at` or `begin` is text the file repeats
    group: Group | None = None  # producers of a release, consumers of a wait
    scope: Scope | None = None
    guards: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def anchored(self) -> bool:
        return self.at is not None or (self.begin is not None and self.end_text is not None)


def propose(scan: Scan) -> list[Proposal]:
    """Every file's proposals, in file and line order, named and guarded."""
    return proposed(scan)[0]


def proposed(scan: Scan) -> tuple[list[Proposal], dict[Use, str]]:
    """`propose`'s proposals, and each use left out for a reason only
    proposing finds (a site that would overlap another's, a statement no
    anchor finds once), with that reason."""
    proposals: list[Proposal] = []
    overlapped: dict[Use, str] = {}
    for path, source in scan.files.items():
        lines = Lines(source.text, source.code)
        uses = [u for u in scan.uses if u.path == path]
        found: list[Proposal] = []
        for _, group in groupby(uses, key=lambda u: u.function):
            found += function_proposals(lines, list(group), found, overlapped)
        proposals += with_stores(lines, named(found))
        proposals += lone_stores(lines, uses, proposals, overlapped)
    return guarded(proposals), overlapped


def lone_stores(
    lines: Lines, uses: list[Use], made: list[Proposal], unanchored: dict[Use, str]
) -> list[Proposal]:
    """A store site at each relaxed store (a lone `atomic*`, say) no proposal
    holds: it publishes nothing, but the site rule wants every ordering
    primitive inside a site, and a store site says what it is until the
    user makes it a release (an arrival counter) or leaves it data.
    `unanchored` gets each whose statement no anchor finds once."""
    out: list[Proposal] = []
    for use in uses:
        if use.action != "store" or use.volatile:
            continue
        if any(p.path == use.path and p.start <= use.line <= p.end for p in [*made, *out]):
            continue
        start = lines.statement_start(use.line, lines.depth(use.line))
        end = lines.statement_end(start)
        note = (
            "a relaxed store alone: a store site so the site rule holds; if it publishes "
            "(an arrival counter a spin reads), make it a release and its reader a wait"
        )
        site = _anchored(lines, SiteKind.STORE, use, start, end, None, None, (note,))
        if not site.anchored:
            times = lines.occurrences(lines.span_text(start, end))
            unanchored[use] = (
                f"a relaxed store alone, whose statement the file holds {times} times with "
                "another between it and the nearest line held once: no anchor finds it "
                "(declare a wider store site by hand)"
            )
            continue
        if any(_overlap(site, p) for p in [*made, *out]):
            continue
        out.append(site)
    return named(out, taken={p.name for p in made})


@dataclass(frozen=True)
class Unproposed:
    """A use of an ordering primitive no proposed site holds, and why."""

    use: Use
    why: str

    def said(self) -> str:
        return f"{self.use.path}:{self.use.line} {self.use.name} ({self.use.key}): {self.why}"


def unproposed(
    scan: Scan, kept: list[Proposal], overlapped: dict[Use, str], declared: list[Site]
) -> list[Unproposed]:
    """Every use that no kept proposal holds, with why none does: a starter
    names each ordering use, proposed or not (`declared`: the sites the
    sources' `// @site` comments declare, `declared_sites`)."""

    def holds(proposal: Proposal, use: Use) -> bool:
        return proposal.path == use.path and proposal.start <= use.line <= proposal.end

    def inside_declared(use: Use) -> bool:
        path = scan.root if scan.root.is_file() else scan.root / use.path
        return any(site.path == path and use.line in site.lines for site in declared)

    found = []
    for use in scan.uses:
        if any(holds(p, use) for p in kept):
            continue
        if inside_declared(use):
            why = "inside a site the sources already declare (`// @site`)"
        else:
            why = overlapped.get(use) or _why_not(scan, use)
        found.append(Unproposed(use, why))
    return found


def _why_not(scan: Scan, use: Use) -> str:
    """Why a use alone makes no site (docs/tools.md, "Onboarding a codebase")."""
    action = use.action
    if action == "barrier":
        return (
            f"no proposed release or wait within {BARRIER_REACH} code lines of the barrier "
            "(a site takes its producers or consumers from a barrier beside it)"
        )
    if action == "fence":
        return f"no store or release within {FENCE_REACH} code lines after the fence"
    if action == "store":
        return (
            "a relaxed store with no fence before it publishes nothing: if it is a flag, "
            "make it a release site; if it is data, the store site a release guards"
        )
    if action == "load":
        lines = Lines(scan.files[use.path].text, scan.files[use.path].code)
        if lines.enclosing_loop(use.line, SPIN_REACH) is None:
            return "a relaxed load in no spin loop: no wait"
    return "no site could be anchored on it"


def function_proposals(
    lines: Lines, uses: list[Use], before: list[Proposal], overlapped: dict[Use, str] | None = None
) -> list[Proposal]:
    """The releases and waits of one function's uses, none overlapping
    another; a wait whose barrier after it would take in another site is
    proposed as its loop alone (consumers: thread). `overlapped` gets each
    release or wait left out because its site would overlap another's."""
    made: list[Proposal] = []
    claimed: set[int] = set()
    for index, use in enumerate(uses):
        if index in claimed or any(p.start <= use.line <= p.end for p in [*before, *made]):
            continue
        taken = [index]
        if use.action == "fence":
            nxt = _next(uses, index, claimed)
            if nxt is None or not _near(lines, use.line, uses[nxt].line, FENCE_REACH):
                continue
            if uses[nxt].action in ("store", "release"):
                taken.append(nxt)
        proposal = _release(lines, uses, taken, claimed) if _releases(uses, taken) else None
        if proposal is None and _waits(lines, use):
            was_claimed = set(claimed)
            proposal = _wait(lines, uses, index, claimed)
            if _overlapping(proposal, [*before, *made]) and proposal.group is not Group.THREAD:
                claimed.intersection_update(was_claimed)  # the barrier goes back
                barrier = proposal.end
                proposal = _wait(lines, uses, index, claimed, through_barrier=False)
                proposal = replace(proposal, notes=(*proposal.notes, (
                    f"consumers thread: the barrier that ends at line {barrier} would take in "
                    "another site; if it delivers the acquire, set consumers and move the anchors"
                )))  # fmt: skip
        if proposal is None:
            continue
        other = _overlapping(proposal, [*before, *made])
        if other is not None:
            if overlapped is not None:
                overlapped[use] = (
                    f"its site would overlap the {other.kind.value} site proposed at line "
                    f"{other.line}"
                )
            continue
        claimed.update(i for i, u in enumerate(uses) if proposal.start <= u.line <= proposal.end)
        made.append(proposal)
    return made


def _overlapping(proposal: Proposal, others: list[Proposal]) -> Proposal | None:
    return next((p for p in others if _overlap(proposal, p)), None)


def _releases(uses: list[Use], taken: list[int]) -> bool:
    last = uses[taken[-1]]
    return last.action == "release" or (
        last.action == "store" and (len(taken) == 2 or last.volatile)
    )  # a fence alone, or a relaxed store alone, publishes nothing


def _waits(lines: Lines, use: Use) -> bool:
    if use.action == "acquire":
        return True
    spins = lines.enclosing_loop(use.line, SPIN_REACH) is not None
    return use.action == "load" and (use.volatile or spins)


def _next(uses: list[Use], index: int, claimed: set[int]) -> int | None:
    return next((i for i in range(index + 1, len(uses)) if i not in claimed), None)


def _near(lines: Lines, first: int, last: int, reach: int, depth: int | None = None) -> bool:
    """Whether at most `reach` code lines lie between `first` and `last`,
    none above `depth` (default: `first`'s; no block closes between them)."""
    between = [n for n in range(first + 1, last) if lines.code(n)]
    depth = lines.depth(first) if depth is None else depth
    return len(between) <= reach and all(lines.depth(n) >= depth for n in range(first, last + 1))


def _release(lines: Lines, uses: list[Use], taken: list[int], claimed: set[int]) -> Proposal:
    first, last = uses[taken[0]], uses[taken[-1]]
    scope = last.qualifier or first.qualifier  # a relaxed store's is its fence's
    previous = max((i for i in range(taken[0]) if i not in claimed), default=None)
    barrier = uses[previous] if previous is not None else None
    group = Group.THREAD
    start = lines.statement_start(first.line, lines.depth(first.line))
    just_before = barrier is not None and barrier.action == "barrier"
    if just_before and _near(lines, barrier.line, first.line, BARRIER_REACH):
        group, start = GROUPS[barrier.qualifier], barrier.line
        claimed.add(previous)
    end = lines.statement_end(lines.statement_start(last.line, lines.depth(start)))
    notes = _notes([uses[i] for i in taken])
    if last.action == "store" and len(taken) == 1:
        notes += ("relaxed (volatile) — no release: no fence before the store",)
    if not scope:  # a volatile store alone says no scope: the widest is proposed, and said
        scope = "sys"
        notes += ("scope not spelt (no fence, no release): sys proposed",)
    return _anchored(lines, SiteKind.RELEASE, last, start, end, group, Scope(scope), notes)


def _wait(
    lines: Lines, uses: list[Use], index: int, claimed: set[int], *, through_barrier: bool = True
) -> Proposal:
    use = uses[index]
    loop = lines.enclosing_loop(use.line, SPIN_REACH)
    start = loop or lines.statement_start(use.line, lines.depth(use.line))
    end = lines.statement_end(start)
    scope, notes = use.qualifier or "sys", _notes([use])
    if use.action == "load":
        fence = next((u for u in uses[index + 1 :] if u.line <= end and u.action == "fence"), None)
        scope = (fence.qualifier if fence else "") or "sys"
        if fence is None and not use.volatile:
            notes += ("relaxed — no acquire: no fence after the load",)
    group = Group.THREAD
    following = _next(uses, index, claimed)
    while following is not None and uses[following].line <= end:
        following = _next(uses, following, claimed)
    barrier = uses[following] if following is not None and through_barrier else None
    if barrier and barrier.action == "barrier" and barrier.qualifier in ("block", "warp"):
        depth = lines.depth(barrier.line)
        outer = lines.statement_start(start, depth)
        outer_end = lines.statement_end(outer)
        near = _near(lines, outer_end, barrier.line, BARRIER_REACH, depth)
        if lines.depth(start) >= depth and near:
            group, start, end = GROUPS[barrier.qualifier], outer, lines.statement_end(barrier.line)
            claimed.add(following)
    return _anchored(lines, SiteKind.WAIT, use, start, end, group, Scope(scope), notes)


def _notes(uses: list[Use]) -> tuple[str, ...]:
    notes = []
    for use in uses:
        if use.volatile and use.action == "load":
            notes.append("relaxed (volatile) — no acquire")
        if use.form is Form.ASM:
            notes.append(f"inline asm `{use.name}`: the contract reads calls; wrap it in a helper")
        if use.form is Form.MEMBER:
            notes.append(
                f"member call .{use.name}(memory_order_...): the contract matches called names; "
                "its scope is the atomic's thread_scope"
            )
    return tuple(notes)


def _anchored(lines: Lines, kind: SiteKind, use: Use, start: int, end: int, group, scope, notes):
    """The proposal with its anchors: `at` when it is one statement, else `begin`/`end`."""
    base = Proposal("", kind, use.path, use.line, start, end, group=group, scope=scope, notes=notes)
    return anchors(lines, base, function=use.function)


def anchors(lines: Lines, proposal: Proposal, function: str = "") -> Proposal:
    """The proposal with the shortest anchors the file holds once; where its
    first line's text repeats in the file, that text and `after`, the
    nearest line above it the file holds once."""
    if lines.statement_end(proposal.start) == proposal.end:
        at = lines.anchor_from(proposal.start, proposal.end)
        if at is not None:
            return replace(proposal, at=at, name=function)
        at = lines.span_text(proposal.start, proposal.start)
        after = lines.after_anchor(proposal.start, at)
        return replace(proposal, at=at if after else None, after=after, name=function)
    # Text inside the site first; `begin` may reach past its end where the
    # file tells two alike sites apart, but `end` starts no earlier than
    # `begin` (two identical branches: no `end` finds one of them once).
    begin = lines.anchor_from(proposal.start, proposal.end - 1) or lines.anchor_from(proposal.start)
    end = lines.anchor_to(proposal.end, proposal.start + 1) or lines.anchor_to(
        proposal.end, proposal.start
    )
    if begin is not None and end is not None:
        return replace(proposal, begin=begin, end_text=end, name=function)
    begin = lines.span_text(proposal.start, proposal.start)
    end = lines.span_text(proposal.end, proposal.end)
    after = lines.after_anchor(proposal.start, begin)
    if lines.found_from(end, proposal.start) != proposal.end:
        after = None  # `end` is found first elsewhere after `begin`: no anchors find the site
    if after is None:
        return replace(proposal, name=function)
    return replace(proposal, begin=begin, end_text=end, after=after, name=function)


def _overlap(one: Proposal, other: Proposal) -> bool:
    return one.path == other.path and one.start <= other.end and other.start <= one.end


def with_stores(lines: Lines, proposals: list[Proposal]) -> list[Proposal]:
    """Each release after the store site it guards: the statements before it
    in its block, after any proposal before it."""
    out: list[Proposal] = []
    for proposal in proposals:
        if proposal.kind is SiteKind.RELEASE:
            floor = max((p.end for p in out), default=0)
            store = _store_before(lines, proposal, floor)
            if store is not None:
                out.append(store)
                proposal = replace(proposal, guards=store.name)
        out.append(proposal)
    return out


def _store_before(lines: Lines, release: Proposal, floor: int) -> Proposal | None:
    depth, first = lines.depth(release.start), release.start
    while first - 1 > floor and lines.depth(first - 1) >= depth:
        if _opens(lines, first - 1, depth):
            break
        first -= 1
    while first < release.start and (not lines.code(first) or lines.depth(first) != depth):
        first += 1
    last = lines.previous_code(release.start)
    if first >= release.start or last < first:
        return None
    name = release.name.rsplit(".", 1)[0] + ".store" + _suffix(release.name)
    store = anchors(lines, Proposal(name, SiteKind.STORE, release.path, first, first, last))
    return replace(store, name=name) if store.anchored else None


def _opens(lines: Lines, number: int, depth: int) -> bool:
    """Whether line `number` opens the block at `depth` (`{`, `} else {`)."""
    return lines.code(number).endswith("{") and lines.depth(number + 1) == depth


def _suffix(name: str) -> str:
    match = re.search(r"(_\d+)$", name)
    return match[1] if match else ""


def named(
    proposals: list[Proposal], taken: set[str] | frozenset[str] = frozenset()
) -> list[Proposal]:
    """`<file stem>.<function>.<kind>[_n]`, lower_case (`name` holds the
    function), `_n` the first number no earlier proposal nor `taken` has."""
    used, out = set(taken), []
    for proposal in proposals:
        stem = snake(PurePosixPath(proposal.path).name.split(".")[0])
        base = f"{stem}.{snake(proposal.name) or 'file'}.{proposal.kind.value}"
        name, number = base, 1
        while name in used:
            number += 1
            name = f"{base}_{number}"
        used.add(name)
        out.append(replace(proposal, name=name))
    return out


def snake(word: str) -> str:
    """A lower_case name part: camelCase split, other characters `_`, a letter first."""
    word = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", word.split("::")[-1]).lower()
    word = re.sub(r"[^a-z0-9_]+", "_", word).strip("_")
    return re.sub(r"^[0-9_]+", "", word)


def guarded(proposals: list[Proposal]) -> list[Proposal]:
    """Each wait guards the first store site (a guess the starter says to check)."""
    stores = [p.name for p in proposals if p.kind is SiteKind.STORE]
    return [
        replace(p, guards=stores[0]) if p.kind is SiteKind.WAIT and stores else p for p in proposals
    ]


def declared_sites(scan: Scan) -> list[Site]:
    """The sites the scanned tree's `// @site` comments declare, parsed once."""
    return parse_tree(scan.root)[0]


def undeclared(
    scan: Scan, proposals: list[Proposal], declared: list[Site] | None = None
) -> tuple[list[Proposal], int]:
    """The proposals that overlap no site the tree's `// @site` comments
    declare (a catalog declaring both would fail `sites --check`), and how
    many were left out. A kept release guarding a store left out guards none
    (the starter's TODO); the waits' guess is made again from the stores kept."""
    declared = declared_sites(scan) if declared is None else declared

    def overlaps(proposal: Proposal) -> bool:
        path = scan.root if scan.root.is_file() else scan.root / proposal.path
        lines = set(range(proposal.start, proposal.end + 1))
        return any(site.path == path and lines & set(site.lines) for site in declared)

    kept = [p for p in proposals if not overlaps(p)]
    names = {p.name for p in kept}
    kept = [p if p.guards in names else replace(p, guards=None) for p in kept]
    return guarded(kept), len(proposals) - len(kept)
