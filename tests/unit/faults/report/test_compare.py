"""faults.report.compare: shards of a side merged, disagreements first, and
reports that cannot be compared refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.report.compare import CompareError, markdown, read_notes, read_side, rows
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]


def report(
    path: Path, machine: str, mode: str, runs=(), catalog="afdep.toml", **verdicts: str
) -> Path:
    """A sweep report: its faults' verdicts, and `runs` as (fault, config,
    verdict) rows of its results."""
    faults = [
        {"fault": f.replace("_", "."), "expect": "fail", "verdict": v, "ok": v == "KILLED"}
        | {"runs": 0, "fired": 0, "killed": 0, "kill_rate": None, "repeats_for_99": None}
        | {"reason": ""}
        for f, v in verdicts.items()
    ]
    results = [
        {"fault": f, "config": c, "repeat": 0, "verdict": v, "ok": v == "KILLED", "reason": ""}
        | {"tree_digest": "t", "seconds": {}, "outcome": None}
        for f, c, v in runs
    ]
    document = {"machine": machine, "rank_mode": mode, "native_source_sha256": "ab" * 32}
    document |= {"catalog": f"/somewhere/{catalog}", "results": results}
    path.write_text(json.dumps({**document, "faults": faults}))
    return path


def test_shards_merge_and_disagreements_come_first(tmp_path):
    left = read_side(
        [
            report(tmp_path / "a.json", "1xH200", "logical", m_a="SURVIVED"),
            report(tmp_path / "b.json", "1xH200", "logical", m_b="KILLED", m_c="PASSED"),
        ],
        "--left",
    )
    right = read_side(
        [report(tmp_path / "c.json", "2xH200", "per-gpu", m_a="KILLED", m_b="KILLED")], "--right"
    )
    assert markdown(left, right, rows(left, right)).splitlines()[4:] == [
        "- 2 faults on both sides, 1 disagree; 1 only left, 0 only right; "
        "1 disagreement unexplained",
        "- each verdict is over the configs both sides ran; runs beyond those are listed last",
        "",
        "| fault | 1xH200, logical | 2xH200, per-gpu | why they differ | runs on one side only |",
        "|---|---|---|---|---|",
        "| **m.a** | **SURVIVED** | **KILLED** | **unexplained** |  |",
        "| m.b | KILLED | KILLED | |  |",
        "| m.c | PASSED | not run | |  |",
    ]


def test_what_cannot_be_compared_is_one_line(tmp_path):
    one = report(tmp_path / "a.json", "1xH200", "logical", m_a="KILLED")
    other = report(tmp_path / "b.json", "2xH200", "per-gpu", m_b="KILLED")
    with pytest.raises(CompareError, match=r"^--left: reports of different machines or modes: "):
        read_side([one, other], "--left")
    with pytest.raises(CompareError, match=r"a\.json: fault m\.a is in two shards$"):
        read_side([one, one], "--left")
    with pytest.raises(CompareError, match=r"a shard records none of its runs$"):
        read_side([one, one], "--left", lambda fault, runs: "KILLED")
    asym = report(tmp_path / "c.json", "1xH200", "logical", catalog="asym.toml", m_c="KILLED")
    with pytest.raises(CompareError, match=r"^--left: reports of different catalogs: "):
        read_side([one, asym], "--left")
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(CompareError, match=r"^--right .*junk\.json: not a sweep report"):
        read_side([tmp_path / "junk.json"], "--right")


def test_notes_explain_each_disagreement_and_a_stale_note_is_refused(tmp_path):
    left = read_side([report(tmp_path / "a.json", "1xH200", "logical", m_a="SURVIVED")], "--left")
    right = read_side([report(tmp_path / "b.json", "2xH200", "per-gpu", m_a="KILLED")], "--right")
    notes = tmp_path / "notes.toml"
    notes.write_text('[why]\n"m.a" = "the window needs NVLink latency"\n')
    compared = rows(left, right)
    text = markdown(left, right, compared, read_notes(notes, compared)).splitlines()
    assert text[4].endswith("; 0 disagreements unexplained")
    assert (
        text[-1] == "| **m.a** | **SURVIVED** | **KILLED** | the window needs NVLink latency |  |"
    )
    notes.write_text('[why]\n"m.a" = "x"\n"m.b" = "y"\n')
    with pytest.raises(
        CompareError, match=r"notes\.toml: m\.b does not disagree here: its note is stale$"
    ):
        read_notes(notes, compared)
    notes.write_text("[why]\nm = 1\n")
    with pytest.raises(CompareError, match=r"notes\.toml: \[why\] must map fault ids to texts$"):
        read_notes(notes, compared)


def test_a_fault_in_two_shards_is_judged_again_over_all_its_runs(tmp_path, capsys):
    """N2 clean under the eager configs (one shard) and killed under a 2048-
    token real-size config (another): over both it is KILLED, as one sweep would say, not
    the verdict of whichever shard came last."""
    small = [("N2", "bf16-eager", "UNOBSERVABLE"), ("N2", "bf16-graph", "UNOBSERVABLE")]
    shards = [
        report(tmp_path / "a.json", "1xH200", "logical", runs=small, N2="UNOBSERVABLE"),
        report(
            tmp_path / "b.json",
            "1xH200",
            "logical",
            runs=[("N2", "bf16-graph@2048", "KILLED")],
            N2="KILLED",
        ),
        report(
            tmp_path / "c.json",
            "1xH200",
            "logical",
            runs=[("P1", "bf16-eager", "PASSED")],
            P1="PASSED",
        ),
    ]
    right = report(tmp_path / "r.json", "2xH200", "per-gpu", N2="KILLED", P1="PASSED")
    top = ["--root", str(REPO), "--no-generated"]
    assert main([*top, "compare", "--left", *map(str, shards), "--right", str(right)]) == 0
    out = capsys.readouterr().out
    assert "| N2 | KILLED | KILLED | |" in out and "0 disagree" in out
    twice = report(tmp_path / "d.json", "1xH200", "logical", runs=small[:1], N2="SURVIVED")
    assert main([*top, "compare", "--left", str(shards[0]), str(twice), "--right", str(right)]) == 2
    assert capsys.readouterr().err.endswith(
        "d.json: N2 under bf16-eager (repeat 0) is in two shards\n"
    )


def test_a_side_with_more_configs_is_judged_over_the_configs_both_ran(tmp_path):
    """A fault killed only by a real-size config that one side ran agrees with
    the other side's survivor over the small config both ran; the real-size config's
    verdict is listed beside it, not hidden and not compared."""
    killed_if_any = lambda fault, runs: (  # noqa: E731 - the sweep's rule, in short
        "KILLED" if any(r["verdict"] == "KILLED" for r in runs) else runs[0]["verdict"]
    )
    # m.c: the two sides ran it under different configs, so nothing is alike.
    runs = [("m.a", "bf16-graph", "SURVIVED"), ("m.a", "bf16-graph@2048", "KILLED")]
    runs.append(("m.c", "bf16-graph@2048", "KILLED"))
    small = [("m.a", "bf16-graph", "SURVIVED"), ("m.b", "bf16-eager", "KILLED")]
    small.append(("m.c", "bf16-eager", "SURVIVED"))
    verdicts = {"m_a": "KILLED", "m_c": "KILLED"}
    left = read_side(
        [report(tmp_path / "a.json", "1xH200", "logical", runs=runs, **verdicts)],
        "--left",
        killed_if_any,
    )
    verdicts = {"m_a": "SURVIVED", "m_b": "KILLED", "m_c": "SURVIVED"}
    right = read_side(
        [report(tmp_path / "b.json", "2xH200", "per-gpu", runs=small, **verdicts)],
        "--right",
        killed_if_any,
    )
    compared = rows(left, right, killed_if_any)
    assert [(r.fault, r.left, r.right, r.beyond, r.differs) for r in compared] == [
        ("m.c", "KILLED", "SURVIVED", "no config in common", True),
        ("m.a", "SURVIVED", "SURVIVED", "left: bf16-graph@2048 KILLED", False),
        ("m.b", "not run", "KILLED", "", False),
    ]
    assert (
        markdown(left, right, compared)
        .splitlines()[4]
        .startswith("- 2 faults on both sides, 1 disagree; 0 only left, 1 only right;")
    )


def test_a_notes_file_that_is_not_utf8_is_one_error_naming_it(tmp_path):
    notes = tmp_path / "notes.toml"
    notes.write_bytes(b"[why]\n\xff\xfe = 1\n")
    with pytest.raises(CompareError, match=r"^--notes .*notes\.toml: .*codec can't decode"):
        read_notes(notes, [])
