"""faults.report.compare: shards of a side merged, disagreements first, and
reports that cannot be compared refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.report.compare import markdown, read_notes, read_side
from hostio import UsageError


def report(path: Path, machine: str, mode: str, **verdicts: str) -> Path:
    faults = [{"fault": f.replace("_", "."), "verdict": v} for f, v in verdicts.items()]
    document = {"machine": machine, "rank_mode": mode, "native_source_sha256": "ab" * 32}
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
    assert markdown(left, right).splitlines()[4:] == [
        "- 2 faults on both sides, 1 disagree; 1 only left, 0 only right; "
        "1 disagreement unexplained",
        "",
        "| fault | 1xH200, logical | 2xH200, per-gpu | why they differ |",
        "|---|---|---|---|",
        "| **m.a** | **SURVIVED** | **KILLED** | **unexplained** |",
        "| m.b | KILLED | KILLED | |",
    ]


def test_what_cannot_be_compared_is_one_line(tmp_path):
    one = report(tmp_path / "a.json", "1xH200", "logical", m_a="KILLED")
    other = report(tmp_path / "b.json", "2xH200", "per-gpu", m_b="KILLED")
    with pytest.raises(UsageError, match=r"^--left: reports of different machines or modes: "):
        read_side([one, other], "--left")
    with pytest.raises(UsageError, match=r"a\.json: fault m\.a is in two shards$"):
        read_side([one, one], "--left")
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(UsageError, match=r"^--right .*junk\.json: not a sweep report"):
        read_side([tmp_path / "junk.json"], "--right")


def test_notes_explain_each_disagreement_and_a_stale_note_is_refused(tmp_path):
    left = read_side([report(tmp_path / "a.json", "1xH200", "logical", m_a="SURVIVED")], "--left")
    right = read_side([report(tmp_path / "b.json", "2xH200", "per-gpu", m_a="KILLED")], "--right")
    notes = tmp_path / "notes.toml"
    notes.write_text('[why]\n"m.a" = "the window needs NVLink latency"\n')
    text = markdown(left, right, read_notes(notes, left, right)).splitlines()
    assert text[4].endswith("; 0 disagreements unexplained")
    assert text[-1] == "| **m.a** | **SURVIVED** | **KILLED** | the window needs NVLink latency |"
    notes.write_text('[why]\n"m.a" = "x"\n"m.b" = "y"\n')
    with pytest.raises(
        UsageError, match=r"notes\.toml: m\.b does not disagree here: its note is stale$"
    ):
        read_notes(notes, left, right)
    notes.write_text("[why]\nm = 1\n")
    with pytest.raises(UsageError, match=r"notes\.toml: \[why\] must map fault ids to texts$"):
        read_notes(notes, left, right)
