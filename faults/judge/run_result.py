"""A run judged (docs/verdicts.md, "Verdicts"): its run id's parts, its
verdict, its tree's digest, its stages' seconds and its outcome; what a
seeded fault's run drew (faults/schedules/)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from faults.catalog import Catalog
from faults.judge.outcome import Outcome
from faults.judge.verdict import Judgement, Verdict
from faults.schedules.ids import run_id
from faults.schedules.seeds import describe


class JudgedTree(Protocol):
    """What a run's result takes of the tree it ran (faults.pipeline.scratch.Prepared)."""

    label: str
    digest: str
    apply_s: float
    build_s: float
    sass_s: float
    erased_unknown: str  # why the erasure check could not decide, if so


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

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        tree: JudgedTree,
        config: str,
        repeat: int,
        judgement: Judgement,
        outcome: Outcome | None = None,
        judge_s: float = 0.0,
    ) -> RunResult:
        """A run of `tree` under `config`, judged (`judge_s`: parsing its log and the verdict)."""
        seed, schedule = describe(catalog, tree.label)
        return cls(
            fault=tree.label,
            config=config,
            repeat=repeat,
            verdict=judgement.verdict,
            ok=judgement.ok,
            reason="; ".join(filter(None, [judgement.reason, tree.erased_unknown])),
            tree_digest=tree.digest,
            seconds={
                "apply": round(tree.apply_s, 3),
                "build": round(tree.build_s, 3),
                "sass": round(tree.sass_s, 3),  # deciding whether the compiler erased it
                "run": round(outcome.wall_s if outcome else 0.0, 3),
                "judge": round(judge_s, 4),
            },
            outcome=outcome.to_dict() if outcome else None,
            seed=seed,
            schedule=schedule,
        )

    @property
    def run_id(self) -> str:
        """Its run id, what `replay` takes (its fault holds the seed already)."""
        return run_id(self.fault, self.config, self.repeat)

    def to_dict(self) -> dict:
        """JSON reports and the history keep the verdict's word, e.g. `NOT FIRED`."""
        return {**asdict(self), "verdict": self.verdict.value}
