"""A sweep that could run nothing (no GPU for its target): its report's `ok`
is what its exit status says (every tree built as it should), and its JUnit
has a case per tree it built, not `tests="0"` (issue 51's doors)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from faults.report.document import SweepReport
from faults.report.markdown import junit

BUILT = {"fault": "P1", "state": "built", "ok": True, "reason": ""}
BROKEN = {"fault": "gen.x", "state": "BUILD ERROR", "ok": False, "reason": "error: no such name"}


def test_a_built_only_report_is_ok_when_every_tree_built_as_it_should():
    assert SweepReport(runnable=False, harness_ok=False, built=[BUILT]).ok is True
    assert SweepReport(runnable=False, harness_ok=False, built=[BUILT, BROKEN]).ok is False
    assert SweepReport(runnable=False, harness_ok=False, built=[]).ok is False  # built nothing
    assert SweepReport(runnable=False, built=[BUILT]).to_json()["ok"] is True


def test_a_built_only_junit_has_a_case_per_tree():
    document = {"catalog": "c.toml", "controls": [], "results": [], "built": [BUILT, BROKEN]}
    suite = ET.fromstring(junit(document))
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = [(c.get("classname"), c.get("name"), c.find("failure")) for c in suite]
    assert [(name, kind) for name, kind, _ in cases] == [("P1", "built"), ("gen.x", "built")]
    assert cases[0][2] is None
    assert (cases[1][2].get("message"), cases[1][2].text) == ("BUILD ERROR", "error: no such name")
