"""[target.knobs] (faults/catalog/knobs.py): the table checked on load, and
the target's check asked only when one of its knobs is set."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from faults.catalog import CatalogError
from faults.catalog.knobs import knob_problem, knobs_table
from faults.catalog.model import Knobs

HERE = Path("catalog.toml")
# A check that refuses any knob but X_GOOD, naming it as a target's check does.
CHECK = (
    "{python}",
    "-c",
    "import os, sys; bad = [k for k in os.environ if k.startswith('X_') and k != 'X_GOOD']; "
    "bad and sys.exit('unknown knob ' + bad[0])",
)


def test_the_table_is_a_prefix_and_a_command():
    knobs = knobs_table(HERE, {"prefix": "X_", "check": list(CHECK)})
    assert knobs == Knobs("X_", CHECK)
    assert knobs_table(HERE, None) is None


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"prefix": "X_"}, "a table with two keys, prefix and check"),
        ({"prefix": "", "check": ["true"]}, "prefix: the start of every knob's name"),
        ({"prefix": "X_", "check": []}, "check: at least the program to start"),
        ({"prefix": "X_", "check": ["{out}"]}, "check: unknown placeholder {out}"),
    ],
)
def test_a_bad_table_is_named(raw, message):
    with pytest.raises(CatalogError) as error:
        knobs_table(HERE, raw)
    assert "target.knobs" in str(error.value) and message in str(error.value)


def test_the_check_says_which_knob_and_runs_only_when_one_is_set(tmp_path):
    knobs = Knobs("X_", CHECK)
    assert knob_problem(knobs, tmp_path, {"X_GOOD": "1"}) is None
    assert knob_problem(knobs, tmp_path, {"X_GODO": "1"}) == "unknown knob X_GODO"
    missing = Knobs("X_", (str(tmp_path / "no-such-check"),))
    assert knob_problem(missing, tmp_path, {}) is None  # none set: nothing started
    assert "cannot start" in knob_problem(missing, tmp_path, {"X_GOOD": "1"})
    silent = Knobs("X_", (sys.executable, "-c", "raise SystemExit(3)"))
    assert knob_problem(silent, tmp_path, {"X_GOOD": "1"}) == (
        "[target.knobs] check: exit 3, no reason said"
    )
