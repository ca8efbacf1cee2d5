"""Bounded spins (docs/catalog.md, "Bounded waits"): in a tree the target
runs, every loop of a wait or compute site that the catalog's `loop`
pattern finds gets a time limit (a compute site may spin too: a Lamport
poll, whose data is its own flag, has no acquire to make it a wait), so a
spin that would go on forever prints the target's timeout line naming its
site and stops (its statements, `expired`, trap on a GPU, and a fault
flushes the device's printf buffer: the markers reach the log). The limit
counts from the start of the site, read with the target's
clock; lines the engine injected are left alone."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog import Target
from faults.generate.mutate import tagged
from invariants.sync.sites import Site, SiteKind, SourceTree

OWNER = "bound"  # the tag's owner: no fault, every tree of the target


def start_name(site: Site) -> str:
    """The variable holding when the site started: one a site, so two sites of one scope may."""
    return "afd_bound_" + re.sub(r"\W", "_", site.name)


def _start(site: Site, target: Target) -> str:
    if target.language == "cuda":
        return f"const unsigned long long {start_name(site)} = {target.clock};"
    return f"const auto {start_name(site)} = std::chrono::steady_clock::now();"


def _within(site: Site, target: Target) -> str:
    limit = target.bound.limit_ns
    if target.language == "cuda":
        return f"{target.clock} - {start_name(site)} < {limit}ull"
    return (
        f"std::chrono::steady_clock::now() - {start_name(site)} < "
        f"std::chrono::nanoseconds({limit})"
    )


def bounded_condition(cond: str, site: Site, target: Target) -> str:
    """`cond`, and while the limit has not passed; past it, `expired` runs."""
    expired = target.bound.expired_at(site.name)
    return f"({cond}) && ({_within(site, target)} || ([&]() {{ {expired} return false; }})())"


def bound_site(lines: list[str], site: Site, target: Target) -> list[str]:
    """`lines` (the site's file) with each loop the pattern finds in the
    site's body bounded, and the site's start read first; as they were when
    it finds none."""
    body = lines[site.start : site.end - 1]
    text = "\n".join(body)
    pieces, done = [], 0
    for match in target.bound.loop.finditer(text):
        line = body[text.count("\n", 0, match.start())]
        if "// AFDFAULT " in line or match.start("cond") < 0:
            continue  # the engine's own spin, or no condition
        pieces += [text[done : match.start("cond")]]
        pieces += [bounded_condition(match["cond"], site, target)]
        done = match.end("cond")
    if not pieces:
        return lines
    rewritten = ("".join(pieces) + text[done:]).split("\n")
    first = body[0] if body else ""
    indent = first[: len(first) - len(first.lstrip())]
    start = indent + tagged(_start(site, target), OWNER, f"start of {site.name}'s time limit")
    return [*lines[: site.start], start, *rewritten, *lines[site.end - 1 :]]


# The kinds of site whose loops may spin on another thread's data: a wait,
# and work that polls data which is its own flag (a release or a store site
# only writes).
SPINNING_KINDS = (SiteKind.WAIT, SiteKind.COMPUTE)


def bound_waits(sources: SourceTree, target: Target) -> list[Path]:
    """Every spin of a wait or compute site under the (annotated) `sources`
    bounded; the files changed."""
    if target.bound is None:
        return []
    spinning = [site for site in sources.sites if site.kind in SPINNING_KINDS]
    changed = []
    for site in sorted(spinning, key=lambda site: site.start, reverse=True):
        lines = site.path.read_text().splitlines()
        bounded = bound_site(lines, site, target)
        if bounded != lines:
            sources.write(site.path, "\n".join(bounded) + "\n")
            changed.append(site.path)
    return sorted(set(changed))
