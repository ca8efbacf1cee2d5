"""The catalog's types: a target (how to build and run a tree), its
configurations, the faults and their patches, and the queries a loaded
Catalog answers (faults/catalog/load.py loads and checks one)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.catalog.bound import Bound
from faults.catalog.errors import CatalogError
from faults.catalog.identity import Identity
from faults.catalog.matrix import Matrix, config_fields
# The operators' families, and those each stage draws on (faults/operators/).
from faults.operators import Family
from faults.schedules.table import Schedule, ScheduleSpelling
from faults.shrink.table import ShrinkSpec
from hostio import RankMode, known_names
from invariants.sync.sites import Anchor
from invariants.sync.spellings import ContractSpellings

# The id prefix of every fault generated from the sites (no catalog fault may take it).
GENERATED_PREFIX = "gen."

# Where an error naming an unknown fault sends its reader for them all.
FAULTS_LISTED = "the `list` command names them all"

# The `{name}`s a target's build and run words and a config's args may hold;
# faults/pipeline/run.py fills in every one in both stages, so the load checks them all.
PLACEHOLDERS = ("tree", "out", "python", "digest", "gpus", "ranks")
# The `{name}`s of `[target.contract] ptx`, filled in by invariants/sync/contract.py.
PTX_PLACEHOLDERS = ("tree", "sources", "out", "python")
# The per-unit ptx command's, with [target.contract] ptx_units: all of the last three.
PTX_UNIT_PLACEHOLDERS = ("tree", "python", "unit", "ptx", "deps")
# A warm worker's command ([target.serve]): it serves every run of a tree.
SERVE_PLACEHOLDERS = ("tree", "out", "python")
# The knob check's command ([target.knobs] check): run in the user's tree.
KNOB_PLACEHOLDERS = ("tree", "python")


@dataclass(frozen=True)
class Config:
    name: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # GPUs this config's runs need (`{gpus}` in the run command); 0: the target's
    base: str | None = None  # a real-size config's base: the faults that run under it run here


@dataclass(frozen=True)
class Exposure:
    """[exposure]: the real-size runs the sweep adds (docs/catalog.md,
    "Exposure at real sizes"): every config gets a real-size config `<config>@<name>`
    whose run command ends with `args` and whose environment adds `env`;
    the config's faults run under it too."""

    name: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def real_size(self, config: Config) -> Config:
        return replace(
            config,
            name=f"{config.name}@{self.name}",
            args=config.args + self.args,
            env={**config.env, **self.env},
            base=config.name,
        )


@dataclass(frozen=True)
class MutationRule:
    """A `[[target.mutation]]` entry: in every site of `kind`, each match of
    `pattern` becomes one mutant with the match rewritten to `replacement`
    (which may name the pattern's groups, as re.sub's template). With
    `twins`, the rewritten site calls a copy of a function that only the
    mutant's scratch tree defines (faults/generate/mutate.py)."""

    @dataclass(frozen=True)
    class Twin:
        """`twin = { of, name, pattern, replacement }`: in the mutant's tree
        the definition of the function `of` is copied right after itself,
        renamed `name`, with every match of `pattern` in its body rewritten to
        `replacement` (re.sub's template); the product ships no copy. `of`
        and `name` may name the rule pattern's groups: each match of it
        expands them (`expanded`)."""

        of: str
        name: str
        pattern: re.Pattern[str]
        replacement: str

        def expanded(self, match: re.Match[str]) -> MutationRule.Twin:
            """This twin for one match of its rule's pattern: `of` and `name`
            with the match's groups in place of their references."""
            return replace(self, of=match.expand(self.of), name=match.expand(self.name))

    family: Family
    kind: str  # the site kind it rewrites (invariants.sync.sites.KINDS)
    pattern: re.Pattern[str]
    replacement: str
    # Which producers the mutant's own exposing delay holds back at the store
    # its release publishes or its wait guards: a condition, with the
    # pattern's groups (None: no delay; docs/operators.md, "Delays that
    # expose").
    expose: str | None = None
    twins: tuple[MutationRule.Twin, ...] = ()  # the copies the rewritten site calls, in order


@dataclass(frozen=True)
class Patch:
    owner: str  # the fault whose patch this is (markers print this id)
    site: str | None = None
    action: str | None = None  # delay | skip | hold | signal, for site patches
    ns: int = 0
    at: str = "start"
    when: str = "true"
    marker: str = "true"
    file: str | None = None  # text patches: exact-once replacement of old by new
    old: str | None = None
    new: str | None = None
    # A text patch's marker goes at the start of this site's region; None: the
    # region that holds the change (docs/catalog.md, "Pipeline of the fault engine").
    marker_site: str | None = None
    # hold / signal: the forced-order marker cell, an index expression (one
    # cell per warp or per CTA; docs/operators.md, "Delays that expose").
    cell: str = "0"
    # delay: which threads it holds back and how long, drawn from a seed
    # (docs/operators.md, "Seeded schedules and replay"); None: `when`, `ns`.
    schedule: Schedule | None = None


@dataclass(frozen=True)
class Fault:
    id: str
    title: str
    expect: str  # pass | fail
    patches: tuple[Patch, ...]
    includes: tuple[str, ...] = ()
    survivor_ok: str | None = None
    configs: tuple[str, ...] = ()  # the configs it runs under (empty: all)
    family: Family | None = None  # a generated fault's; None for a hand-written one


@dataclass(frozen=True)
class LogPatterns:
    """How a target's log says what happened: each a regular expression
    searched line by line (docs/catalog.md, "Pipeline of the fault engine")."""

    mismatch: re.Pattern[str]  # a check that failed
    timeout: re.Pattern[str]  # a wait that gave up, naming its site
    assertion: re.Pattern[str]  # an invariant the target asserts
    device_error: re.Pattern[str]  # the device (or the process) faulted: a trap, a bad address
    digest: re.Pattern[str]  # the tree that ran; its one group captures the digest


LOG_KEYS = ("mismatch", "timeout", "assertion", "device_error", "digest")


@dataclass(frozen=True)
class GenerateSettings:
    """The [generate] table: how site-generated faults are made (faults.generate.site_faults)."""

    ns: int = 20_000
    # How long a wait-skip fault holds the guarded site back: the window must
    # outlast the consumer's own start-up, or the skip opens no race.
    window_ns: int | None = None  # None: ns
    when: str = "true"
    marker: str = "true"  # a condition in scope at every site (the catalog narrows it)
    configs: tuple[str, ...] = ()  # the configs a generated fault runs under (empty: all)
    # (site-name prefix, configs): a site that fires only under some configs runs
    # there; the longest matching prefix wins over `configs`.
    site_configs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # wait site -> why skipping it cannot open a race (another wait covers it);
    # or one generated fault's id (`gen.` ...) -> why it survives, that fault only
    survivor_ok: tuple[tuple[str, str], ...] = ()
    # (site-name prefix, why): code no config runs (no harness reaches it), its
    # sites held to the site rule and the contract only: no fault is generated
    # from them, since nothing would fire it.
    not_run: tuple[tuple[str, str], ...] = ()

    def narrowed(self, condition: str) -> str:
        """`condition`, and `when` unless that is "true"."""
        return condition if self.when.strip() == "true" else f"({condition}) && ({self.when})"

    def held_back(self, owner: str, site: str, held: str, marker: str) -> Patch:
        """`owner`'s delay of `ns` at the start of `site`, in the threads `held`
        names (and `when`): the delays that expose (faults/generate/expose.py and
        faults/generate/mutate.py)."""
        return Patch(
            owner, site=site, action="delay", ns=self.ns, when=self.narrowed(held), marker=marker
        )

    def survivor_for(self, fault_id: str, site: str | None) -> str | None:
        """Why `fault_id` may survive: its own entry, else its site's (None:
        the site's entry does not apply, as for an order mutant)."""
        reasons = dict(self.survivor_ok)
        return reasons.get(fault_id) or (reasons.get(site) if site else None)

    def configs_for_site(self, site: str) -> tuple[str, ...]:
        matches = [
            (len(prefix), names) for prefix, names in self.site_configs if site.startswith(prefix)
        ]
        return max(matches)[1] if matches else self.configs

    def not_run_why(self, site: str) -> str | None:
        """Why no config runs `site`'s code (the first prefix of `not_run` it
        starts with); None: some config runs it."""
        return next((why for prefix, why in self.not_run if site.startswith(prefix)), None)


@dataclass(frozen=True)
class Holding:
    """For releases of one producers= group: who publishes, whom a delay that
    exposes holds back (never the publisher), and the forced-order cell."""

    publisher: str  # C condition: the thread that releases
    held: str  # C condition: the other producers (other lanes, warps or CTAs)
    marker: str  # C condition: the held threads that print the marker
    cell: str | None = None  # index of this thread's cell; None: no forced order


@dataclass(frozen=True)
class Publisher:
    """[target.publisher]: per producers= group (GROUPS), its Holding."""

    hold_ns: int  # the bound of a forced-order wait
    groups: dict[str, Holding]

    def holding(self, group: str) -> Holding | None:
        return self.groups.get(group)


GROUPS = ("thread", "warp", "block", "grid")


@dataclass(frozen=True)
class Knobs:
    """[target.knobs]: the environment variables the target reads, each
    named from `prefix`, and its command that checks them (faults/catalog/knobs.py)."""

    prefix: str
    check: tuple[str, ...]


@dataclass(frozen=True)
class Target:
    name: str
    sources: str  # directory of the native sources, relative to the tree root
    language: str
    run: tuple[str, ...]
    log: LogPatterns
    build: tuple[str, ...] = ()
    clock: str = ""  # expression giving nanoseconds, for delays (required for cuda)
    rank: str = "0"  # expression a marker prints as its rank
    timeout_s: float = 300.0
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # GPUs a run needs; with fewer, faults are applied and built only
    contract: ContractSpellings | None = None  # [target.contract]; None: no contract check
    mutations: tuple[MutationRule, ...] = ()  # [[target.mutation]]: faults/generate/mutate.py
    publisher: Publisher | None = None  # who publishes, for the delays that expose
    logical_run: tuple[str, ...] = ()  # [target.logical] run: every rank on one GPU
    sass: tuple[
        str, ...
    ] = ()  # [target.sass] cubin: writes every variant's cubin (faults/pipeline/erasure.py)
    schedule: ScheduleSpelling | None = None  # [target.schedule]: thread identities, steps
    anchors: tuple[Anchor, ...] = ()  # [[target.site]]: sites declared outside the sources
    bound: Bound | None = None  # [target.bound]: a time limit on its sites' spin loops
    # [target.serve] command: a warm worker that takes the runs (faults/pipeline/serve.py); ()
    # runs a process per run
    serve: tuple[str, ...] = ()
    knobs: Knobs | None = None  # [target.knobs]: checked by every command before any work
    # [target.identity]: the statement that makes the tree say its digest (a run
    # that is the target's own test prints none of ours)
    identity: Identity | None = None

    def annotated(self) -> Target:
        """This target as its scratch trees hold it: its anchored sites are
        written in there as comment sites (faults/pipeline/scratch.py), so no
        anchor is resolved again in a tree its faults patch."""
        return replace(self, anchors=())


@dataclass(frozen=True)
class Catalog:
    path: Path
    target: Target
    configs: tuple[Config, ...]
    faults: dict[str, Fault]
    control: tuple[Patch, ...]  # the forced-fail control's patches
    generate: GenerateSettings  # the [generate] table: how site-generated faults are made
    rank_mode: RankMode = RankMode.PER_GPU
    exposure: Exposure | None = None  # [exposure]: every config's real-size config
    shrink: ShrinkSpec | None = None  # [shrink]: what `shrink` may make smaller
    matrix: Matrix | None = None  # [matrix]: the dimensions a change is run across

    def config(self, name: str) -> Config:
        for config in self.configs:
            if config.name == name:
                return config
        raise CatalogError(
            f"{self.path}: no config {name!r}; known: {[c.name for c in self.configs]}"
        )

    def fault(self, fault_id: str) -> Fault:
        if fault_id not in self.faults:
            names = known_names(fault_id, self.faults, FAULTS_LISTED)
            raise CatalogError(f"{self.path}: no fault {fault_id!r}; {names}")
        return self.faults[fault_id]

    def ranks_for(self, config: Config) -> int:
        """The ranks a run of `config` has (a GPU each in the per-GPU mode)."""
        return config.gpus or self.target.gpus

    def gpus_for(self, config: Config) -> int:
        if self.rank_mode is RankMode.LOGICAL:
            return min(self.ranks_for(config), 1)
        return self.ranks_for(config)

    @property
    def gpus_needed(self) -> int:
        """GPUs a run of the target's default configs needs in this mode."""
        return min(self.target.gpus, 1) if self.rank_mode is RankMode.LOGICAL else self.target.gpus

    def auto_rank_mode(self, gpus: int) -> RankMode:
        """By the GPUs here: fewer than the target's ranks but one at least, and
        a [target.logical] command, run every rank on one GPU."""
        if 0 < gpus < self.target.gpus and self.target.logical_run:
            return RankMode.LOGICAL
        return RankMode.PER_GPU

    def in_rank_mode(self, mode: RankMode) -> Catalog:
        """This catalog with its runs placed by `mode` (logical: the target's
        [target.logical] run command, one GPU per run)."""
        if mode is RankMode.PER_GPU:
            return self
        if not self.target.logical_run:
            raise CatalogError(
                f"{self.path}: rank mode {mode}: the catalog has no [target.logical] run command"
            )
        target = replace(self.target, run=self.target.logical_run)
        return replace(self, target=target, rank_mode=mode)

    def on_matrix(self) -> tuple[Catalog, str]:
        """This catalog with its [matrix]'s configs for its own (each named by its
        values: `bf16-graph-pf-...-2A2F`), and how they were chosen in words; as it
        is, and "", without a matrix."""
        if self.matrix is None:
            return self, ""
        points, how = self.matrix.points()
        return replace(self, configs=tuple(Config(**config_fields(p)) for p in points)), how

    def unpinned(self) -> Catalog:
        """This catalog with no fault pinned to configs by name: a matrix
        sweep's configs are its [matrix]'s points, and each fault runs where
        its sites fire (faults/sweep/sweep.py)."""
        faults = {name: replace(fault, configs=()) for name, fault in self.faults.items()}
        return replace(self, faults=faults)

    def process_per_run(self) -> Catalog:
        """This catalog with its runs made a process each, its warm workers unused."""
        return replace(self, target=replace(self.target, serve=()))

    def with_exposure(self) -> Catalog:
        """This catalog with each config's real-size config after it (none: as it is)."""
        if self.exposure is None or any(c.base for c in self.configs):
            return self
        real_size = tuple(self.exposure.real_size(c) for c in self.configs)
        return replace(self, configs=self.configs + real_size)

    def configs_for(self, fault_id: str, names: list[str] | None = None) -> list[Config]:
        """The configs `fault_id` runs under (a real-size config where its config
        is), narrowed to `names` when given (None: no narrowing; empty: none)."""
        allowed = self.fault(fault_id).configs
        return [
            c
            for c in self.configs
            if (not allowed or (c.base or c.name) in allowed) and (names is None or c.name in names)
        ]

    def all_patches(self, fault_id: str) -> list[Patch]:
        """The patches of `fault_id`, those of its includes first (depth first)."""
        fault = self.fault(fault_id)
        patches = [p for included in fault.includes for p in self.all_patches(included)]
        return patches + list(fault.patches)
