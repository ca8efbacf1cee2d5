"""A target whose harness is its own test (docs/targets.md, "Their tests as
the harness"), on the CPU fixture tests/fixtures/own_test: the engine runs
the ring library's own unittest, pointed at each scratch tree, with no build
and no harness of ours; the tree says its digest through [target.identity].
The controls and faults are judged as any harness's; a test pointed at
another copy of the headers, or a tree that says no digest, is WRONG TREE and
nothing is judged."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
CATALOG = REPO / "tests/fixtures/own_test/catalog.toml"
POINTED = "RING_INCLUDE={tree}/tests/fixtures/own_test"


def sweep(tmp_path: Path, catalog: Path) -> tuple[int, dict]:
    top = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
    status = main([*top, "--workdir", str(tmp_path / "work"), "sweep",
                   "--results-dir", str(tmp_path / "results")])  # fmt: skip
    [report] = (tmp_path / "results").glob("sweep-*.json")
    return status, json.loads(report.read_text())


def verdicts(rows: list[dict]) -> dict[str, str]:
    return {row["fault"]: row["verdict"] for row in rows}


def test_the_libraries_own_test_judges_the_controls_and_faults_of_each_tree(tmp_path):
    status, document = sweep(tmp_path, CATALOG)
    assert status == 0
    assert verdicts(document["controls"]) == {
        "control.clean": "PASSED", "control.forced_fail": "KILLED"}  # fmt: skip
    assert verdicts(document["results"]) == {"D1": "PASSED", "S1": "KILLED"}
    assert (REPO / "tests/fixtures/own_test/ring/ring.h").read_text().count("AFDFAULT") == 0


def catalog_with(tmp_path: Path, old: str, new: str) -> Path:
    text = CATALOG.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "catalog.toml"
    path.write_text(text.replace(old, new))
    return path


def test_a_test_pointed_at_the_users_headers_is_wrong_tree_and_nothing_is_judged(tmp_path):
    pointed = POINTED.replace("{tree}", str(REPO))
    status, document = sweep(tmp_path, catalog_with(tmp_path, POINTED, pointed))
    assert status == 1 and not document["harness_ok"]
    assert verdicts(document["controls"])["control.clean"] == "WRONG TREE"
    assert document["results"] == []


def test_a_tree_that_says_no_digest_is_wrong_tree(tmp_path):
    text = CATALOG.read_text()
    table = re.search(r"\[target\.identity\]\n(?:.+\n)+", text)[0]
    status, document = sweep(tmp_path, catalog_with(tmp_path, table, ""))
    assert status == 1 and not document["harness_ok"]
    assert verdicts(document["controls"])["control.clean"] == "WRONG TREE"
