"""The litmus shapes and the map from a mutant to its shape
(docs/operators.md, "Amplification").

A shape is one instantiation of `litmus.cuh`'s message-passing kernel: how the
flag is published and awaited, who writes the payload and whether their
barrier precedes the publish. A mutant's shape comes from its family and its
site's contract: `producers=` says who writes the payload (a thread, a warp, a
block; a grid publishes per block here), the mutated region's text, read with
the catalog's `[target.contract]` spellings, whether a release or a fence of
system scope is still there after the rewrite."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from faults.catalog.model import Catalog, ContractSpellings, Fault
from faults.generate.annotate import annotated_copy
from faults.operators import OPERATORS, Family, operator
from invariants.sync.sites import Group, Site

NAMESPACE = "litmus"
KERNEL = f"{NAMESPACE}::mp_litmus"
THREADS = 256
WORDS = 8

# The families whose mutants weaken an order a litmus can show: their operators name one.
AMPLIFIED_FAMILIES = tuple(family for family, op in OPERATORS.items() if op.litmus is not None)


def litmus_name(kind: str, member: str) -> str:
    """An enum's member as the litmus (litmus.cuh) names it: `RELEASE_SYS` of
    `Publish` is `litmus::Publish::kReleaseSys`."""
    return f"{NAMESPACE}::{kind}::k" + "".join(word.capitalize() for word in member.split("_"))


class LitmusWord(str, Enum):
    """An enum the litmus has too, under the same names."""

    @property
    def cpp(self) -> str:
        return litmus_name(type(self).__name__, self.name)


class Publish(LitmusWord):
    """How the producer publishes the flag (litmus::Publish)."""

    RELEASE_SYS = "release.sys"
    RELAXED_SYS = "relaxed.sys"
    RELEASE_GPU = "release.gpu"
    FENCE_RELAXED_SYS = "fence.acq_rel.sys+relaxed.sys"


class Wait(LitmusWord):
    """How the consumer loads the flag (litmus::Wait)."""

    ACQUIRE_SYS = "acquire.sys"
    RELAXED_SYS = "relaxed.sys"
    ACQUIRE_GPU = "acquire.gpu"


class Read(LitmusWord):
    """How the consumer reads the payload (litmus::Read): L2, as the target's
    kernels read a peer's stores (ld.global.cg), or a plain load that L1 may
    serve stale."""

    L2 = "ld.cg"
    CACHED = "ld"


def group_cpp(group: Group) -> str:
    if group is Group.GRID:
        raise ValueError("the litmus has no grid group")
    return litmus_name("Group", group.name)


@dataclass(frozen=True)
class Shape:
    publish: Publish = Publish.RELEASE_SYS
    wait: Wait = Wait.ACQUIRE_SYS
    producers: Group = Group.THREAD
    producer_barrier: bool = True
    consumers: Group = Group.THREAD
    words: int = WORDS
    threads: int = THREADS
    # Producers on GPU 0, consumers on GPU 1, the locations in GPU 1's memory:
    # where a gpu scope is too narrow. Not a template argument: a placement.
    across_gpus: bool = False
    read: Read = Read.L2

    @property
    def correct(self) -> bool:
        """The publish contract holds on it: no weak outcome is allowed (the
        gpu scopes are enough within one GPU, so they count only across two)."""
        return (
            self.publish in (Publish.RELEASE_SYS, Publish.FENCE_RELAXED_SYS)
            and self.wait is Wait.ACQUIRE_SYS
            and (self.producer_barrier or self.producers is Group.THREAD)
        )

    @property
    def narrowed(self) -> bool:
        return Wait.ACQUIRE_GPU is self.wait or Publish.RELEASE_GPU is self.publish

    def name_expression(self) -> str:
        args = [
            self.publish.cpp,
            self.wait.cpp,
            self.read.cpp,
            group_cpp(self.producers),
            "true" if self.producer_barrier else "false",
            group_cpp(self.consumers),
            str(self.words),
            str(self.threads),
        ]
        return f"{KERNEL}<{', '.join(args)}>"

    def label(self) -> str:
        barrier = "" if self.producer_barrier else " no-barrier"
        across = " across GPUs 0->1" if self.across_gpus else ""
        return (
            f"publish={self.publish.value} wait={self.wait.value} read={self.read.value} "
            f"producers={self.producers.value}{barrier} consumers={self.consumers.value}{across}"
        )

    def to_dict(self) -> dict:
        return {
            "publish": self.publish.value,
            "wait": self.wait.value,
            "read": self.read.value,
            "producers": self.producers.value,
            "producer_barrier": self.producer_barrier,
            "consumers": self.consumers.value,
            "words": self.words,
            "threads": self.threads,
            "across_gpus": self.across_gpus,
        }


def control_of(shape: Shape) -> Shape:
    """The unmutated litmus of the same groups: release.sys, acquire.sys, the barrier kept."""
    return replace(shape, publish=Publish.RELEASE_SYS, wait=Wait.ACQUIRE_SYS, producer_barrier=True)


def placed(shape: Shape, gpus: int) -> Shape:
    """The shape as it runs here: a narrowed scope across two GPUs when there are two."""
    return replace(shape, across_gpus=True) if shape.narrowed and gpus >= 2 else shape


@dataclass(frozen=True)
class Mapped:
    """A mutant and its litmus shape; `shape` None: no litmus shows it, `why` says."""

    fault_id: str
    family: Family
    site: str
    shape: Shape | None
    why: str = ""


def _group(group: Group | None) -> Group:
    # A grid publishes once per block after its block's barrier: a block's litmus.
    return Group.BLOCK if group in (Group.BLOCK, Group.GRID) else (group or Group.THREAD)


def mutated_region(site: Site, fault: Fault) -> str:
    """The site's region with the mutant's rewrite in it; `site` as the tree
    the mutant was made from holds it (an anchored site written in as the
    comment site it is: the rewrite's text holds its `// @end` line)."""
    body = "\n".join(site.path.read_text().splitlines()[site.start - 1 : site.end]) + "\n"
    patch = fault.patches[0]  # the rewrite; an exposing delay follows it
    return body.replace(patch.old or "", patch.new or "", 1) if patch.old in body else body


def release_publish(family: Family, region: str, spellings: ContractSpellings) -> Publish:
    """The publish op the mutated release region is left with."""
    releases, fence = spellings.release.get("sys"), spellings.fence.get("sys")
    if releases is not None and releases.search(region):
        return Publish.RELEASE_SYS  # a fence narrowed or removed beside it changes nothing
    if operator(family).litmus.narrows_release:
        return Publish.RELEASE_GPU
    if fence is not None and fence.search(region):
        return Publish.FENCE_RELAXED_SYS
    return Publish.RELAXED_SYS


def partner_group(site: Site, sites: list[Site]) -> Group:
    """The other side's group: for a wait, the producers of a release that
    guards the same store site; for a release, the consumers of such a wait
    (one of the site's own group first: a warp's rows, a block's counter)."""
    kind = "release" if site.kind == "wait" else "wait"
    own = _group(site.consumers if site.kind == "wait" else site.producers)
    found = [
        _group(other.producers if kind == "release" else other.consumers)
        for other in sites
        if other.kind == kind and site.guards is not None and other.guards == site.guards
    ]
    return own if own in found else (found[0] if found else Group.THREAD)


def shape_of(fault: Fault, site: Site, sites: list[Site], spellings: ContractSpellings) -> Mapped:
    family = fault.family
    litmus = operator(family).litmus
    other = partner_group(site, sites)
    if site.kind == "wait":
        if litmus.wait is None:
            return Mapped(fault.id, family, site.name, None, litmus.why_not_at_wait)
        shape = Shape(wait=Wait(litmus.wait), producers=other, consumers=_group(site.consumers))
        return Mapped(fault.id, family, site.name, shape)
    producers = _group(site.producers)
    region = mutated_region(site, fault)
    barrier = litmus.keeps_barrier
    publish = release_publish(family, region, spellings)
    shape = Shape(publish, producers=producers, producer_barrier=barrier, consumers=other)
    return Mapped(fault.id, family, site.name, shape)


def amplified(catalog: Catalog, tree_root: Path) -> list[Mapped]:
    """Every generated mutant of AMPLIFIED_FAMILIES in the catalog (generated
    faults included), with its shape, in catalog order."""
    if catalog.target.contract is None:
        raise ValueError(f"{catalog.path}: no [target.contract]: its spellings map a mutant")
    target, mapped = catalog.target, []
    # the sources as the mutants were made from them (faults/generate/site_faults.py)
    with annotated_copy(Path(tree_root) / target.sources, target.anchors) as sources:
        sites = sources.sites
        by_name = {site.name: site for site in sites}
        for fault in catalog.faults.values():
            # a mutant held open by a delay is no litmus; a twin (a text patch) is the rewrite's
            if fault.family not in AMPLIFIED_FAMILIES or any(p.file is None for p in fault.patches):
                continue
            site = by_name.get(fault.patches[0].marker_site or "")
            if site is not None:
                mapped.append(shape_of(fault, site, sites, target.contract))
    return mapped
