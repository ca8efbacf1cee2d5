"""Every catalog fault under every config (`pytest -m faults`): applied and
built always; run and judged when the hardware its target needs is present.
The cases and the `engines` fixture come from faults.pytest_plugin.

The CPU fixture's faults are engine tests with known verdicts, N1 (a `when`
that is never true) included; a real catalog's faults must meet their
expectation (a must-pass PASSED, a must-fail KILLED or a known survivor)."""

from __future__ import annotations

import pytest

from faults.catalog.project import project_catalogs
from faults.pytest_plugin import RESULT_PROPERTY, enough_gpus
from faults.report.document import summary_line

pytestmark = pytest.mark.faults

FIXTURE_VERDICTS = {"D1": "PASSED", "S1": "KILLED", "S2": "SURVIVED", "N1": "NOT FIRED"}


def test_fault(catalog_case, engines, pytestconfig, record_property):
    engine = engines(catalog_case.path)
    catalog = engine.catalog
    config = catalog.config(catalog_case.config_name)
    needed = catalog.gpus_for(config)
    if not enough_gpus(needed):
        prepared = engine.prepare(catalog_case.fault_id, catalog_case.fault_id)
        assert prepared.error is None, prepared.error.reason
        pytest.skip(f"applied and built; running needs {needed} GPUs")
    repeats = pytestconfig.getoption("--faults-repeat", 1)
    results = engine.evaluate(catalog_case.fault_id, [config], repeats)
    assert results, f"no run of {catalog_case.fault_id} under {config.name}"
    for result in results:  # every run's line, before any assertion stops the test
        record_property(RESULT_PROPERTY, summary_line(result))
    for result in results:
        assert result.tree_digest and result.outcome is not None, result.reason
        assert result.outcome["digests"] == [result.tree_digest]
        if catalog.target.name == "flag_payload":
            assert result.verdict == FIXTURE_VERDICTS[catalog_case.fault_id], result.reason
        else:
            assert result.ok, f"{result.verdict}: {result.reason}"


def test_an_engine_checks_erasure_only_where_its_catalog_runs(engines, pytestconfig):
    """A case that cannot run here applies and builds only: the erasure check
    (it decides whether a fault is worth running) is not made for it."""
    for path in project_catalogs(pytestconfig.rootpath):
        engine = engines(path)
        catalog = engine.catalog
        runs_here = any(enough_gpus(catalog.gpus_for(c)) for c in catalog.configs)
        declared = bool(catalog.target.sass)
        assert (engine.erased is not None) == (declared and runs_here), catalog.target.name
