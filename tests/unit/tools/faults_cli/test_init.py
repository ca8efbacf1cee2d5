"""`afdep-faults init`: the starter printed or written, never over a file,
and bad input refused in one line naming it (exit 2)."""

from __future__ import annotations

import tomllib

import pytest

from tests.unit.faults.init.tree import write_tree
from tests.unit.tools.faults_cli.test_bad_inputs import PROG, faults


def test_init_prints_the_starter_of_the_tree(tmp_path):
    sources = write_tree(tmp_path)
    given = "release.gpu=st_flag_release"
    done = faults("init", str(sources), "--name", "demo", "--spelling", given)
    assert done.returncode == 0, done.stderr
    target = tomllib.loads(done.stdout)["target"]
    assert target["name"] == "demo"
    assert target["contract"]["release"] == {"gpu": "st_flag_release"}
    assert [s["name"] for s in target["site"]] == [
        "kernels.producer.store",
        "kernels.producer.release",
        "kernels.consumer.wait",
        "legacy.legacy_wait.wait",
    ]
    assert target["site"][1]["scope"] == "gpu"


def test_init_out_writes_the_catalog_and_harness_and_never_overwrites(tmp_path):
    sources, out = write_tree(tmp_path), tmp_path / "onboard"
    done = faults("init", str(sources), "--name", "demo", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["demo.toml", "harness.cu"]
    assert tomllib.loads((out / "demo.toml").read_text())["target"]["name"] == "demo"
    again = faults("init", str(sources), "--name", "demo", "--out", str(out))
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"{PROG}: error: init: {out / 'demo.toml'}: exists; init never overwrites a file"
    )


@pytest.mark.parametrize(
    ("words", "line"),
    [
        (["init", "nope"], f"{PROG}: error: init: nope: no such file or directory"),
        (["init", "docs"], f"{PROG}: error: init: docs: no source file under it"),
        (
            ["init", "afdep/csrc", "--spelling", "relase.sys=x"],
            f"{PROG} init: error: argument --spelling: 'relase.sys' is not a contract key; "
            "nearest: release.sys, release.gpu, release.cta; 14 in all (docs/synchronization.md)",
        ),
        (
            ["init", "afdep/csrc", "--spelling", "store=("],
            f"{PROG} init: error: argument --spelling: store: '(' is not a regular expression: "
            "missing ), unterminated subpattern at position 2",
        ),
        (
            ["init", "afdep/csrc", "--spelling", "store"],
            f"{PROG} init: error: argument --spelling: KEY=REGEX, got 'store'",
        ),
        (
            ["init", "afdep/csrc", "--name", "My-Target"],
            f"{PROG}: error: init: --name 'My-Target': a lower_case name (a-z, 0-9, _)",
        ),
    ],
)
def test_bad_input_is_one_line_naming_it(words, line):
    done = faults(*words)
    assert (done.returncode, done.stderr.strip(), done.stdout) == (2, line, "")


def test_init_out_that_is_a_file_is_refused_in_one_line(tmp_path):
    sources, out = write_tree(tmp_path), tmp_path / "onboard"
    out.write_text("a file\n")
    done = faults("init", str(sources), "--out", str(out))
    assert (done.returncode, done.stderr.strip(), done.stdout) == (
        2,
        f"{PROG}: error: init: --out {out}: exists and is not a folder",
        "",
    )
    assert out.read_text() == "a file\n"
