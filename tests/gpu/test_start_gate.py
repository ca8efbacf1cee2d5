"""The logical ranks' start gate on a GPU (`pytest -m gpu`): a held stream
runs nothing until the step's gate opens, then everything it holds
(docs/synchronization.md, "Launch skew")."""

from __future__ import annotations

import time

import pytest

from tools.driver.start_gate import StartGate

pytestmark = pytest.mark.gpu(1)


def test_a_held_stream_runs_only_once_the_gate_opens():
    import torch

    gate = StartGate()
    stream = torch.cuda.Stream()
    seen = torch.zeros(2, dtype=torch.int32, device="cuda")
    for step in (1, 2):  # a second step's token: the first one's open gate holds nothing
        with gate.step():
            with torch.cuda.stream(stream):
                gate.hold()
                seen[step - 1].fill_(step)
            time.sleep(0.05)
            assert not stream.query(), f"step {step}: the stream ran before its gate opened"
        stream.synchronize()
    assert seen.tolist() == [1, 2]


def test_a_gate_opened_by_an_error_lets_its_streams_run():
    import torch

    gate = StartGate()
    stream = torch.cuda.Stream()
    done = torch.zeros(1, dtype=torch.int32, device="cuda")
    with pytest.raises(RuntimeError, match="issuing failed"), gate.step():
        with torch.cuda.stream(stream):
            gate.hold()
            done.fill_(1)
        raise RuntimeError("issuing failed")
    stream.synchronize()
    assert done.item() == 1
