"""A scheduled fault judged over its seeds (docs/operators.md, "Seeded
schedules and replay"): its runs over every seed taken together."""

from __future__ import annotations

from pathlib import Path

from faults.catalog import load_catalog
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.schedules.over_seeds import summaries_over_seeds
from faults.schedules.seeds import with_seeds

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"


def result(label: str, verdict: str, config: str = "bf16-graph") -> RunResult:
    return RunResult(label, config, 0, verdict, verdict == "KILLED", verdict.lower(), "d")


def test_a_must_fail_fault_killed_by_some_seeds_is_flaky_with_its_kill_rate():
    catalog, ids = with_seeds(load_catalog(AFDEP, tree_root=REPO), ["N2s.pct"], (0, 1, 2, 3))
    verdicts = ["KILLED", "SURVIVED", "KILLED", "KILLED"]
    results = [result(label, v) for label, v in zip(ids, verdicts, strict=True)]
    [summary] = summaries_over_seeds(catalog, ids, results)
    assert (summary.fault, summary.verdict, summary.kill_rate) == ("N2s.pct", Verdict.FLAKY, 0.75)
    assert summary.reason == "killed in 3 of 4 runs"
