"""An ERASED fault in the engine and the sweep, on the CPU fixture with a
fake erasure check: decided after the build, never run, said in the log
line and the report, outside the mutation score."""

from __future__ import annotations

import time
from pathlib import Path

from faults.judge.run_result import RunResult
import faults.pipeline.erasure
from faults.catalog import load_catalog
from faults.judge.scores import family_scores, scores
from faults.judge.verdict import FaultSummary, Verdict, summarize_fault
from faults.pipeline.apply import apply_patches
from faults.pipeline.engine import Engine
from faults.pipeline.erasure import erased_judgement
from faults.pipeline.scratch import make_scratch
from faults.pipeline.slots import sweep
from faults.report.document import summary_line
from faults.sweep.sweep import Sweep, SweepOptions
from invariants.sync.sites import SourceTree
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
CATALOG = REPO / "tests/fixtures/flag_payload/catalog.toml"
REASON = (
    "every kernel's SASS (3 variants) is the clean tree's, addresses and register "
    "numbers aside: the compiler erased the change; not run"
)


class FakeErasure:
    """ERASED for the ids it is given; records every fault it was asked about."""

    def __init__(self, catalog, *erased: str):
        self.catalog = catalog
        self.erased = erased
        self.asked: list[str] = []

    def __call__(self, fault_id: str, folder: Path):
        self.asked.append(fault_id)
        if fault_id not in self.erased:
            return None
        return erased_judgement(self.catalog.fault(fault_id).expect, 3)


def fixture_catalog(tmp_path: Path, *, gpus: int = 0):
    text = CATALOG.read_text().replace("timeout_s = 60", f"timeout_s = 60\ngpus = {gpus}")
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return load_catalog(path, tree_root=REPO)


def test_an_erased_fault_is_not_run_and_its_line_says_so(tmp_path):
    catalog = fixture_catalog(tmp_path)
    erasure = FakeErasure(catalog, "S1")
    engine = Engine(catalog, REPO, tmp_path / "work", erased=erasure)
    seen: list[RunResult] = []
    controls, results = sweep([engine], ["D1", "S1"], None, 1, seen.extend)
    assert [r.verdict for r in controls] == [Verdict.PASSED, Verdict.KILLED]
    assert sorted(erasure.asked) == ["D1", "S1"]  # each fault once (built side by side), no control
    by_fault = {r.fault: r for r in results}
    assert by_fault["D1"].verdict is Verdict.PASSED and by_fault["D1"].outcome is not None
    erased = by_fault["S1"]
    assert (erased.verdict, erased.ok, erased.reason) == (Verdict.ERASED, True, REASON)
    assert erased.outcome is None and erased.seconds["run"] == 0.0
    assert summary_line(erased) == f"S1@default#0 tree={erased.tree_digest[:8]} ERASED: {REASON}"
    summary = summarize_fault(catalog.fault("S1"), [erased])
    assert (summary.verdict, summary.ok, summary.fired, summary.reason) == (
        Verdict.ERASED,
        True,
        1,
        REASON,
    )


class FakeErasureWithBaseline(FakeErasure):
    """Keeps a clean-tree baseline, as ErasedCheck does: 0.3 s to make."""

    def clean(self):
        self.asked.append("clean")
        time.sleep(0.3)


def test_the_erasure_baseline_is_made_once_before_any_fault_and_counted_on_the_clean_control(
    tmp_path,
):
    catalog = fixture_catalog(tmp_path)
    erasure = FakeErasureWithBaseline(catalog)
    engine = Engine(catalog, REPO, tmp_path / "work", erased=erasure)
    controls, results = sweep([engine], ["D1", "S1"], None, 2, lambda _: None)
    assert erasure.asked[0] == "clean" and sorted(erasure.asked[1:]) == ["D1", "S1"]
    clean = [r.seconds["sass"] for r in controls if r.fault == "control.clean"]
    assert clean and all(0.3 <= s < 1.0 for s in clean)
    assert all(r.seconds["sass"] < 0.3 for r in results)  # no fault waited for the baseline


def test_a_sweep_without_gpus_decides_erased_and_says_so(tmp_path):
    catalog = fixture_catalog(tmp_path, gpus=2)
    erasure = FakeErasure(catalog, "S1", "D1")
    options = SweepOptions(only=["D1", "S1"], results_dir=tmp_path / "results", erased=erasure)
    planned = Sweep.plan(catalog, REPO, tmp_path / "work", options, gpus=0)
    lines: list[str] = []
    planned.run(lines.append, lambda: None)
    assert not planned.runnable
    states = {row["fault"]: (row["state"], row["ok"]) for row in planned.built}
    assert states == {"D1": ("ERASED", False), "S1": ("ERASED", True)}
    s1 = next(line for line in lines if line.startswith("S1 "))
    assert s1.endswith(f" s): {REASON}")
    d1 = next(row for row in planned.built if row["fault"] == "D1")
    assert d1["reason"] == f"{REASON}; a must-pass fault it erases proves nothing"
    assert not planned.ok(planned.report())  # the must-pass fault the compiler erased


def test_an_erased_mutant_is_outside_the_score_and_counted_beside_it():
    def summary(fault: str, verdict: Verdict) -> FaultSummary:
        killed = int(verdict is Verdict.KILLED)
        return FaultSummary(
            fault, "fail", verdict, True, 1, 1, killed, killed, 1, "", "remove-fence"
        )

    summaries = [summary("a", Verdict.KILLED), summary("b", Verdict.ERASED)]
    assert scores(summaries) == (1.0, 1.0)
    row = family_scores(summaries)["remove-fence"]
    assert (row["faults"], row["killed"], row["erased"], row["score"]) == (2, 1, 1, 1.0)


def test_a_bare_apply_leaves_no_marker_and_a_marked_one_does(tmp_path):
    catalog = fixture_catalog(tmp_path)
    patches = catalog.all_patches("S1")  # a delay (D1, included) and a skip
    for bare in (False, True):
        tree = tmp_path / f"bare-{bare}"
        make_scratch(REPO, tree)
        sources = SourceTree(tree / catalog.target.sources)
        [changed] = apply_patches(sources, catalog, patches, bare=bare)
        printed = changed.read_text().count('std::printf("AFDFAULT')
        assert printed == (0 if bare else 2), bare


def test_a_sweep_with_no_disassembler_stops_with_one_line(tmp_path, monkeypatch, capsys):
    text = CATALOG.read_text().replace(
        "[target.log]", '[target.sass]\ncubin = ["{python}", "-c", "pass"]\n\n[target.log]', 1
    )
    (tmp_path / "catalog.toml").write_text(text)
    monkeypatch.setattr(faults.pipeline.erasure, "cuda_tool", lambda name: None)  # none anywhere
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    top = ["--catalog", str(tmp_path / "catalog.toml"), "--root", str(REPO), "--no-generated"]
    status = main(
        [*top, "--workdir", str(tmp_path / "work"), "sweep", "--results-dir", str(tmp_path)]
    )
    assert status == 2
    assert capsys.readouterr().err == (
        f"python -m faults: error: nvdisasm not found on PATH, in {tmp_path}/no-toolkit/bin "
        "nor in the nvidia-cuda-nvdisasm wheel: pip install nvidia-cuda-nvdisasm\n"
    )
