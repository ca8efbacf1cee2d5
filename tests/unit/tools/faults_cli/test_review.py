"""The progress lines of `afdep-faults review --run` and `sweep`
(tools/faults_cli/steps.py ProgressLines): each line led by the seconds
since the start, the units done of the total and the time left, with no
terminal attached (a log, CI) as with one; the review's on stderr, its
report alone on stdout."""

from __future__ import annotations

import re

import pytest

from faults.judge.verdict import Verdict
from faults.review.progress import Planned, Ran

pytest.importorskip("rich")  # the display's library: a dependency of the tools
LEAD = re.compile(
    r"^ *(?P<spent>[\d.]+) s  \[(?P<done>\d+)/(?P<total>\d+)(?:, ETA (?P<eta>\w+))?\]  "
)


def leads(text: str) -> list[tuple[str | None, ...]]:
    """(seconds, done, total, ETA or None, the line's own words) of each line."""
    rows = []
    for line in filter(None, text.splitlines()):
        lead = LEAD.match(line)
        assert lead, line
        rows.append((lead["spent"], lead["done"], lead["total"], lead["eta"], line[lead.end() :]))
    return rows


def test_the_review_says_each_event_with_its_count_and_eta_on_stderr(capsys):
    from tools.faults_cli.review import shown_progress

    ticks = iter([100.0, 100.5, 112.3])  # the start, then each event's time
    with shown_progress(clock=lambda: next(ticks)) as listener:
        listener(Planned("the change's tree: a", 2, 2, 0))
        listener(Ran("change", "control.clean", "a", Verdict.PASSED, 1, 2))
    out, err = capsys.readouterr()
    assert out == ""  # capsys is no terminal: no bar, and the lines say it all
    [planned, ran] = leads(err)
    assert planned[:4] == ("0.5", "0", "2", None) and "the change's tree: a" in planned[4]
    assert ran[:4] == ("12.3", "1", "2", "12s") and "control.clean" in ran[4]


def test_the_time_left_is_the_pace_so_far(capsys):
    from tools.faults_cli.steps import ProgressLines, duration

    ticks = iter([0.0, 1.0, 100.0, 7200.0])
    with ProgressLines("faults", 4, clock=lambda: next(ticks)) as progress:
        progress.say("before any")
        progress.advance()
        progress.say("one of four in 100 s")
        progress.count(3, 400)  # a total that grows as work is planned
        progress.say("three of 400 in two hours")
    [first, second, third] = leads(capsys.readouterr().out)
    assert first[1:4] == ("0", "4", None)
    assert second[1:4] == ("1", "4", duration(300)) == ("1", "4", "5m00s")
    assert third[1:4] == ("3", "400", duration(7200 / 3 * 397)) == ("3", "400", "264h40m")
