"""The host's step deadline: silent on time, one named line per rank past it."""

from __future__ import annotations

import threading

from afdep.vocab import TIMEOUT_LINE
from tools.driver.watchdog import EXIT_CODE, deadline_lines, step_deadline, step_deadline_s


def test_the_deadline_comes_after_three_device_timeouts_and_half_a_minute():
    assert step_deadline_s(3000) == 39.0
    assert step_deadline_s(10_000) == 60.0


def test_a_step_on_time_says_nothing(capfd):
    ended = []
    with step_deadline(5.0, 0, [0, 1], end=ended.append):
        pass
    assert ended == [] and capfd.readouterr().out == ""


def test_a_step_past_its_deadline_names_it_for_every_rank_and_ends(capfd):
    ended = threading.Event()
    codes = []

    def end(code):
        codes.append(code)
        ended.set()

    with step_deadline(0.05, 7, [0, 1], end=end):
        assert ended.wait(5.0)  # the step "hangs" past its deadline
    assert codes == [EXIT_CODE]
    out = capfd.readouterr().out.splitlines()
    assert out == deadline_lines(7, [0, 1], 0.05)
    assert out[1] == (
        "afdep timeout: site=host.step rank=1 step=7: the step's kernels neither finished nor "
        "timed out on the device in 0.05 s (a kernel that never started, or one that runs away)"
    )
    assert [TIMEOUT_LINE.match(line).groups() for line in out] == [
        ("host.step", "0"),
        ("host.step", "1"),
    ]
