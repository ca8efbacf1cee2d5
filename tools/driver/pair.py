"""Ranks kept alive across test cases, so a Hypothesis property can draw many
routes without paying a torchrun start per example: RankPair's worker
processes each hold a Buffer on their own GPU; LogicalRankPair holds every
rank in this process on one GPU (docs/synchronization.md, "One GPU, logical
ranks"). Both run one eager step per request."""

from __future__ import annotations

import os
import queue
import socket
import traceback

import torch
import torch.multiprocessing as mp

from invariants.data.inputs import SourceInputs

REPLY_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world_size, port, buffer_kwargs, inbox, outbox) -> None:
    import torch.distributed as dist

    from afdep.buffer import Buffer
    from tools.driver.steps import StepRunner

    try:
        torch.cuda.set_device(rank)
        dist.init_process_group(
            "nccl",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            device_id=torch.device("cuda", rank),
        )
        runner = StepRunner(Buffer(**buffer_kwargs), graph=False)
        outbox.put((rank, "ready", None))
        step = 0
        while (request := inbox.get()) is not None:
            sources = [s.to(runner.buffer.device) for s in request]
            runner.step(sources, bucket=sources[0].num_tokens)
            torch.cuda.synchronize()
            checks, mismatches = runner.check(sources, step, sources[0].num_tokens)
            outbox.put((rank, checks, mismatches))
            step += 1
        dist.destroy_process_group()
    except Exception:
        outbox.put((rank, "error", traceback.format_exc()))
        os._exit(1)


class RankPair:
    def __init__(self, world_size: int = 2, **buffer_kwargs) -> None:
        context = mp.get_context("spawn")
        port = _free_port()
        self.world_size = world_size
        self.outbox = context.Queue()
        self.inboxes = [context.Queue() for _ in range(world_size)]
        self.processes = [
            context.Process(
                target=_worker,
                daemon=True,
                args=(rank, world_size, port, buffer_kwargs, self.inboxes[rank], self.outbox),
            )
            for rank in range(world_size)
        ]
        for process in self.processes:
            process.start()
        self._collect("starting")

    def _collect(self, what: str) -> list[tuple[int, object, object]]:
        replies = []
        for _ in range(self.world_size):
            try:
                rank, first, second = self.outbox.get(timeout=REPLY_TIMEOUT_S)
            except queue.Empty:
                raise TimeoutError(f"no reply from the ranks while {what}") from None
            if first == "error":
                raise RuntimeError(f"rank {rank} failed while {what}:\n{second}")
            replies.append((rank, first, second))
        return sorted(replies, key=lambda reply: reply[0])

    def step(self, sources: list[SourceInputs]) -> tuple[int, list[str]]:
        """Run one step on every rank; (checks made, mismatch lines) over all ranks."""
        for inbox in self.inboxes:
            inbox.put(sources)
        replies = self._collect("running a step")
        return sum(r[1] for r in replies), [line for r in replies for line in r[2]]

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()


class LogicalRankPair:
    """RankPair's interface over logical ranks in this process, on the current GPU."""

    def __init__(self, world_size: int = 2, **buffer_kwargs) -> None:
        from afdep.logical import logical_ranks
        from tools.driver.logical_steps import LogicalStepper
        from tools.driver.steps import StepRunner

        self.world_size = world_size
        self.ranks = logical_ranks(world_size, **buffer_kwargs)
        self.runners = [StepRunner(buffer, graph=False) for buffer in self.ranks.buffers]
        self.stepper = LogicalStepper(self.runners, self.ranks.streams, graph=False)
        self.steps = 0

    def step(self, sources: list[SourceInputs]) -> tuple[int, list[str]]:
        """Run one step on every rank; (checks made, mismatch lines) over all ranks."""
        device = self.ranks.buffers[0].device
        sources = [s.to(device) for s in sources]
        self.stepper.step(sources, bucket=sources[0].num_tokens)
        torch.cuda.synchronize()
        checks, mismatches = 0, []
        for runner in self.runners:
            made, found = runner.check(sources, self.steps, sources[0].num_tokens)
            checks += made
            mismatches += found
        self.steps += 1
        return checks, mismatches

    def close(self) -> None:
        torch.cuda.synchronize()
        self.runners = []
