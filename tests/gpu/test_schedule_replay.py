"""A seeded schedule replayed on one GPU (`pytest -m gpu`, logical ranks):
a sweep runs the must-pass `P5s.pct` under one seed, and `replay` of its run
id applies the same schedule to the same tree and passes again
(docs/operators.md, "Seeded schedules and replay")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.faults_cli.main import main

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
COMMON = ["--root", str(REPO), "--rank-mode", "logical", "--no-generated"]


def test_a_swept_seed_replays_to_the_same_tree_and_verdict(tmp_path, capsys):
    sweep = [*COMMON, "--workdir", str(tmp_path / "w1"), "sweep", "--only", "P5s.pct"]
    sweep += ["--config", "bf16-graph", "--no-exposure", "--seeds", "1", "--seed-base", "3"]
    assert main([*sweep, "--results-dir", str(tmp_path / "out")]) == 0
    [report] = (tmp_path / "out").glob("sweep-*.json")
    [run] = json.loads(report.read_text())["results"]
    assert (run["fault"], run["seed"], run["verdict"]) == ("P5s.pct~s3", 3, "PASSED")
    capsys.readouterr()
    replay = [*COMMON, "--workdir", str(tmp_path / "w2"), "replay", "P5s.pct~s3@bf16-graph#0"]
    assert main([*replay, "--from", str(report)]) == 0
    text = capsys.readouterr().out
    assert "| verdict | PASSED | PASSED | yes |" in text
    assert text.endswith("reproduced: the same schedule, the same tree, the same verdict\n")
