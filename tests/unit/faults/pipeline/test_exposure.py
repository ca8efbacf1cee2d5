"""Exposure at real sizes: every config's `<config>@<name>` twin, the faults
that run under a config running under its twin, the markers per config and a
must-fail fault killed under one config only."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError, Fault, load_catalog
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict, summarize_fault

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"


def test_every_config_gets_a_real_size_config():
    catalog = load_catalog(AFDEP)
    exposed = catalog.with_exposure()
    twin = exposed.config("bf16-graph@2048")
    assert twin.args == (
        *("--payload", "bf16", "--graph", "--tokens", "2048", "--steps", "4", "--num-sms", "4"),
    )
    assert twin.base == "bf16-graph" and twin.env == {"AFDEP_COUNT_FIRST_EPILOGUE_SMS": "32"}
    arm = exposed.config("bf16-eager-arm-attention@2048").env
    assert arm == {"AFDEP_COUNT_FIRST_ARM": "attention", "AFDEP_COUNT_FIRST_EPILOGUE_SMS": "32"}
    assert exposed.config("4gpu-f2@2048").gpus == 4
    assert len(exposed.configs) == 2 * len(catalog.configs)
    assert exposed.with_exposure() is exposed  # twins are never twinned again
    assert [c.name for c in exposed.configs_for("N2u")] == [
        "bf16-graph-ungate",
        "bf16-graph-ungate@2048",
    ]
    assert [c.name for c in catalog.configs_for("N2u")] == ["bf16-graph-ungate"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('name = "big size"\nargs = ["--tokens", "2048"]', "name: letters, digits, '-' or '_'"),
        ('name = "2048"\nargs = []', "args: a non-empty list of strings, got []"),
        ('name = "2048"\nargs = ["--tokens"]\nsteps = 4', "unknown keys ['steps']"),
        ('name = "2048"\nargs = ["--tokens"]\nenv = { A = 1 }', "env: a table of strings"),
    ],
)
def test_a_malformed_exposure_table_is_named(tmp_path, table, message):
    text = AFDEP.read_text().replace(
        '[exposure]\nname = "2048"\nargs = ["--tokens", "2048", "--steps", "4", "--num-sms", "4"]\n'
        'env = { AFDEP_COUNT_FIRST_EPILOGUE_SMS = "32" }',
        f"[exposure]\n{table}",
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    assert str(error.value).startswith(f"{path}: exposure: {message}")


def run(config: str, verdict: str, markers: int, repeat: int = 0) -> RunResult:
    outcome = {"markers": {"M": markers, "P1": 5}}
    return RunResult("M", config, repeat, verdict, verdict == "KILLED", verdict, "d", {}, outcome)


def test_a_fault_killed_under_one_config_every_time_is_killed():
    fault = Fault("M", "t", "fail", ())
    results = [run("g", "SURVIVED", 8), run("g@2048", "KILLED", 9812)]
    summary = summarize_fault(fault, results)
    assert (summary.verdict, summary.ok, summary.kill_rate) == (Verdict.KILLED, True, 0.5)
    assert summary.reason == "KILLED; not killed under g"
    assert summary.markers == {"g": 8, "g@2048": 9812}


def test_repeats_of_one_config_that_disagree_are_flaky():
    fault = Fault("M", "t", "fail", ())
    results = [run("g", "KILLED", 8, 0), run("g", "SURVIVED", 8, 1), run("h", "SURVIVED", 3)]
    summary = summarize_fault(fault, results)
    assert (summary.verdict, summary.ok) == (Verdict.FLAKY, False)
    assert summary.reason == "killed in 1 of 3 runs" and summary.markers == {"g": 16, "h": 3}
