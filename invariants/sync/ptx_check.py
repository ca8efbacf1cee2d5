"""The publish contract on the PTX of every kernel variant, the compiler's
truth (docs/synchronization.md, "The publish contract"): the catalog's `ptx`
command writes it (cached by the digest of the sources and that command),
invariants/sync/ptx_read.py reads it, and each release and wait site is held to its
contract through the source lines `.loc` gives its instructions (an inlined
instruction lies on every line of its inline chain: a helper's asm counts at
the call the site makes):

- a release: every path back from each publish (a global store, red or atom
  of the site) meets a barrier of the producers' group (warp: bar.warp.sync;
  block: bar.sync 0) before another data store; the publish is a release of
  the scope, or a fence of the scope lies between that barrier and it;
- a wait: an acquire of the scope (ld.acquire, a call whose body acquires,
  or a relaxed load then a fence), then, for a warp or a block, every path on
  meets its barrier before a data load outside the site or the end.

A barrier counts only where its whole group reaches it: one under a branch
that parts the group (invariants/sync/ptx_divergence.py) is skipped by some
of its threads, and the finding says which barrier and which branch.

And the guarded data (docs/synchronization.md, "The guarded data";
invariants/sync/ptx_dataflow.py): its loads are coherent, after an acquire
in their iteration, and by no consumer a wait's branch sends past it; its
stores are each followed by a release of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hostio import cache_home
from invariants.sync.divergence import Spread, splits
from invariants.sync.finding import Finding
from invariants.sync.ptx_dataflow import Bases, access_bases, guarded_bases
from invariants.sync.ptx_instruction import SCOPE_RANK
from invariants.sync.ptx_read import Function, Module, PtxError, read_module
from invariants.sync.ptx_compile import run_ptx
from invariants.sync.ptx_units import compile_units
from invariants.sync.sites import Group, Site
from invariants.sync.spellings import ContractSpellings, ContractTarget

BARRIER_PTX = {Group.WARP: "bar.warp.sync", Group.BLOCK: "bar.sync", Group.GRID: "bar.sync"}
CACHE_ENTRIES = 8  # PTX folders kept per target: the trees a review compares, and some
UNITS = "units"  # beside the folders: each translation unit's PTX (invariants/sync/ptx_units.py)


def default_cache(target: ContractTarget) -> Path:
    return cache_home() / "faults" / target.name / "ptx"


def sources_digest(sources: Path, command: tuple[str, ...], inputs: tuple[Path, ...] = ()) -> str:
    """The PTX's cache key: the command's words, then every file under the
    sources and under each of the command's other `inputs` (a file or a
    folder; relative path, bytes; one not there counts as absent)."""
    digest = hashlib.sha256("\0".join(command).encode() + b"\0\0")
    for top in (sources, *inputs):
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        digest.update(top.name.encode() + (b"\0" if top.exists() else b"\0absent\0"))
        for path in files:
            digest.update(path.relative_to(top.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def ptx_folder(
    tree_root: Path, sources: Path, target: ContractTarget, cache: Path | None = None
) -> tuple[Path, bool]:
    """The folder holding the PTX of every variant of `sources`, and whether
    it was cached; otherwise the `ptx` command writes it (in `tree_root`, that
    tree first on PYTHONPATH, as the build stage runs)."""
    spellings: ContractSpellings = target.contract
    root = Path(cache) if cache is not None else default_cache(target)
    inputs = tuple(Path(tree_root) / name for name in spellings.ptx_inputs)
    folder = root / sources_digest(sources, (*spellings.ptx, *spellings.ptx_units), inputs)
    if (folder / "index.json").is_file():
        with contextlib.suppress(OSError):  # evicted by another check meanwhile: read as it is
            os.utime(folder)
        return folder, True
    root.mkdir(parents=True, exist_ok=True)
    _clear_killed(root, target.timeout_s)
    # Written in a temporary sibling and renamed whole: no reader, nor a later
    # check, ever sees a folder half made.
    out = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}."))
    values = {"python": sys.executable, "tree": tree_root, "sources": sources, "out": out}
    values = {key: str(value) for key, value in values.items()}
    paths = [str(tree_root), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, **target.env, "PYTHONPATH": os.pathsep.join(paths), "PYTHONSAFEPATH": "1"}
    # Its own log, beside its own folder: two checks of one tree at once (two
    # reviews of one BASE) must not write, read or remove each other's log.
    log = out.with_name(f"{out.name}.log")
    try:
        if spellings.ptx_units:
            index = compile_units(
                spellings.ptx, spellings.ptx_units, Path(tree_root), out, root / UNITS,
                values=values, env=env, timeout_s=target.timeout_s,
            )  # fmt: skip
            (out / "index.json").write_text(json.dumps(index))
        else:
            words = [word.format(**values) for word in spellings.ptx]
            run_ptx(words, log, Path(tree_root), env=env, timeout_s=target.timeout_s,
                    wrote=[out / "index.json"])  # fmt: skip
    except PtxError:
        shutil.rmtree(out, ignore_errors=True)
        raise
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): nothing of it stays
        shutil.rmtree(out, ignore_errors=True)
        for left in (log, *root.glob(f"{out.name}.*.log")):
            left.unlink(missing_ok=True)
        raise
    try:
        out.rename(folder)
    except OSError:  # another check wrote the same PTX first
        shutil.rmtree(out, ignore_errors=True)
    _evict(root)
    return folder, False


def _clear_killed(root: Path, timeout_s: float) -> None:
    """The temporary folders of compiles killed outright (SIGKILL: no
    handler ran): one older than the command's timeout is no longer written."""
    now = time.time()
    for left in root.glob(".*"):
        with contextlib.suppress(OSError):
            if left.is_dir() and now - left.stat().st_mtime > timeout_s:
                shutil.rmtree(left, ignore_errors=True)


def _evict(root: Path) -> None:
    folders = sorted(
        (p for p in root.iterdir()
         if p.is_dir() and not p.name.startswith(".") and p.name != UNITS),  # fmt: skip
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in folders[CACHE_ENTRIES:]:
        shutil.rmtree(stale, ignore_errors=True)


def variants(folder: Path) -> list[tuple[str, Path]]:
    """(variant label, its PTX file) for every entry of the folder's index.json."""
    try:
        index = json.loads((folder / "index.json").read_text())
    except (OSError, ValueError) as error:
        raise PtxError(f"{folder}/index.json: cannot read it ({error})") from None
    if not isinstance(index, dict) or not index:
        raise PtxError(f"{folder}/index.json: not a table of PTX file -> variant label")
    return [(str(label), folder / name) for name, label in index.items()]


def read_index(folder: Path) -> list[tuple[str, Module]]:
    """(variant label, module) for every entry of the folder's index.json."""
    return [(label, read_module(path)) for label, path in variants(folder)]


# ------------------------------------------------------------------ findings
# One variant's findings: (site name, line, message) each, and the sites it carries.
ModuleFindings = tuple[frozenset[str], list[tuple[str, int | None, str]]]
# One variant's part of the guarded data: per store site, its stores' bases
# and its releases' flags' bases.
ModuleStores = tuple[dict[str, list[Bases]], dict[str, list[Bases]]]


def ptx_findings(
    sites: list[Site],
    sources: Path,
    modules: list[tuple[str, Module]],
    every_site: list[Site] | None = None,
) -> list[Finding]:
    """Each release and wait of `sites` in each variant whose lines some
    instruction carries; a site no variant carries is a finding of its own.
    The data each wait guards is read from the stores and releases of
    `every_site` (default: `sites`)."""
    every_site = every_site or sites
    parts = [module_stores(every_site, sources, module) for _, module in modules]
    guarded = merged_guarded(parts)
    found = [(label, module_findings(sites, sources, module, guarded)) for label, module in modules]
    return assembled(sites, found)


def merged_guarded(parts: Sequence[ModuleStores]) -> dict[str, Bases]:
    """The guarded data over every variant, from each variant's part."""
    stored: dict[str, list[Bases]] = {}
    published: dict[str, list[Bases]] = {}
    for their_stored, their_published in parts:
        for name, bases in their_stored.items():
            stored.setdefault(name, []).extend(bases)
        for name, bases in their_published.items():
            published.setdefault(name, []).extend(bases)
    return {name: guarded_bases(bases, published.get(name, [])) for name, bases in stored.items()}


def module_findings(
    sites: list[Site], sources: Path, module: Module, guarded: dict[str, Bases]
) -> ModuleFindings:
    """The findings of one variant: each release and wait of `sites` it carries."""
    present, found = set(), []
    placed = list(_placed(sites, sources, module))
    for site, function, members, lines in placed:
        if site.kind not in ("release", "wait"):
            continue
        present.add(site.name)
        data = guarded.get(site.guards or "", frozenset())
        if site.kind == "release":
            said = release_findings(site, module, function, members, lines)
            publishes = {
                i
                for other, where, their, _ in placed
                if where is function and other.kind == "release"
                and other.guards == site.guards
                for i in their
                if function.instructions[i].is_data_store()
            }
            said += stores_after(function, publishes, lines, data)
        else:
            alike = {
                index: other.consumers
                for other, where, their, _ in placed
                if where is function and other.kind == "wait" and other is not site
                and other.guards == site.guards
                for index in acquired(other, module, function, their)
            }
            said = wait_findings(site, module, function, members, lines, data, alike)
        found += [(site.name, n, m) for n, m in dict.fromkeys(said)]
    return frozenset(present), found


def assembled(sites: list[Site], found: list[tuple[str, ModuleFindings]]) -> list[Finding]:
    """Every variant's findings as Findings (each once: a module's kernels
    may say the same), then each release or wait no variant carries."""
    by_name = {site.name: site for site in sites}
    violations, present = [], set()
    for label, (carried, said) in found:
        present |= carried
        violations += [Finding(str(by_name[name].path), n, m, name, label) for name, n, m in said]
    absent = "no instruction of the site in any variant"
    violations = list(dict.fromkeys(violations))
    violations += [
        Finding(str(site.path), site.lines.start, absent, site.name)
        for site in sites
        if site.kind in ("release", "wait") and site.name not in present
    ]
    return violations


def _placed(sites: list[Site], sources: Path, module: Module):
    """(site, function, its instructions' indexes, each instruction's line
    as the site sees it) for each site some function of `module` carries."""
    for site in sites:
        file_index = module.file_index(site.path.relative_to(sources).as_posix())
        for function in module.functions.values() if file_index is not None else ():
            lines = _site_lines(function, file_index, site)
            members = [i for i, n in enumerate(lines) if n and site.start < n < site.end]
            if members:
                yield site, function, members, lines


def guarded_data(
    sites: list[Site], sources: Path, modules: list[tuple[str, Module]]
) -> dict[str, Bases]:
    """Each guarded store site's data, as the parameter fields its stores
    reach that the flags its releases publish do not, over every variant
    (invariants/sync/ptx_dataflow.py): the loads a wait must order."""
    return merged_guarded([module_stores(sites, sources, module) for _, module in modules])


def module_stores(sites: list[Site], sources: Path, module: Module) -> ModuleStores:
    """One variant's part of the guarded data: the bases of each guarded
    store site's data stores, and of its releases' publishing stores."""
    stored: dict[str, list[Bases]] = {}
    published: dict[str, list[Bases]] = {}
    guarded = {site.guards for site in sites if site.guards}
    for site, function, members, _ in _placed(sites, sources, module):
        key = site.guards if site.kind == "release" else site.name
        if key not in guarded or site.kind == "wait":
            continue
        into = published if site.kind == "release" else stored
        code = function.instructions
        into.setdefault(key, []).extend(
            access_bases(code[i], function.bases) for i in members if code[i].is_data_store()
        )
    return stored, published


def _site_lines(function: Function, file_index: int, site: Site) -> list[int | None]:
    """Each instruction's line as the site sees it: the innermost line of its
    inline chain inside the site (the call of an inlined helper the site
    makes), else its own line in the file."""
    own = function.lines_in(file_index)
    return [
        next((n for n in chain if site.start < n < site.end), line)
        for chain, line in zip(function.chains_in(file_index), own, strict=True)
    ]


def release_findings(
    site: Site, module: Module, function: Function, members, lines
) -> list[tuple[int, str]]:
    """The publish is a release of the scope (or follows a fence of it), and
    every path back from it meets the producers' barrier before a data store."""
    code, scope, group = function.instructions, site.scope.value, site.producers
    publishes = [i for i in members if code[i].is_data_store()]
    if not publishes:
        return [(site.lines.start, "no publish in the site: no st/red/atom to global memory")]
    own, stores = set(publishes), module.storing

    def data_store(i: int) -> bool:
        return i not in own and (code[i].is_data_store() or code[i].callee() in stores)

    def barrier(i: int) -> bool:
        return group != Group.THREAD and covers(code[i].barrier(), group)

    def reached(i: int) -> bool:
        return barrier(i) and not skipped(function, i, group)

    findings, want = [], SCOPE_RANK[scope]
    for i in publishes:
        rank, name = code[i].release_rank(), code[i].render()
        if rank is None:  # relaxed: a fence of the scope must lie between the barrier and it
            fence = lambda j: (code[j].fence_rank() or -1) >= want  # noqa: E731
            unfenced = walk(function, i, -1, fence, lambda j: barrier(j) or data_store(j))[0]
            # the fence releases as far as the store after it reaches: a
            # relaxed gpu-scope atom after fence.sys publishes at gpu
            strong = code[i].strong_rank()
            rank = min(want, strong) if unfenced is None and strong is not None else None
        if rank is None or rank < want:
            findings.append((lines[i], f"publish is {name}: no release at scope {scope}"))
        if group != Group.THREAD and walk(function, i, -1, reached, data_store)[0] is not None:
            between = f"between the {group.value}'s stores and {name} on every path"
            partial = _partial(function, walk(function, i, -1, barrier, data_store), group, lines)
            findings.append((lines[i], f"no {BARRIER_PTX[group]} {between}{partial}"))
    return findings


def acquired(site: Site, module: Module, function: Function, members) -> set[int]:
    """The wait's instructions that acquire at its scope: an acquire load, a
    call whose body acquires, or the fence after a relaxed load of its own
    (before any data load)."""
    code, want = function.instructions, SCOPE_RANK[site.scope.value]
    acquires = {i for i in members if (_acquire_rank(module, code[i]) or -1) >= want}
    loads = {i for i in members if (code[i].relaxed_load_rank() or -1) >= want}
    reads = _reads(function, set(members))
    for i in loads:  # a relaxed load: the fence after it acquires
        fence = lambda j: (code[j].fence_rank() or -1) >= want  # noqa: E731
        failed, fences = walk(function, i, 1, fence, reads)
        acquires |= fences if failed is None else set()
    return acquires


def _reads(function: Function, inside: set[int]) -> Callable[[int], bool]:
    """A data load outside the wait (its own loads, of its flag's address,
    are no reads), or the function's end."""
    code = function.instructions
    return lambda j: (j not in inside and code[j].is_data_load()) or not function.successors[j]


def _acquire_rank(module: Module, ins) -> int | None:
    callee = ins.callee()
    return module.acquiring[callee] if callee in module.acquiring else ins.acquire_rank()


def wait_findings(
    site: Site,
    module: Module,
    function: Function,
    members,
    lines,
    data: Bases = frozenset(),
    alike: dict[int, Group] | None = None,
) -> list[tuple[int, str]]:
    """An acquire of the scope (a load, a call whose body acquires, or a relaxed
    load then a fence), then on every path the consumers' barrier before a data
    load or the end; and every load of the guarded `data` after an acquire of
    this wait or of another wait of the same data (`alike`: their acquires,
    each with its consumers; guarded_reads)."""
    alike = alike or {}
    code, scope, group = function.instructions, site.scope.value, site.consumers
    acquires, inside = acquired(site, module, function, members), set(members)
    if not acquires:
        weaker = [i for i in members if _acquire_rank(module, code[i]) is not None]
        if weaker:
            return [(lines[weaker[0]], f"the wait acquires below scope {scope}")]
        nor = f"nor a call that acquires, nor a relaxed load then fence.acq_rel.{scope}"
        return [(site.lines.start, f"no ld.acquire.{scope} in the wait ({nor})")]
    reads = _reads(function, inside)
    mine = dict.fromkeys(acquires, group)
    findings = guarded_reads(function, {**alike, **mine}, inside, lines, data)
    if group == Group.THREAD:
        return findings
    barrier = lambda j: covers(code[j].barrier(), group)  # noqa: E731
    reached = lambda j: barrier(j) and not skipped(function, j, group)  # noqa: E731
    missing = f"no {BARRIER_PTX[group]} after the acquire on every path before the {group.value}"
    for i in sorted(acquires):
        if walk(function, i, 1, reached, reads)[0] is not None:
            partial = _partial(function, walk(function, i, 1, barrier, reads), group, lines)
            findings.append((lines[i], f"{missing} reads{partial}"))
    return findings


def stores_after(
    function: Function, publishes: set[int], lines, data: Bases
) -> list[tuple[int, str]]:
    """The stores of the guarded data (their addresses built from `data`'s
    fields) that no release of it follows in their iteration (`publishes`:
    those of every release of the data here): a release issued before the
    stores it guards, by a helper called early say, publishes nothing."""
    if not data or not publishes:
        return []
    code, bases = function.instructions, function.bases
    return [
        (lines[i], f"stores the data it guards with {code[i].opcode} after its release on "
         "every path of the iteration: no release follows the store")
        for i, ins in enumerate(code)
        if i not in publishes and ins.is_data_store() and access_bases(ins, bases) & data
        and not _after(function, [i]).meets(publishes)
    ]


def guarded_reads(
    function: Function, acquires: dict[int, Group], inside: set[int], lines, data: Bases
) -> list[tuple[int, str]]:
    """The loads of the guarded data outside the wait (their addresses built
    from `data`'s fields), against `acquires` (those of every wait of the
    data here, each with its consumers): none on the read-only path; each
    after an acquire in its iteration (an acquire leads to it once the back
    edges are gone: a load hoisted above the wait has none); and none reached
    by the consumers an acquire's branch sends past it when that branch
    parts whole groups (the wait only some blocks make), unless a barrier
    whose group holds both ways of that branch brings the acquire to them."""
    if not data:
        return []
    code, bases = function.instructions, function.bases
    reads = [
        i
        for i, ins in enumerate(code)
        if i not in inside and ins.is_global_load() and access_bases(ins, bases) & data
    ]
    findings = [
        (lines[i], f"reads the data it guards with {code[i].opcode}: the read-only path is "
         "not coherent with a peer's stores, no acquire orders it")
        for i in reads
        if code[i].non_coherent()
    ]
    after = _after(function, acquires)
    findings += [
        (lines[i], f"reads the data it guards with {code[i].opcode} before any acquire of "
         "its wait in the iteration (a load above the wait)")
        for i in reads
        if i not in after
    ]
    return findings + _past_partial_waits(function, acquires, reads, lines)


def _past_partial_waits(
    function: Function, acquires: dict[int, Group], reads: list[int], lines
) -> list[tuple[int, str]]:
    """The guarded `reads` the consumers reach past an acquire whose branch
    sends whole groups of them by it (the wait only some blocks make), unless
    a barrier whose group holds both ways of that branch brings the acquire
    to them."""
    code, findings = function.instructions, []
    for acquire, group in sorted(acquires.items()):
        skip = function.divergence.parting(acquire, PARTING[group])
        if skip is None:
            continue
        led = _after(function, [acquire])

        def delivered(j: int, spread=skip.origin.spread, led=led) -> bool:
            """An acquire, or a barrier the acquire leads to whose group holds
            threads of both ways of the branch, all of them reaching it."""
            barrier = code[j].barrier()
            return j in acquires or (
                barrier is not None and splits(spread, barrier) and j in led
                and not skipped(function, j, barrier)
            )

        for past in function.forward_successors[skip.branch]:
            if past == acquire or acquire in _after(function, [past]) or delivered(past):
                continue  # the way to the acquire, or straight to a barrier that brings it
            edges, reading = function.forward_successors, set(reads).__contains__
            read = past if reading(past) else walk_edges(edges, past, delivered, reading)[0]
            if read is not None:
                said = f"the branch at line {lines[skip.branch]} on {skip.origin.source}"
                findings.append(
                    (lines[read], f"reads the data it guards after a wait only some "
                     f"{group.value}s make: the acquire is under {said}, which "
                     f"{skip.origin.spread.said}, and the {group.value}s that skip it read "
                     "with no acquire")
                )
    return findings


# The spreads of a branch that sends whole groups past an instruction: what
# differs between groups of the kind but not within one (for a single thread,
# anything that differs at all).
PARTING = {
    Group.THREAD: (Spread.PER_BLOCK, Spread.PER_WARP, Spread.PER_THREAD),
    Group.WARP: (Spread.PER_BLOCK, Spread.PER_WARP),
    Group.BLOCK: (Spread.PER_BLOCK,),
    Group.GRID: (),
}


class Reached:
    """The instructions some path of one iteration leads to from some starts:
    `i in reached`, `reached.meets(indexes)`."""

    def __init__(self, bits: int | None = None, walked: set[int] | None = None) -> None:
        self.bits, self.walked = bits, walked

    def __contains__(self, index: int) -> bool:
        return index in self.walked if self.walked is not None else bool(self.bits >> index & 1)

    def meets(self, indexes) -> bool:
        return any(i in self for i in indexes)


def _after(function: Function, starts) -> Reached:
    """The instructions some path of one iteration leads to from `starts` (no
    back edges): the function's reach sets, made once, where it has them."""
    reach, bits = function.forward_reach, 0
    for start in starts:
        if reach[start] is None:
            break
        bits |= reach[start]
    else:
        return Reached(bits=bits)
    seen, stack = set(), list(starts)
    while stack:
        for following in function.forward_successors[stack.pop()]:
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return Reached(walked=seen)


def skipped(function: Function, barrier: int, group: Group) -> bool:
    """Whether some threads of `group` skip the barrier: it lies under a
    branch that can part them (invariants/sync/ptx_divergence.py), and it is
    no unaligned barrier every thread meets an instance of (met_everywhere)."""
    skip = function.divergence.skip(barrier)
    if skip is None or not splits(skip.origin.spread, group):
        return False
    return not met_everywhere(function, barrier)


def met_everywhere(function: Function, barrier: int) -> bool:
    """Whether an unaligned barrier (`barrier.cluster.wait`, `barrier.sync`
    without `.aligned`; `bar` is aligned) lies on every path through the
    function, in one instance or another: it counts the threads that arrive,
    wherever in the code they do, so a helper inlined in both arms of a
    branch (each thread waits at one copy) is one barrier every thread
    reaches. An aligned barrier must be reached at the same instruction."""
    code = function.instructions
    ins = code[barrier]
    if ins.base != "barrier" or "aligned" in ins.parts:
        return False
    same = lambda j: (code[j].opcode, code[j].operands) == (ins.opcode, ins.operands)  # noqa: E731
    if same(0):
        return True
    stack, seen = [0], {0}
    while stack:
        index = stack.pop()
        nexts = function.successors[index]
        if not nexts:
            return False  # a path to the end that meets no instance
        for following in nexts:
            if following not in seen and not same(following):
                seen.add(following)
                stack.append(following)
    return True


def _partial(function: Function, walked: tuple, group: Group, lines) -> str:
    """Why the barriers a walk met do not count, when it met some on every
    path (`walked`: the walk with every barrier a goal); else nothing."""
    failed, met = walked
    partial = sorted(j for j in met if skipped(function, j, group))
    if failed is not None or not partial:
        return ""
    code, skip = function.instructions, function.divergence.skip(partial[0])
    branch = f"the branch at line {lines[skip.branch]} on {skip.origin.source}"
    return (
        f": the {code[partial[0]].opcode} at line {lines[partial[0]]} is under {branch},"
        f" which {skip.origin.spread.said}: the threads that skip it are not covered"
    )


def covers(barrier: Group | None, group: Group) -> bool:
    """A barrier of a group holds every smaller one (a block's holds its warps)."""
    order = list(Group)
    return barrier is not None and order.index(barrier) >= order.index(group)


def walk(
    function: Function, start: int, direction: int, goal: Callable, fail: Callable
) -> tuple[int | None, set[int]]:
    """Every path from instruction `start`, backward (direction -1) or forward
    (+1): the first instruction `fail` holds for on a path before any `goal`
    one (None: every path meets a goal first, or ends), and the goals met."""
    edges = function.predecessors if direction < 0 else function.successors
    return walk_edges(edges, start, goal, fail)


def walk_edges(
    edges: Sequence[Sequence[int]], start: int, goal: Callable, fail: Callable
) -> tuple[int | None, set[int]]:
    """`walk` over `edges` (each instruction's neighbours in the walk's direction)."""
    stack, met = list(edges[start]), set()
    seen = set(stack)
    while stack:
        index = stack.pop()
        if goal(index):
            met.add(index)
            continue
        if fail(index):
            return index, met
        for following in edges[index]:
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return None, met
