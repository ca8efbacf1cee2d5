"""`afdep-faults shrink` on the CPU fixture, end to end (real trees, builds
and runs), its reports, rerun command and regression test, and every bad
input as one line (docs/operators.md, "Shrinking")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import faults.shrink.report
from faults.catalog import load_catalog
from faults.shrink.plan import shrink_catalog
from faults.shrink.report import ShrinkContext, paste_command, regression_case
from hostio import RankMode
from tests.regress import test_shrunk
from tools.faults_cli.main import main
from tools.faults_cli.steps import program

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
AFDEP = REPO / "catalogs/afdep.toml"
TABLE = """
[shrink]
dimensions = [
  { name = "tokens", arg = "--tokens", start = 8, min = 1 },
  { name = "width", arg = "--width", values = [4, 2] },
]
constraints = ["width <= tokens"]
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """The fixture's catalog with a [shrink] table (its program ignores the
    arguments, so S1 is killed at every input and each ladder goes down)."""
    path = tmp_path / "catalog.toml"
    path.write_text(FIXTURE.read_text() + TABLE)
    return path


def shrink(catalog: Path, tmp_path: Path, *args: str) -> int:
    top = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
    return main([*top, "--workdir", str(tmp_path / "work"), "shrink", *args])


def test_a_killed_fault_shrinks_to_its_minimal_input_and_writes_its_case(
    catalog, tmp_path, capsys, monkeypatch
):
    written = tmp_path / "tests/regress/shrunk/S1.json"
    monkeypatch.setattr(faults.shrink.report, "regression_case_path", lambda root, f: written)
    status = shrink(catalog, tmp_path, "S1", "--results-dir", str(tmp_path), "--write-test")
    assert status == 0
    doc = json.loads((tmp_path / "shrink-S1-cpu.json").read_text())
    assert (doc["start"], doc["minimal"]) == ({"tokens": 8, "width": 4}, {"tokens": 2, "width": 2})
    assert [(p["args"], p["verdicts"]) for p in doc["probes"]] == [
        (["--tokens", "8", "--width", "4"], ["KILLED"]),
        (["--tokens", "4", "--width", "4"], ["KILLED"]),
        (["--tokens", "4", "--width", "2"], ["KILLED"]),
        (["--tokens", "2", "--width", "2"], ["KILLED"]),
    ]
    assert doc["start_killed"] and doc["finished"] and not doc["budget_spent"]
    assert doc["command"].endswith(
        " && env PYTHONPATH=. shrunk-out/flag_payload --tokens 2 --width 2"
    )
    markdown = (tmp_path / "shrink-S1-cpu.md").read_text()
    assert "Smaller than the start: tokens 8 -> 2, width 4 -> 2." in markdown
    assert f"regression case: {written} (tests/regress/test_shrunk.py runs it)" in (
        capsys.readouterr().out
    )
    case = json.loads(written.read_text())
    assert case == {
        "fault": "S1",
        "config": "default",
        "rank_mode": "per-gpu",
        "machine": "cpu",
        "catalog": str(catalog),
        "gpus": 0,
        "args": ["--tokens", "2", "--width", "2"],
    }
    # The case, run by the one regression test with the repository as its root, is killed.
    [param] = test_shrunk.case_params(written.parent)
    assert (param.id, param.marks) == ("S1", [])
    test_shrunk.test_the_fault_stays_killed_at_its_shrunk_input(case, tmp_path / "regress")


def test_the_rerun_command_reproduces_the_kill_by_hand(catalog, tmp_path):
    assert shrink(catalog, tmp_path, "S1", "--results-dir", str(tmp_path)) == 0
    command = json.loads((tmp_path / "shrink-S1-cpu.json").read_text())["command"]
    command = command.replace("/tmp/shrunk-S1", str(tmp_path / "rerun"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    ran = subprocess.run(
        ["bash", "-c", command.replace("python -m faults", f"{sys.executable} -m faults")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 1, ran.stderr  # the fixture exits 1 on a mismatch
    assert "Mismatched payload" in ran.stdout


def test_afdeps_rerun_command_fills_every_placeholder():
    catalog = shrink_catalog(load_catalog(AFDEP).in_rank_mode(RankMode.LOGICAL))
    config = catalog.config("bf16-graph@2048")
    context = ShrinkContext("N2", config.name, "logical", "1xH200", "catalogs/afdep.toml", 9, 1, 1)
    command = paste_command("afdep-faults", context, catalog, config, ["--tokens", "64"], "d" * 8)
    python = sys.executable
    assert command == (
        "afdep-faults --catalog catalogs/afdep.toml apply N2 --out /tmp/shrunk-N2 && "
        "cd /tmp/shrunk-N2 && mkdir -p shrunk-out && env PYTHONPATH=. "
        f"AFDEP_COUNT_FIRST_MIN_BUCKET=1 AFDEP_TIMEOUT_MS=3000 {python} -m tools.build "
        "--hidden 2048 --payload bf16 fp8 --view expanded && env PYTHONPATH=. "
        "AFDEP_COUNT_FIRST_MIN_BUCKET=1 AFDEP_TIMEOUT_MS=3000 AFDEP_COUNT_FIRST_EPILOGUE_SMS=32 "
        f"{python} -m tools.driver --mode logical --ranks 2 --capacity 2048 "
        "--hidden-size 2048 --top-k 8 --num-experts 128 --num-sms 24 --tokens 8 128 512 "
        "--steps 2 --payload bf16 --graph --tokens 2048 --steps 4 --num-sms 4 --tokens 64"
    )


def test_a_gpu_case_is_collected_and_skips_on_a_machine_without_gpus(tmp_path):
    context = ShrinkContext(
        "gen.skip.cf.ffn_place.count_wait",
        "bf16-graph",
        "logical",
        "1xH200",
        "catalogs/afdep.toml",
        9,
        1,
        1,
    )
    regress = tmp_path / "tests/regress"
    (regress / "shrunk").mkdir(parents=True)
    shutil.copy(REPO / "tests/regress/test_shrunk.py", regress)
    case = regression_case(context, ["--tokens", "8", "--empty-prob", "0.0"])
    (regress / "shrunk/gen_skip_cf_ffn_place_count_wait.json").write_text(json.dumps(case))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(regress)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "needs 1 GPUs (found 0)" in ran.stdout and "1 skipped" in ran.stdout


BAD = [
    (
        ["S2"],
        "shrink: S2 is not KILLED at the start input under default (SURVIVED): nothing to shrink",
    ),
    (["D1"], "shrink: fault D1 is must-pass: only a must-fail fault that kills can shrink"),
    (["S1", "--config", "nope"], "{catalog}: no config 'nope'; known: ['default']"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_naming_it(catalog, tmp_path, capsys, args, message):
    assert shrink(catalog, tmp_path, *args) == 2
    assert capsys.readouterr().err == f"{program()}: error: {message.format(catalog=catalog)}\n"


def test_an_unknown_fault_is_named(catalog, tmp_path, capsys):
    assert shrink(catalog, tmp_path, "ZZ") == 2
    known = "D1, N1, S1, S2"
    assert (
        capsys.readouterr().err == f"{program()}: error: {catalog}: no fault 'ZZ'; known: {known}\n"
    )


def test_a_budget_of_no_time_is_refused(catalog, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        shrink(catalog, tmp_path, "S1", "--budget-s", "0")
    assert exit.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --budget-s: seconds above 0, got '0'\n"
    )


def test_a_catalog_without_a_shrink_table_or_a_start_is_refused(tmp_path, capsys):
    assert shrink(FIXTURE, tmp_path, "S1") == 2
    said = capsys.readouterr().err
    assert said == f"{program()}: error: shrink: {FIXTURE}: no [shrink] table to shrink by\n"
    startless = tmp_path / "startless.toml"
    startless.write_text(FIXTURE.read_text() + TABLE.replace("start = 8, ", ""))
    assert shrink(startless, tmp_path, "S1") == 2
    assert capsys.readouterr().err == (
        f"{program()}: error: shrink: dimension tokens: the run command gives no --tokens "
        "and the catalog's [shrink] no start\n"
    )


def test_a_malformed_shrink_table_is_named(tmp_path, capsys):
    broken = tmp_path / "broken.toml"
    broken.write_text(FIXTURE.read_text() + TABLE.replace("values = [4, 2]", "values = [2, 4]"))
    assert shrink(broken, tmp_path, "S1") == 2
    assert capsys.readouterr().err == (
        f"{program()}: error: {broken}: shrink.dimensions width: values: largest first, "
        "each smaller than the one before: [2, 4]\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["N2", "--config", "bf16-graph-ungate"],
            "shrink: fault N2 does not run under config bf16-graph-ungate; it runs under "
            "['bf16-eager', 'bf16-graph', 'fp8-eager', '4gpu-f1', '4gpu-f2', '4gpu-f3', "
            "'bf16-eager@2048', 'bf16-graph@2048', 'fp8-eager@2048', '4gpu-f1@2048', "
            "'4gpu-f2@2048', '4gpu-f3@2048']",
        ),
        (
            ["N2", "--config", "bf16-graph"],
            "shrink: config bf16-graph needs 2 GPUs, this machine has 0",
        ),
    ],
)
def test_afdeps_faults_are_refused_where_they_cannot_run(tmp_path, capsys, args, message):
    top = ["--catalog", str(AFDEP), "--root", str(REPO), "--rank-mode", "per-gpu"]
    assert main([*top, "shrink", *args]) == 2
    assert capsys.readouterr().err == f"{program()}: error: {message}\n"


def test_a_real_size_config_is_a_config_to_shrink_under(tmp_path, capsys):
    top = ["--catalog", str(AFDEP), "--root", str(REPO), "--rank-mode", "logical"]
    assert main([*top, "shrink", "N2", "--config", "bf16-graph@2048"]) == 2
    assert capsys.readouterr().err == (
        f"{program()}: error: shrink: config bf16-graph@2048 needs 1 GPUs, this machine has 0\n"
    )
