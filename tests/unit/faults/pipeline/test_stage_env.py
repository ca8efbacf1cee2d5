"""A stage's environment (faults/pipeline/run.py): the scratch tree first on
PYTHONPATH, nothing from the current folder, and its Python's bytecode kept
in one writable cache unless the caller says where."""

from __future__ import annotations

from pathlib import Path

from faults.catalog import load_catalog
from faults.pipeline.run import stage_env

CATALOG = Path(__file__).parents[4] / "tests/fixtures/flag_payload/catalog.toml"


def test_a_stage_runs_its_tree_with_bytecode_in_the_faults_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env = stage_env(load_catalog(CATALOG).target, tmp_path / "tree")
    assert (env["PYTHONPATH"], env["PYTHONSAFEPATH"]) == (str(tmp_path / "tree"), "1")
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache/faults/pycache")


def test_the_callers_bytecode_place_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    env = stage_env(load_catalog(CATALOG).target, tmp_path / "tree")
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "mine")
