"""The CPU fixture's sweeps, each run once a session: the tests that edit,
rejudge or merge reports take a copy of one, so only its reading is tested
again, not the sweep that wrote it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]


@pytest.fixture(scope="session")
def _sweeps(tmp_path_factory) -> tuple[dict, Path]:
    return {}, tmp_path_factory.mktemp("sweeps")


@pytest.fixture
def swept(_sweeps):
    """swept(tmp_path, catalog, *words, out="out"): a copy under tmp_path/out of the
    report of a sweep of `catalog` on the fixture (run the first time it is asked)."""
    done, root = _sweeps

    def copy(tmp_path: Path, catalog: Path, *words: str, out: str = "out") -> Path:
        key = (str(catalog), catalog.read_text(), words)
        if key not in done:
            folder = root / f"sweep{len(done)}"
            common = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
            sweep = [*common, "--workdir", str(folder / "work"), "sweep", *words]
            assert main([*sweep, "--results-dir", str(folder / "out")]) == 0
            done[key] = folder / "out"
        shutil.copytree(done[key], tmp_path / out)
        [report] = (tmp_path / out).glob("sweep-*.json")
        return report

    return copy
