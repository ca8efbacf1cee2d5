"""`afdep-faults review`'s progress display: each event of the review's
progress (faults/review/progress.py) one line on stderr, the report alone on
stdout."""

from __future__ import annotations

import pytest

from faults.judge.verdict import Verdict
from faults.review.progress import Planned, Ran


def test_the_progress_goes_to_stderr_a_line_an_event(capsys):
    pytest.importorskip("rich")  # the display's library: a dependency of the tools
    from tools.faults_cli.review import shown_progress

    ticks = iter([100.0, 100.5, 112.3])  # the start, then each event's time
    with shown_progress(clock=lambda: next(ticks)) as listener:
        listener(Planned("the change's tree: a", 2, 2, 0))
        listener(Ran("change", "control.clean", "a", Verdict.PASSED, 1, 2))
    out, err = capsys.readouterr()
    assert out == ""
    assert [line for line in err.splitlines() if line] == [  # the bar, transient, leaves none
        "   0.5 s  review --run: the change's tree: a (2 runs; 2 left of 2)",
        "  12.3 s  [1/2] change: control.clean [a] PASSED (1 left)",
    ]
