"""The pipeline: scratch tree -> apply -> the erasure check -> build -> run
each config -> parse -> verdict (the last three: faults/pipeline/run.py's
judged_runs). Controls come first: the unpatched tree must pass and the
forced-fail control must be killed, or the harness is broken and no fault is
judged."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from faults.catalog import Catalog, Config, Patch
from faults.judge.run_result import RunResult
from faults.judge.verdict import Judgement, Verdict
from faults.pipeline.apply import ApplyError, apply_fault, apply_patches, say_identity
from faults.pipeline.erasure import ErasedDecision, decide, erased_check, erasure_baseline
from faults.pipeline.run import BuildError, build_tree, judged_runs, worker_pool
from faults.pipeline.scratch import Prepared, UserTreeGuard, target_scratch, tree_digest
from invariants.sync.contract import TreeContract, static_contract
from hostio import cpu_share
from invariants.sync.sites import SourceTree

CLEAN = "control.clean"
FORCED = "control.forced_fail"


class AskedOnce:
    """The static contract's violations in one tree, checked the first time a
    survivor asks; a check that fails raises its error again to each asker,
    who says why (faults/judge/verdict.py: never UNOBSERVABLE then)."""

    def __init__(self, check: TreeContract, tree: Path, sources: SourceTree):
        self.check, self.tree, self.sources = check, tree, sources
        self.answer: tuple[str | None, Exception | None] | None = None

    def __call__(self) -> str | None:
        if self.answer is None:
            try:
                self.answer = (self.check(self.tree, self.sources), None)
            except Exception as error:  # any failure of the checker: said, not hidden
                self.answer = (None, error)
        flags, error = self.answer
        if error is not None:
            raise error
        return flags


class Engine:
    def __init__(
        self,
        catalog: Catalog,
        root: Path,
        workdir: Path,
        *,
        ref: str | None = None,
        env: dict[str, str] | None = None,
        contract: TreeContract | None = None,
        erased: ErasedDecision | None = None,
        probes: tuple[Patch, ...] = (),
        runs_at_once: int | None = None,
        erasure: bool = True,
    ):
        self.catalog = catalog
        self.root = Path(root).resolve()
        self.workdir = Path(workdir)
        self.ref = ref
        # e.g. this worker's CUDA_VISIBLE_DEVICES; with `runs_at_once` (runs
        # started that many at a time), each run's share of the CPU's threads
        # (hostio.cpu_share), unless the caller's environment or the catalog sets it.
        self.env = dict(env or {})
        if runs_at_once is not None:
            self.env = {**cpu_share(runs_at_once, os.environ, catalog.target.env), **self.env}
        # A tree's static contract violations (docs/operators.md, "Mutation
        # operators"): the injected check, else invariants.sync.contract's (when there is one).
        # Asked of scratch trees only, whose anchored sites are comment sites.
        self.contract = contract or static_contract(catalog.target.annotated())
        self._prepared: dict[str, Prepared] = {}  # one tree per label, shared by its configs
        # Whether the compiler erased a fault: the injected check, else the catalog's
        # [target.sass]; none with `erasure` off (nothing will run the trees: it decides nothing).
        self.erased = None
        if erasure:
            self.erased = erased or erased_check(catalog, self.root, self.workdir, ref)
        # The clean tree's patches that only print markers (a zero-ns delay):
        # its runs then say which configs execute those sites (the review's
        # probes, docs/review.md, "The pre-merge review"); none: the tree as it is.
        self.probes = probes
        # The target's warm workers ([target.serve]), started as runs need them; None: a
        # process per run. close() ends them.
        self.workers = worker_pool(catalog.target, self.env, self.workdir / "workers")

    def close(self) -> None:
        """End this engine's warm workers (runs after it start new ones)."""
        if self.workers is not None:
            self.workers.close()

    @property
    def build_gpus(self) -> int:
        # One build serves the runs of every config, so `{gpus}` in a build
        # word is the largest config's count (a config's own, else the target's).
        return max(self.catalog.gpus_for(config) for config in self.catalog.configs)

    @property
    def user_sources(self) -> Path:
        return self.root / self.catalog.target.sources

    def guard(self) -> UserTreeGuard:
        return UserTreeGuard(self.user_sources)

    # ------------------------------------------------------------------ stages
    def prepare(self, label: str, fault_id: str | None = None, patches=None) -> Prepared:
        """The scratch tree `label`, applied and built (once per engine)."""
        if label not in self._prepared:
            self._prepared[label] = self._prepare(label, fault_id, patches)
        return self._prepared[label]

    def _prepare(self, label: str, fault_id: str | None, patches) -> Prepared:
        """Scratch, apply, the erasure check (it builds a bare copy of its own),
        then the build: an erased fault is not run; a tree that does not build
        is BUILD ERROR, erased or not. One parse of the tree's sources serves
        every stage (each write through it)."""
        started = time.perf_counter()
        tree = self.workdir / label / "tree"
        if tree.exists():  # a workdir reused: this engine's own old scratch tree
            shutil.rmtree(tree)
        sources = target_scratch(self.root, tree, self.catalog.target, ref=self.ref)
        try:
            if fault_id is not None:
                apply_fault(sources, self.catalog, fault_id)
            else:  # a control: its patches (the clean tree, none) and the bound
                apply_patches(sources, self.catalog, list(patches or ()), marked=False)
        except ApplyError as error:
            failed = Judgement(Verdict.APPLY_ERROR, False, str(error))
            return Prepared(label, tree, sources, error=failed)
        digest = tree_digest(sources.root)
        apply_s = time.perf_counter() - started
        # none configured: no survivor is EQUIVALENT or UNOBSERVABLE
        contract = AskedOnce(self.contract, tree, sources) if self.contract is not None else None
        erased, sass_s, unknown = None, 0.0, ""
        if fault_id is not None and self.erased is not None:
            erased, sass_s, unknown = decide(self.erased, fault_id, self.workdir / label)
        identity = self.catalog.target.identity
        try:  # last: the erasure check and the digest see the tree without it
            if identity is not None:
                say_identity(sources, identity, digest)
        except ApplyError as error:
            failed = Judgement(Verdict.APPLY_ERROR, False, str(error))
            return Prepared(label, tree, sources, error=failed)
        build_s, error = self._build(tree, label, digest)
        if error is not None:  # the verdict, whatever the erasure check said
            erased, unknown = None, ""
        return Prepared(
            label, tree, sources, digest, apply_s, build_s,
            error=error, erased=erased, sass_s=sass_s, erased_unknown=unknown, contract=contract,
        )  # fmt: skip

    def _build(self, tree: Path, label: str, digest: str) -> tuple[float, Judgement | None]:
        """The build's seconds, and BUILD ERROR when it failed."""
        started = time.perf_counter()
        try:
            build_tree(
                self.catalog.target, tree, self.workdir / label, digest, gpus=self.build_gpus
            )
        except BuildError as error:
            return time.perf_counter() - started, Judgement(Verdict.BUILD_ERROR, False, str(error))
        return time.perf_counter() - started, None

    # ------------------------------------------------------------------ faults
    def evaluate(self, fault_id: str, configs: list[Config], repeats: int = 1) -> list[RunResult]:
        """Each config's runs of the fault's tree, `repeats` times, judged (one
        result a config, not run, when the tree is decided already)."""
        prepared = self.prepare(fault_id, fault_id)
        return judged_runs(
            self.catalog,
            prepared,
            [(config, repeat) for config in configs for repeat in range(repeats)],
            out=self.workdir / prepared.label,
            env=self.env,
            fault=self.catalog.fault(fault_id),
            workers=self.workers,
        )

    def controls(
        self,
        configs: list[Config],
        slots: int = 1,
        on_result: Callable[[RunResult], None] | None = None,
        then: Callable[[RunResult], list[Config]] | None = None,
    ) -> list[RunResult]:
        """The unpatched tree must pass; the forced-fail control must be killed.
        Neither depends on timing, so they run `slots` at a time. A config
        whose clean run fails gets no forced run: on a tree that fails alone it
        says nothing of the harness, and it may hang where the clean run did.
        `on_result` sees each run as it lands. `then`: given each clean run
        of `configs` that passed, more configs to run clean only (the
        review's real-size configs where a touched site fired), in the same
        slots: they need not wait for the last control to land."""
        clean = self.prepare(CLEAN, patches=self.probes)
        if not clean.error:  # the erasure check's baseline counts once, on the clean control
            clean = replace(clean, sass_s=erasure_baseline(self.erased))
            self._prepared[CLEAN] = clean
        control_patches = self.catalog.control
        forced = self.prepare(FORCED, patches=control_patches) if control_patches else None

        def control(prepared: Prepared, config: Config, must_fail: bool) -> RunResult:
            out = self.workdir / prepared.label
            return judged_runs(
                self.catalog, prepared, [(config, 0)], out=out, env=self.env,
                must_fail=must_fail, workers=self.workers,
            )[0]  # fmt: skip

        found: dict[tuple[str, str], RunResult] = {}
        ran = list(configs)
        with stopping_pool(slots) as pool:
            pending = {pool.submit(control, clean, c, False): c for c in configs}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for job in done:
                    config = pending.pop(job)
                    result = job.result()
                    found[result.fault, config.name] = result
                    if on_result is not None:
                        on_result(result)
                    if result.fault != CLEAN or not result.ok or config not in configs:
                        continue
                    if forced is not None:
                        pending[pool.submit(control, forced, config, True)] = config
                    for more in then(result) if then is not None else []:
                        ran.append(more)
                        pending[pool.submit(control, clean, more, False)] = more
        keys = [(label, c.name) for label in (CLEAN, FORCED) for c in ran]
        return [found[key] for key in keys if key in found]


@contextmanager
def stopping_pool(
    workers: int, stop: threading.Event | None = None
) -> Iterator[ThreadPoolExecutor]:
    """A thread pool that, when its caller is interrupted (Ctrl-C) or fails,
    starts none of its queued jobs and sets `stop` for the running ones to
    see, so no further tree is copied, patched, built or run: a plain `with
    ThreadPoolExecutor` waits for every job submitted to it first."""
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    except BaseException:
        if stop is not None:
            stop.set()
        pool.shutdown(cancel_futures=True)
        raise
    pool.shutdown()
