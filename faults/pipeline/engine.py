"""The pipeline: scratch tree -> apply -> build -> run each config -> parse ->
verdict. Controls come first: the unpatched tree must pass and the forced-fail
control must be killed, or the harness is broken and no fault is judged."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.judge.outcome import Outcome
from faults.judge.seeds import describe
from faults.judge.verdict import Judgement, Verdict, judge, judge_control
from faults.pipeline.apply import ApplyError, apply_fault, apply_patches
from faults.pipeline.erasure import ErasedDecision, decide, erased_check, erasure_baseline
from faults.pipeline.parse import parse_outcome
from faults.pipeline.run import BuildError, RunError, build_tree, run_config
from faults.pipeline.scratch import UserTreeGuard, make_scratch, tree_digest
from invariants.sync.contract import TreeContract, static_contract
from invariants.sync.sites import parse_tree

CLEAN = "control.clean"
FORCED = "control.forced_fail"


@dataclass
class Prepared:
    """A scratch tree with one fault (or none) applied and built."""

    label: str
    tree: Path
    digest: str = ""
    apply_s: float = 0.0
    build_s: float = 0.0
    error: Judgement | None = None
    # The static contract's verdict on this tree, asked once, of a survivor only:
    # (violations or None, why it could not be checked or None).
    contract: tuple[str | None, str | None] | None = None
    # ERASED when the compiler erased the fault (faults/pipeline/erasure.py): then it is not run.
    erased: Judgement | None = None
    sass_s: float = 0.0
    erased_unknown: str = ""  # why the erasure check could not decide, if so


@dataclass
class RunResult:
    fault: str
    config: str
    repeat: int
    verdict: Verdict
    ok: bool
    reason: str
    tree_digest: str
    seconds: dict[str, float] = field(default_factory=dict)
    outcome: dict | None = None
    # A scheduled fault's seed and what it drew (docs/operators.md, "Seeded
    # schedules and replay"); None and "" for any other run.
    seed: int | None = None
    schedule: str = ""

    def __post_init__(self) -> None:  # a result read back from a JSON report holds the word
        self.verdict = Verdict(self.verdict)

    def to_dict(self) -> dict:
        """JSON reports and the history keep the verdict's word, e.g. `NOT FIRED`."""
        return {**asdict(self), "verdict": self.verdict.value}


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
    ):
        self.catalog = catalog
        self.root = Path(root).resolve()
        self.workdir = Path(workdir)
        self.ref = ref
        self.env = env or {}  # e.g. this worker's CUDA_VISIBLE_DEVICES
        # A tree's static contract violations (docs/operators.md, "Mutation
        # operators"): the injected check, else invariants.sync.contract's (when there is one).
        self.contract = contract or static_contract(catalog.target)
        self._prepared: dict[str, Prepared] = {}  # one tree per label, shared by its configs
        # Whether the compiler erased a fault: the injected check, else the catalog's [target.sass].
        self.erased = erased or erased_check(catalog, self.root, self.workdir, ref)

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
        started = time.perf_counter()
        prepared = Prepared(label, self.workdir / label / "tree")
        if prepared.tree.exists():  # a workdir reused: this engine's own old scratch tree
            shutil.rmtree(prepared.tree)
        make_scratch(self.root, prepared.tree, ref=self.ref)
        try:
            if fault_id is not None:
                apply_fault(prepared.tree, self.catalog, fault_id)
            elif patches:
                apply_patches(prepared.tree, self.catalog, list(patches), marked=False)
        except ApplyError as error:
            prepared.error = Judgement(Verdict.APPLY_ERROR, False, str(error))
            return prepared
        prepared.digest = tree_digest(prepared.tree / self.catalog.target.sources)
        prepared.apply_s = time.perf_counter() - started
        started = time.perf_counter()
        try:
            build_tree(
                self.catalog.target,
                prepared.tree,
                self.workdir / label,
                prepared.digest,
                gpus=self.build_gpus,
            )
        except BuildError as error:
            prepared.error = Judgement(Verdict.BUILD_ERROR, False, str(error))
        prepared.build_s = time.perf_counter() - started
        if prepared.error is None and fault_id is not None and self.erased is not None:
            erasure = decide(self.erased, fault_id, self.workdir / label)
            prepared.erased, prepared.sass_s, prepared.erased_unknown = erasure
        return prepared

    def run(self, prepared: Prepared, config: Config, repeat: int = 0) -> Outcome:
        suffix = f"-r{repeat}" if repeat else ""
        process = run_config(
            self.catalog.target,
            config,
            prepared.tree,
            self.workdir / prepared.label,
            prepared.digest,
            f"{prepared.label}-{config.name}{suffix}",
            gpus=self.catalog.gpus_for(config),
            ranks=self.catalog.ranks_for(config),
            env=self.env,
        )
        return parse_outcome(
            process, self.catalog.target.log, timeout_s=self.catalog.target.timeout_s
        )

    def _judged(
        self,
        prepared: Prepared,
        config: Config,
        repeat: int,
        judge_outcome: Callable[[Outcome], Judgement],
    ) -> RunResult:
        """One run of `prepared` under `config`, judged by `judge_outcome`; a
        run command that cannot start is BROKE, and says why (nothing ran)."""
        started = time.perf_counter()
        try:
            outcome = self.run(prepared, config, repeat)
        except RunError as error:
            judgement = Judgement(Verdict.BROKE, False, str(error))
            return self._result(prepared, config, repeat, judgement)
        judgement = judge_outcome(outcome)
        judge_s = time.perf_counter() - started - outcome.wall_s
        return self._result(prepared, config, repeat, judgement, outcome, outcome.wall_s, judge_s)

    def _result(
        self, prepared, config, repeat, judgement, outcome=None, run_s=0.0, judge_s=0.0
    ) -> RunResult:
        seed, schedule = describe(self.catalog, prepared.label)
        return RunResult(
            fault=prepared.label,
            config=config.name,
            repeat=repeat,
            verdict=judgement.verdict,
            ok=judgement.ok,
            reason="; ".join(filter(None, [judgement.reason, prepared.erased_unknown])),
            tree_digest=prepared.digest,
            seconds={
                "apply": round(prepared.apply_s, 3),
                "build": round(prepared.build_s, 3),
                "sass": round(prepared.sass_s, 3),  # deciding whether the compiler erased it
                "run": round(run_s, 3),
                "judge": round(judge_s, 4),  # parsing the log and the verdict
            },
            outcome=outcome.to_dict() if outcome else None,
            seed=seed,
            schedule=schedule,
        )

    # ------------------------------------------------------------------ faults
    def evaluate(self, fault_id: str, configs: list[Config], repeats: int = 1) -> list[RunResult]:
        fault = self.catalog.fault(fault_id)
        prepared = self.prepare(fault_id, fault_id)
        decided = prepared.error or prepared.erased  # an erased fault is not run
        if decided:
            return [self._result(prepared, c, 0, decided) for c in configs]
        patches = self.catalog.all_patches(fault_id)
        guards = {
            s.name: s.guards for s in parse_tree(prepared.tree / self.catalog.target.sources)[0]
        }

        def judged(outcome: Outcome) -> Judgement:
            judgement = judge(
                fault,
                outcome,
                prepared.digest,
                patches=patches,
                guards=guards,
                contract=lambda: self.contract_flags(prepared),
            )
            unchecked = prepared.contract[1] if prepared.contract else None
            if judgement.verdict in (Verdict.SURVIVED, Verdict.EQUIVALENT) and unchecked:
                # No contract, no equivalence: judged as with no checker at all.
                plain = judge(
                    fault, outcome, prepared.digest, patches=patches, guards=guards, contract=None
                )
                reason = f"{plain.reason}; the static contract was not checked: {unchecked}"
                return Judgement(plain.verdict, plain.ok, reason)
            return judgement

        return [
            self._judged(prepared, config, repeat, judged)
            for config in configs
            for repeat in range(repeats)
        ]

    def contract_flags(self, prepared: Prepared) -> str | None:
        """The static contract's violations in `prepared`'s tree, once per tree;
        a check that fails says why in the survivor's reason, never UNOBSERVABLE."""
        if self.contract is None:
            return None
        if prepared.contract is None:
            try:
                prepared.contract = (self.contract(prepared.tree), None)
            except Exception as error:  # any failure of the checker: said, not hidden
                prepared.contract = (None, f"{type(error).__name__}: {error}")
        return prepared.contract[0]

    def controls(self, configs: list[Config], slots: int = 1) -> list[RunResult]:
        """The unpatched tree must pass; the forced-fail control must be killed.
        Neither depends on timing, so they run `slots` at a time. A config
        whose clean run fails gets no forced run: on a tree that fails alone it
        says nothing of the harness, and it may hang where the clean run did."""
        clean = self.prepare(CLEAN, patches=())
        if not clean.error:
            clean.sass_s = erasure_baseline(self.erased)
        forced = (
            self.prepare(FORCED, patches=self.catalog.control) if self.catalog.control else None
        )

        def control(prepared: Prepared, config: Config, must_fail: bool) -> RunResult:
            if prepared.error:
                return self._result(prepared, config, 0, prepared.error)
            return self._judged(
                prepared,
                config,
                0,
                lambda outcome: judge_control(outcome, prepared.digest, must_fail),
            )

        found: dict[tuple[str, str], RunResult] = {}
        with stopping_pool(slots) as pool:
            pending = {pool.submit(control, clean, c, False): c for c in configs}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for job in done:
                    config = pending.pop(job)
                    result = job.result()
                    found[result.fault, config.name] = result
                    if result.fault == CLEAN and result.ok and forced is not None:
                        pending[pool.submit(control, forced, config, True)] = config
        return [
            found[key]
            for label in (CLEAN, FORCED)
            for c in configs
            if (key := (label, c.name)) in found
        ]


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
