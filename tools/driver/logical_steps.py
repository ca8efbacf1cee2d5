"""One driver step of N logical ranks, issued by one host thread on N streams
(docs/synchronization.md, "One GPU, logical ranks").

Nothing that blocks the host may run while a step's kernels are pending: they
spin until every rank's kernels run, and a rank not yet issued never would (a
graph capture synchronizes the device, a pageable copy its stream). So a step
first captures every rank's graphs, then issues every rank's launches, and
only then does the driver synchronize.

The launches of a step go producer first: attention dispatches, FFN
dispatches (with the expert function), FFN combines, attention combines.
Each rank keeps its own order on its own stream; across ranks, a command a
stream holds back (its kernel waits for the one before it on that stream) may
share a hardware queue with another rank's commands and hold them back too,
and in this order it only ever waits for kernels whose producers are already
issued. For the same reason a graph step is two graphs per rank, dispatch and
combine, replayed in the same order.

A rank's launch skew sleeps on its stream after its inputs' copies, right
before its dispatch, as under torchrun: the host issues the ranks one after
another, so a sleep queued before the copies would spend its cycles while the
host is still issuing, and a rank issued later (the FFN) would hardly lead.
Even after the copies the FFN's first kernel started 40-153 µs after the
attention's dispatch, longer than the skew's longest sleep
(docs/synchronization.md, "Launch skew"), so every rank's stream also
waits there on a start gate (`start_gate.py`) that opens once the whole step
is issued: the ranks start together, and the skew is what tells them apart."""

from __future__ import annotations

from enum import Enum

from afdep.vocab import Role
from tools.driver.skew import delay_stream


class Part(Enum):
    DISPATCH = "dispatch"
    COMBINE = "combine"


PHASES: tuple[tuple[Role, Part], ...] = (
    (Role.ATTENTION, Part.DISPATCH),
    (Role.FFN, Part.DISPATCH),
    (Role.FFN, Part.COMBINE),
    (Role.ATTENTION, Part.COMBINE),
)


class TorchCuda:
    """The CUDA calls a step makes, as torch spells them (tests pass a fake)."""

    def current_stream(self):
        import torch

        return torch.cuda.current_stream()

    def stream(self, stream):
        import torch

        return torch.cuda.stream(stream)

    def new_graph(self):
        import torch

        return torch.cuda.CUDAGraph()

    def capture(self, graph):
        import torch

        return torch.cuda.graph(graph)

    def start_gate(self):
        from tools.driver.start_gate import StartGate

        return StartGate()


class LogicalStepper:
    """Steps the StepRunners of N logical ranks (their `_load`, `_dispatch`,
    `_combine`, eager or captured), each on its rank's stream."""

    def __init__(self, runners, streams, *, graph: bool, cuda=None) -> None:
        if len(runners) != len(streams):
            raise ValueError(f"{len(runners)} runners for {len(streams)} streams")
        self.runners = runners
        self.streams = streams
        self.graph = graph
        self.cuda = cuda or TorchCuda()
        self.gate = self.cuda.start_gate()  # every rank starts a step at once
        # (rank, protocol, skip_send) -> (dispatch graph, combine graph, FFN expert outputs)
        self._graphs: dict[tuple, tuple] = {}

    def step(
        self,
        sources,
        *,
        bucket: int,
        skip_ranks: frozenset[int] = frozenset(),
        delays: list[int] | None = None,
    ) -> None:
        """Issue one step of `bucket` tokens on every rank (`skip_ranks` send
        nothing), rank r's kernels queued `delays[r]` cycles late on its stream
        (the launch skew, outside any graph)."""
        for runner in self.runners:
            runner.bucket = bucket
        graphs = [self._graphs_of(rank, rank in skip_ranks) for rank in range(len(self.runners))]
        producer = self.cuda.current_stream()  # the step's inputs were made here
        for stream in self.streams:
            stream.wait_stream(producer)
        with self.gate.step():
            for role, part in PHASES:
                for rank, runner in enumerate(self.runners):
                    if runner.buffer.role == role:
                        delay = delays[rank] if delays else 0
                        skip = rank in skip_ranks
                        with self.cuda.stream(self.streams[rank]):
                            self._issue(runner, part, sources, graphs[rank], skip, delay)

    def _issue(self, runner, part: Part, sources, graphs, skip: bool, delay: int) -> None:
        if part == Part.DISPATCH:
            runner._load(sources)
            self.gate.hold()  # until every rank is issued: the skew counts from here
            delay_stream(delay)  # the launch skew, outside any graph
            if graphs is None:
                runner._dispatch(skip)
            else:
                graphs[0].replay()
        elif graphs is None:
            runner._combine()
        else:
            graphs[1].replay()

    def _graphs_of(self, rank: int, skip: bool):
        """Rank's two graphs for this step's protocol, captured once (None when eager)."""
        if not self.graph:
            return None
        runner = self.runners[rank]
        key = (rank, runner.buffer.protocol_for(runner.bucket), skip)
        if key not in self._graphs:
            dispatch, combine = self.cuda.new_graph(), self.cuda.new_graph()
            with self.cuda.capture(dispatch):
                runner._dispatch(skip)
            with self.cuda.capture(combine):
                runner._combine()
            # The combine graph reads the expert outputs the dispatch graph
            # wrote: they stay referenced as long as the graphs.
            self._graphs[key] = (dispatch, combine, getattr(runner, "_y", None))
        return self._graphs[key]
