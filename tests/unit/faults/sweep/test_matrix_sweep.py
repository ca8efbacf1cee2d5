"""`sweep --matrix` (faults/sweep/sweep.py): the catalog's [matrix] points for
its configs, each fault under every point whose clean control fired all the
sites it patches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.judge.outcome import Outcome
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.pipeline.engine import CLEAN, FORCED
from faults.review.matrix import patched_sites
from faults.sweep.selection import SweepError
from faults.sweep.sweep import Sweep, SweepOptions
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
# Two points, the second with an environment the fixture does not read: every
# site fires under both (the fixture has one code path).
MATRIX = """
[matrix]
most = 4
dimensions = [{ name = "size", values = [{ name = "small" },
                                         { name = "large", env = { FX_SIZE = "large" } }] }]
"""
STORE, WAIT, RELEASE = "fx.producer.payload_store", "fx.consumer.flag_wait", "fx.producer.flag_release"


@pytest.fixture
def matrix_catalog(tmp_path) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text(FIXTURE.read_text() + MATRIX)
    return path


def clean(config: str, *fired: str, ok: bool = True) -> RunResult:
    """The clean control under `config`, its probes at `fired` printing."""
    markers = {f"probe.{site}": 2 for site in fired}
    outcome = Outcome(0 if ok else 1, False, 0.0, 0, 0, 0, markers=markers).to_dict()
    verdict = Verdict.PASSED if ok else Verdict.BROKE
    return RunResult(CLEAN, config, 0, verdict, ok, "", "0" * 64, {}, outcome)


def test_each_fault_runs_where_every_site_it_patches_fired(matrix_catalog, tmp_path):
    plan = Sweep.plan(
        load_catalog(matrix_catalog), REPO, tmp_path / "work", SweepOptions(matrix=True), 0
    )
    assert [c.name for c in plan.configs] == ["small", "large"]
    assert plan.matrix == "all 2 valid combinations of 1 dimensions"
    assert patched_sites(plan.catalog, plan.fault_ids) == [STORE, WAIT, RELEASE]
    forced = RunResult(FORCED, "large", 0, Verdict.KILLED, True, "", "0" * 64, {}, None)
    placed = plan.place_where_fired([clean("small", STORE, WAIT), clean("large", WAIT), forced])
    assert {f: [c.name for c in configs] for f, configs in placed.items()} == {
        "D1": ["small"],  # the store
        "S1": ["small"],  # D1's store and the wait: both fire under small only
        "S2": ["small", "large"],  # the wait alone
        "N1": [],  # the release fired nowhere
    }
    assert plan.unplaced == ["N1"]
    assert str(plan.firing[STORE]) == "fires under: small; never under: large"


def test_a_fault_placed_nowhere_fails_the_sweep_and_says_why(matrix_catalog, tmp_path):
    options = SweepOptions(only=["N1"], matrix=True)
    plan = Sweep.plan(load_catalog(matrix_catalog), REPO, tmp_path / "work", options, 0)
    plan.controls = [clean("small", WAIT), clean("large")]
    assert plan.place_where_fired(plan.controls) == {"N1": []}
    report = plan.report()
    assert (report.unplaced, report.harness_ok, report.ok) == (["N1"], True, False)
    assert report.firing == {RELEASE: "fires under: none; never under: small, large"}
    assert plan.why_not_ok(report) == (
        "1 fault whose sites fire together under no config of the matrix: N1"
    )


def test_a_catalog_without_a_matrix_is_refused_in_one_line(tmp_path):
    with pytest.raises(SweepError) as caught:
        Sweep.plan(load_catalog(FIXTURE), REPO, tmp_path, SweepOptions(matrix=True), 0)
    assert str(caught.value) == f"--matrix: the catalog {FIXTURE} has no [matrix]"


def test_the_fixture_swept_on_its_matrix_runs_the_fault_under_both_points(
    matrix_catalog, tmp_path, capsys
):
    common = ["--catalog", str(matrix_catalog), "--root", str(REPO), "--no-generated"]
    out = tmp_path / "out"
    sweep = ["--workdir", str(tmp_path / "work"), "sweep", "--matrix", "--only", "S1"]
    assert main([*common, *sweep, "--results-dir", str(out)]) == 0
    [path] = out.glob("sweep-*.json")
    report = json.loads(path.read_text())
    assert [(r["fault"], r["config"]) for r in report["controls"]] == [
        (f, c) for f in ("control.clean", "control.forced_fail") for c in ("small", "large")
    ]
    assert [(r["fault"], r["config"], r["verdict"]) for r in report["results"]] == [
        ("S1", "large", "KILLED"),
        ("S1", "small", "KILLED"),
    ]
    assert report["firing"] == {site: "fires under: small, large" for site in (STORE, WAIT)}
    assert (report["matrix"], report["unplaced"], report["ok"]) == (
        "all 2 valid combinations of 1 dimensions",
        [],
        True,
    )
    assert "- configs: the catalog's [matrix], all 2 valid combinations" in capsys.readouterr().out
