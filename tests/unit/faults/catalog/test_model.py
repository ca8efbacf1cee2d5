"""Catalog loading, the types of every table, array element and key, and the
placeholders of the target's commands: each a one-line CatalogError naming
the file, the table and the key, never an AttributeError or a TypeError."""

from __future__ import annotations

import pytest

from faults.catalog import load_catalog
from tests.unit.faults.catalog.test_load import FAULT, LOG, TARGET, error_of

BASE = TARGET + LOG + FAULT
SOURCES = 'sources = "tests/fixtures/flag_payload"'
RUN = 'run = ["true"]'
KNOWN = "known: {tree}, {out}, {python}, {digest}, {gpus}, {ranks}"


def fault(*lines: str, expect: str = "fail") -> str:
    """A catalog whose one fault A has `lines`."""
    return TARGET + LOG + f'[[fault]]\nid = "A"\nexpect = "{expect}"\n' + "\n".join(lines) + "\n"


SKIP = 'patches = [{ site = "fx.consumer.check", action = "skip" }]'


TYPE_CASES = [
    # top-level tables and arrays of tables
    ("control = 1\n" + BASE, "top level: control must be a table, got 1"),
    ("config = [1]\n" + BASE, "top level: config #0 must be a table, got 1"),
    ("generate = 1\n" + BASE, "top level: generate must be a table, got 1"),
    ("fault = [1]\n" + TARGET + LOG, "top level: fault #0 must be a table, got 1"),
    ("fault = 1\n" + TARGET + LOG, "top level: fault must be an array of tables, got 1"),
    # [target]
    (
        TARGET.replace(SOURCES, "sources = 1") + LOG + FAULT,
        "target: sources must be a string, got 1",
    ),
    (
        TARGET.replace('name = "t"', "name = []") + LOG + FAULT,
        "target: name must be a string, got []",
    ),
    (TARGET + "rank = 0\n" + LOG + FAULT, "target: rank must be a string, got 0"),
    (TARGET + 'env = "x"\n' + LOG + FAULT, "target: env must be a table of strings, got 'x'"),
    (
        TARGET + "env = { A = 1 }\n" + LOG + FAULT,
        "target: env must be a table of strings, got {'A': 1}",
    ),
    # [[config]]
    (
        BASE + '[[config]]\nname = "c"\nenv = "x"\n',
        "config c: env must be a table of strings, got 'x'",
    ),
    (BASE + "[[config]]\nname = 1\n", "config #0: name must be a string, got 1"),
    (
        BASE + '[[config]]\nname = "c"\nargs = ["-n", 2]\n',
        "config c: args must be a list of strings, got ['-n', 2]",
    ),
    # [control]
    (BASE + "[control]\npatches = 1\n", "control: patches must be an array of tables, got 1"),
    (BASE + "[control]\npatches = [1]\n", "control: patches #0 must be a table, got 1"),
    (
        BASE + '[control]\npatch = [{ file = "main.cpp", old = "a", new = "b" }]\n',
        "control: unknown keys ['patch']",
    ),
    # [[fault]]
    (fault("patches = 5"), "fault A: patches must be an array of tables, got 5"),
    (fault("patches = [5]"), "fault A: patches #0 must be a table, got 5"),
    (
        fault('includes = [["D1"]]'),
        "fault A: includes must be a list of fault ids, got [['D1']]",
    ),
    (fault("title = 3", SKIP), "fault A: title must be a string, got 3"),
    (fault("survivor_ok = 1", SKIP), "fault A: survivor_ok must be a string, got 1"),
    (
        fault("configs = [1]", SKIP),
        "fault A: configs must be a list of config names, got [1]",
    ),
    # patches
    (
        fault('patches = [{ site = 1, action = "skip" }]'),
        "fault A patch #0: site must be a string, got 1",
    ),
    (
        fault('patches = [{ site = "fx.consumer.check", action = [] }]'),
        "fault A patch #0: action: [] is not one of ['delay', 'hold', 'signal', 'skip']",
    ),
    (
        fault('patches = [{ file = 1, old = "a", new = "b" }]'),
        "fault A patch #0: file must be a string, got 1",
    ),
    # [generate]
    (BASE + "[generate]\nwhen = 3\n", "generate: when: must be a non-empty C condition"),
    (BASE + '[generate]\nmarker = " "\n', "generate: marker: must be a non-empty C condition"),
]


@pytest.mark.parametrize("document, message", TYPE_CASES, ids=[m for _, m in TYPE_CASES])
def test_every_table_element_and_key_has_its_type_checked(tmp_path, document, message):
    path = tmp_path / "catalog.toml"
    path.write_text(document)
    assert error_of(lambda: load_catalog(path)) == f"{path}: {message}"


PLACEHOLDER_CASES = [
    (
        TARGET.replace(RUN, 'run = ["x", "{nope}"]') + LOG + FAULT,
        f"target: run: unknown placeholder {{nope}} in '{{nope}}'; {KNOWN}",
    ),
    (
        TARGET + 'build = ["cc", "-o", "{out}/{bin}"]\n' + LOG + FAULT,
        f"target: build: unknown placeholder {{bin}} in '{{out}}/{{bin}}'; {KNOWN}",
    ),
    (
        TARGET.replace(RUN, 'run = ["{tree.name}"]') + LOG + FAULT,
        f"target: run: unknown placeholder {{tree.name}} in '{{tree.name}}'; {KNOWN}",
    ),
    (
        TARGET.replace(RUN, 'run = ["{out:{width}}"]') + LOG + FAULT,
        f"target: run: unknown placeholder {{width}} in '{{out:{{width}}}}'; {KNOWN}",
    ),
    (
        BASE + '[[config]]\nname = "c"\nargs = ["--n={}"]\n',
        f"config c: args: unknown placeholder {{}} in '--n={{}}'; {KNOWN}",
    ),
    (
        TARGET.replace(RUN, 'run = ["{tree"]') + LOG + FAULT,
        "target: run: cannot fill in '{tree': expected '}' before end of string",
    ),
    (
        TARGET.replace(RUN, 'run = ["{tree!x}"]') + LOG + FAULT,
        "target: run: cannot fill in '{tree!x}': Unknown conversion specifier x",
    ),
    (
        TARGET.replace(RUN, 'run = ["{gpus:d}"]') + LOG + FAULT,
        "target: run: cannot fill in '{gpus:d}': Unknown format code 'd' for object of type 'str'",
    ),
]


@pytest.mark.parametrize(
    "document, message", PLACEHOLDER_CASES, ids=[m for _, m in PLACEHOLDER_CASES]
)
def test_command_placeholders_are_checked_at_load(tmp_path, document, message):
    """Every `{name}` of the build and run words and a config's args is one
    faults/pipeline/run.py fills in: a wrong one fails the load, not a run after the build."""
    path = tmp_path / "catalog.toml"
    path.write_text(document)
    assert error_of(lambda: load_catalog(path)) == f"{path}: {message}"


def test_every_known_placeholder_and_a_literal_brace_load(tmp_path):
    path = tmp_path / "catalog.toml"
    words = '["{python}", "{tree}/{out}", "{digest}", "-n{gpus}", "{{literal}}"]'
    path.write_text(TARGET.replace(RUN, f"run = {words}") + LOG + FAULT)
    run = load_catalog(path).target.run
    assert run == ("{python}", "{tree}/{out}", "{digest}", "-n{gpus}", "{{literal}}")
