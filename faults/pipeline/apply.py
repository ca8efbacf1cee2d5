"""Apply a fault's patches to a scratch tree. Each action is a small function
in one table; every injected line ends with a `// AFDFAULT <id>` comment, and
a marker prints `AFDFAULT <id> rank=<r>` (sampled by its condition) whenever
the injected code runs, so a run proves the fault fired."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from faults.catalog import Catalog, Patch, Target
from faults.catalog.identity import Identity
from faults.generate.mutate import TAG
from faults.pipeline.bound import bound_waits
from faults.schedules.draw import draw, scheduled_code
from invariants.sync.sites import Site, SourceTree


class ApplyError(RuntimeError):
    """A patch that does not apply: the site or anchor is missing or ambiguous."""


Action = Callable[[list[str], Patch, Target, str], list[str]]
ACTIONS: dict[str, Action] = {}


def action(name: str) -> Callable[[Action], Action]:
    def register(function: Action) -> Action:
        ACTIONS[name] = function
        return function

    return register


def marker_line(patch: Patch, target: Target) -> str:
    printf = "printf" if target.language == "cuda" else "std::printf"
    return (
        f'if ({patch.marker}) {printf}("AFDFAULT {patch.owner} rank=%d\\n", '
        f"static_cast<int>({target.rank}));"
    )


def spin(clock: str, language: str, ns: str, still: str = "") -> str:
    """Spin `ns` (a C expression of nanoseconds) on the target's clock (cuda)
    or steady_clock (cpp); with `still`, a C condition, only while it holds
    too. The one spin every delay, hold and scheduled delay injects."""
    also = f"{still} && " if still else ""
    if language == "cuda":
        return (
            f"const unsigned long long afd_t0 = {clock}; "
            f"while ({also}{clock} - afd_t0 < {ns}) {{ }}"
        )
    return (
        "const auto afd_t0 = std::chrono::steady_clock::now(); "
        f"while ({also}std::chrono::steady_clock::now() - afd_t0 < "
        f"std::chrono::nanoseconds({ns})) {{ }}"
    )


def spin_line(patch: Patch, target: Target, still: str = "") -> str:
    """Spin the patch's `ns`; with `still`, a C condition, only while it holds too."""
    ns = f"{patch.ns}ull" if target.language == "cuda" else str(patch.ns)
    return spin(target.clock, target.language, ns, still)


def _tag(line: str, indent: str, patch: Patch, note: str) -> str:
    return indent + line + TAG.format(owner=patch.owner, note=note)


@action("delay")
def delay(body: list[str], patch: Patch, target: Target, indent: str) -> list[str]:
    """`code` -> `if (when) { spin ns; marker }` then `code` (at=start), or after it
    (at=end); a scheduled delay spins what its seed drew (faults/schedules/draw.py)."""
    if patch.schedule is not None:
        drawn = draw(patch.schedule, patch.ns)
        code = scheduled_code(
            drawn,
            target.schedule,
            patch.site,
            patch.when,
            marker_line(patch, target),
            lambda ns: spin(target.clock, target.language, ns),
        )
        note = f"scheduled delay ({drawn.schedule.family} seed {drawn.schedule.seed})"
    else:
        code = f"if ({patch.when}) {{ {spin_line(patch, target)} {marker_line(patch, target)} }}"
        note = f"delay {patch.ns} ns"
    injected = _tag(code, indent, patch, f"{note} at {patch.at} of {patch.site}")
    return [injected, *body] if patch.at == "start" else [*body, injected]


@action("skip")
def skip(body: list[str], patch: Patch, target: Target, indent: str) -> list[str]:
    """`code` -> `marker` (the region's code is removed)."""
    return [_tag(marker_line(patch, target), indent, patch, f"skip {patch.site}")]


# Forced order (docs/operators.md, "Delays that expose"): the held threads
# wait, bounded, for a marker cell the publisher bumps right after its
# release. The cell lives in memory its group shares (a CTA's shared memory on
# a GPU), reached through one function each patched file defines once; it is
# never reset: a waiter reads it first and waits for it to change.
CELL_GUARD = "AFD_ORDER_CELL"
CELL_FUNCTION = "afd_order_cell"
CELL_DEFINITION = {
    "cuda": (
        f"static __device__ __forceinline__ volatile unsigned int* {CELL_FUNCTION}"
        "(unsigned int index) {",
        "  __shared__ unsigned int afd_cells[32];",  # one a warp (32 at most), or one a CTA
        "  return afd_cells + index;",
        "}",
    ),
    "cpp": (
        "#include <atomic>",
        "#include <chrono>",
        f"inline std::atomic<unsigned>* {CELL_FUNCTION}(unsigned index) {{",
        "  static std::atomic<unsigned> afd_cells[64];",
        "  return afd_cells + index;",
        "}",
    ),
}


def cell_prelude(patch: Patch, target: Target) -> list[str]:
    """The cell function, guarded so that two patched files of one build define it once."""
    lines = [f"#ifndef {CELL_GUARD}", f"#define {CELL_GUARD}"]
    lines += [*CELL_DEFINITION[target.language], f"#endif  // {CELL_GUARD}"]
    return [f"{line}  // AFDFAULT {patch.owner} forced-order cell" for line in lines]


def _bounded_wait(patch: Patch, target: Target) -> str:
    """Read this thread's cell, then spin until it changes or `ns` pass."""
    if target.language == "cuda":
        cell = (
            f"volatile unsigned int* const afd_cell = {CELL_FUNCTION}({patch.cell}); "
            "const unsigned int afd_seen = *afd_cell; "
        )
        return cell + spin_line(patch, target, still="*afd_cell == afd_seen")
    cell = (
        f"std::atomic<unsigned>* const afd_cell = {CELL_FUNCTION}({patch.cell}); "
        "const unsigned afd_seen = afd_cell->load(); "
    )
    return cell + spin_line(patch, target, still="afd_cell->load() == afd_seen")


def _bump(patch: Patch, target: Target) -> str:
    if target.language == "cuda":
        return (
            f"volatile unsigned int* const afd_cell = {CELL_FUNCTION}({patch.cell}); "
            "*afd_cell = *afd_cell + 1u;"
        )
    return f"{CELL_FUNCTION}({patch.cell})->fetch_add(1u);"


@action("hold")
def hold(body: list[str], patch: Patch, target: Target, indent: str) -> list[str]:
    """`code` -> `if (when) { wait for the cell to change, at most ns; marker }` then `code`."""
    code = f"{_bounded_wait(patch, target)} {marker_line(patch, target)}"
    note = f"hold at most {patch.ns} ns at start of {patch.site} for cell {patch.cell}"
    return [_tag(f"if ({patch.when}) {{ {code} }}", indent, patch, note), *body]


@action("signal")
def signal(body: list[str], patch: Patch, target: Target, indent: str) -> list[str]:
    """`code` -> `code` then `if (when) { bump the cell }` (the held threads go on)."""
    note = f"signal cell {patch.cell} at end of {patch.site}"
    return [*body, _tag(f"if ({patch.when}) {{ {_bump(patch, target)} }}", indent, patch, note)]


# Actions whose code needs lines at file scope, once per file.
PRELUDES: dict[str, Callable[[Patch, Target], list[str]]] = {
    "hold": cell_prelude,
    "signal": cell_prelude,
}
INCLUDE = re.compile(r"^\s*#\s*(include|pragma\s+once)\b")


def _with_prelude(lines: list[str], before: int, patch: Patch, target: Target) -> list[str]:
    """`lines` with the action's prelude after the last include (or `#pragma
    once`) above line index `before`, unless the file has it already."""
    make = PRELUDES.get(patch.action)
    if make is None or any(CELL_GUARD in line for line in lines):
        return lines
    heads = [i for i, line in enumerate(lines[:before]) if INCLUDE.match(line)]
    at = heads[-1] + 1 if heads else 0
    return [*lines[:at], *make(patch, target), *lines[at:]]


def _find_site(sources: SourceTree, name: str, owner: str) -> Site:
    try:
        return sources.site(name)
    except LookupError as error:  # missing, or defined more than once
        raise ApplyError(f"fault {owner}: {error} in {sources.root}") from None


def apply_site_patch(
    sources: SourceTree, patch: Patch, target: Target, *, bare: bool = False
) -> Path:
    """`bare`: with no marker, what the compiler sees of the fault alone."""
    site = _find_site(sources, patch.site, patch.owner)
    lines = site.path.read_text().splitlines(keepends=False)
    opening = lines[site.start - 1]
    indent = opening[: len(opening) - len(opening.lstrip())]
    body = lines[site.start : site.end - 1]
    replaced = ACTIONS[patch.action](body, patch, target, indent)
    if bare:
        replaced = [line.replace(marker_line(patch, target), "") for line in replaced]
    lines[site.start : site.end - 1] = replaced
    lines = _with_prelude(lines, site.start - 1, patch, target)
    sources.write(site.path, "\n".join(lines) + "\n")
    return site.path


def apply_text_patch(sources: SourceTree, patch: Patch, target: Target | None = None) -> Path:
    """`old` -> `new`, exactly once; with a `target` (a fault's patch, not a
    control's) a marker opens the site region that holds the change, or the
    region of `marker_site`, so the run shows whether the changed code ran.
    A patch whose marker is `false` gets none, and may lie outside the sites:
    a mutant's twin, whose rewrite's marker says the fault ran."""
    path = sources.root / patch.file
    if not path.is_file():
        raise ApplyError(
            f"fault {patch.owner}: text patch file {patch.file} not in {sources.root}"
        )
    text = path.read_text()
    count = text.count(patch.old)
    if count != 1:
        raise ApplyError(
            f"fault {patch.owner}: text patch anchor found {count} times in "
            f"{patch.file} (needs exactly 1): {patch.old[:80]!r}"
        )
    sources.write(path, text.replace(patch.old, patch.new))
    if target is not None and patch.marker.strip() != "false":
        line = text[: text.index(patch.old)].count("\n") + 1
        try:
            site = _marked_site(sources, path, line, patch)
        except ApplyError:
            sources.write(path, text)  # a patch that cannot be marked is not applied
            raise
        _mark_site(sources, site, patch, target)
    return path


def _marked_site(sources: SourceTree, path: Path, line: int, patch: Patch) -> Site:
    if patch.marker_site is not None:
        return _find_site(sources, patch.marker_site, patch.owner)
    holding = [site for site in sources.sites if site.path == path and site.start < line < site.end]
    if not holding:
        raise ApplyError(
            f"fault {patch.owner}: the text patch at {patch.file}:{line} lies in no site "
            "region: name the site its marker goes in (marker_site)"
        )
    return holding[0]


def _mark_site(sources: SourceTree, site: Site, patch: Patch, target: Target) -> None:
    lines = site.path.read_text().splitlines(keepends=False)
    opening = lines[site.start - 1]
    indent = opening[: len(opening) - len(opening.lstrip())]
    marker = _tag(
        marker_line(patch, target), indent, patch, f"marker of a text patch in {site.name}"
    )
    lines.insert(site.start, marker)
    sources.write(site.path, "\n".join(lines) + "\n")


def apply_patches(
    sources: SourceTree,
    catalog: Catalog,
    patches: list[Patch],
    *,
    marked: bool = True,
    bare: bool = False,
) -> list[Path]:
    """Apply `patches` in order to the `sources` of a scratch tree
    (target_scratch's), then bound its waits (faults/pipeline/bound.py: every
    tree the target runs, the clean one too, with no patch); returns the
    files changed. `marked`: text patches get markers (a fault's; a control
    needs none); `bare`: no marker anywhere (docs/verdicts.md, "Erased faults")."""
    target = catalog.target if marked and not bare else None
    changed = []
    for patch in patches:
        if patch.file is not None:
            changed.append(apply_text_patch(sources, patch, target))
        else:
            changed.append(apply_site_patch(sources, patch, catalog.target, bare=bare))
    return sorted(set(changed + bound_waits(sources, catalog.target)))


def apply_fault(sources: SourceTree, catalog: Catalog, fault_id: str) -> list[Path]:
    return apply_patches(sources, catalog, catalog.all_patches(fault_id))


def say_identity(sources: SourceTree, identity: Identity, digest: str) -> Path:
    """The tree made to say `digest` (the digest of its sources before this
    line, which the judge holds the log to): [target.identity]'s statement, a
    line of its own before the one line of its file that holds `before`."""
    path = sources.root / identity.file
    try:
        sources.write(path, identity.written(path.read_text(), digest))
    except (OSError, ValueError) as error:
        raise ApplyError(f"[target.identity] {identity.file}: {error}") from None
    return path
