"""The driver's logical mode on the CPU: the mode and rank count a process
resolves to, each rank's environment, the tagged log lines as the log-line
contract reads them, and the order a step issues its launches in
(docs/synchronization.md, "One GPU, logical ranks")."""

from __future__ import annotations

import contextlib
import io
import sys

import pytest

from afdep.vocab import Role, parse_log
from hostio import RankMode, UsageError
from tools.driver.driver import parse_args
from tools.driver.launch import DRIVER, driver_command, torchrun_command
from tools.driver.logical import rank_environs, resolve_rank_mode
from tools.driver.logical_steps import LogicalStepper
from tools.driver.ranklog import RankTags, TaggedStream, rank_prefix

PLAIN: dict[str, str] = {}
TORCHRUN = {"WORLD_SIZE": "2"}


def resolved(argv: list[str], environ: dict[str, str]):
    args = parse_args(argv)
    resolve_rank_mode(args, environ)
    return args.mode, args.ranks


def test_a_plain_process_runs_logical_ranks_and_torchrun_one_per_gpu():
    assert resolved([], PLAIN) == (RankMode.LOGICAL, 2)
    assert resolved(["--ffn-ranks", "3"], PLAIN) == (RankMode.LOGICAL, 4)
    assert resolved(["--ranks", "4", "--ffn-ranks", "2"], PLAIN) == (RankMode.LOGICAL, 4)
    assert resolved([], TORCHRUN) == (RankMode.PER_GPU, 2)
    assert resolved(["--mode", "per-gpu", "--ranks", "2"], TORCHRUN) == (RankMode.PER_GPU, 2)


@pytest.mark.parametrize(
    "argv, environ, message",
    [
        (
            ["--mode", "per-gpu"],
            PLAIN,
            "--mode per-gpu: needs torchrun with 2+ ranks (afdep drive --nproc N); "
            "this is a plain process",
        ),
        (
            ["--mode", "logical"],
            TORCHRUN,
            "--mode logical: runs every rank in one process; this one is one of 2 torchrun ranks",
        ),
        (["--ranks", "4"], TORCHRUN, "--ranks 4: torchrun started 2 ranks"),
        (["--ranks", "5"], PLAIN, "--ranks 5: logical mode runs 2..4 ranks"),
        (
            ["--ranks", "3", "--ffn-ranks", "3"],
            PLAIN,
            "--ranks 3: no attention rank beside --ffn-ranks 3",
        ),
        (
            ["--bench-iters", "5"],
            PLAIN,
            "--bench-iters: logical ranks share one GPU, their timings are no NVLink figures",
        ),
        (
            ["--role-env", "ffn:CUDA_LAUNCH_BLOCKING=1"],
            PLAIN,
            "--role-env 'ffn:CUDA_LAUNCH_BLOCKING=1': logical ranks share one process; "
            "only AFDEP_* knobs can differ per role",
        ),
    ],
)
def test_a_mode_that_cannot_hold_is_refused_naming_the_argument(argv, environ, message):
    with pytest.raises(UsageError) as caught:
        resolved(argv, environ)
    assert str(caught.value) == message


def test_an_unknown_mode_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as caught:
        parse_args(["--mode", "mps"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.startswith("afdep drive: error: argument --mode: ")


def test_role_env_reaches_only_its_roles_logical_ranks():
    args = parse_args(["--ranks", "4", "--ffn-ranks", "2", "--role-env", "ffn:AFDEP_X=1"])
    resolve_rank_mode(args, PLAIN)
    environs = rank_environs(args, {"AFDEP_Y": "2"})
    assert environs == [
        {"AFDEP_Y": "2"},
        {"AFDEP_Y": "2"},
        {"AFDEP_Y": "2", "AFDEP_X": "1"},
        {"AFDEP_Y": "2", "AFDEP_X": "1"},
    ]


def test_the_logical_driver_command():
    assert driver_command(RankMode.LOGICAL, 3, ["--graph"]) == [
        sys.executable,
        "-m",
        DRIVER,
        "--mode",
        "logical",
        "--ranks",
        "3",
        "--graph",
    ]
    assert driver_command(RankMode.PER_GPU, 4, ["--graph"]) == torchrun_command(
        4, DRIVER, ["--graph"]
    )


# ------------------------------------------------------------------ log lines
def tagged_text(write) -> str:
    sink, tags = io.StringIO(), RankTags()
    stream = TaggedStream(sink, tags)
    write(stream, tags)
    return sink.getvalue()


def test_each_line_carries_the_speaking_rank_as_torchrun_tees_it():
    def write(stream, tags):
        print('"native_source_sha256": "' + "a" * 64 + '"', file=stream)
        for rank in (0, 1):
            with tags.speaking(rank):
                print("afdep.config.ConfigError: all ranks must use the same count-first "
                      "configuration: AFDEP_COUNT_FIRST_UNGATE differs", file=stream)  # fmt: skip
        with tags.speaking(1):
            stream.write("[rank 1] Mismatched out ")
            stream.write("rank=1 step=0 tokens=8: 3 elements differ\nsecond line\n")
        print("last", end="", file=stream)

    text = tagged_text(write)
    lines = text.splitlines()
    assert [line[: len("[default0]:")] for line in lines] == [
        "[default0]:",
        "[default0]:",
        "[default1]:",
        "[default1]:",
        "[default1]:",
        "[default0]:",
    ]
    assert (
        lines[3] == "[default1]:[rank 1] Mismatched out rank=1 step=0 tokens=8: 3 elements differ"
    )
    assert lines[5] == "[default0]:last"
    facts = parse_log(text)
    assert facts.agreement_ranks == [0, 1]
    assert facts.mismatches == 1 and facts.digests == ["a" * 64]
    assert rank_prefix(3) == "[default3]:"


# ------------------------------------------------------------------ launch order
class FakeGraph:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def replay(self):
        self.log.append(("replay", self.name, self.log.stream))


class Log(list):
    stream = "producer"
    capturing = None


class FakeCuda:
    def __init__(self, log: Log):
        self.log = log
        self.graphs = 0

    def current_stream(self):
        return "producer"

    @contextlib.contextmanager
    def stream(self, stream):
        before, self.log.stream = self.log.stream, stream.name
        yield
        self.log.stream = before

    def new_graph(self):
        self.graphs += 1
        return FakeGraph(self.log, f"g{self.graphs}")

    @contextlib.contextmanager
    def capture(self, graph):
        self.log.capturing = graph.name
        yield
        self.log.capturing = None

    def start_gate(self):
        return FakeGate(self.log)


class FakeGate:
    def __init__(self, log):
        self.log = log

    @contextlib.contextmanager
    def step(self):
        try:
            yield self
        finally:
            self.log.append(("open",))

    def hold(self):
        self.log.append(("hold", self.log.stream))


class FakeStream:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def wait_stream(self, other):
        self.log.append(("wait", self.name, other))

    def __repr__(self):
        return self.name


class FakeBuffer:
    def __init__(self, role):
        self.role = role

    def protocol_for(self, bucket):
        return "count-first" if bucket >= 128 else "payload-first"


class FakeRunner:
    def __init__(self, log, rank, role):
        self.log, self.rank, self.buffer, self.bucket = log, rank, FakeBuffer(role), None

    def _record(self, what):
        where = f"capture {self.log.capturing}" if self.log.capturing else self.log.stream
        self.log.append((what, self.rank, where))

    def _load(self, sources):
        self._record("load")

    def _dispatch(self, skip_send=False):
        self._record("dispatch-skip" if skip_send else "dispatch")

    def _combine(self):
        self._record("combine")


def stepper(shape: tuple[int, int], graph: bool):
    log = Log()
    attention, ffn = shape
    roles = [Role.ATTENTION] * attention + [Role.FFN] * ffn
    runners = [FakeRunner(log, rank, role) for rank, role in enumerate(roles)]
    streams = [FakeStream(log, f"s{rank}") for rank in range(len(roles))]
    return log, LogicalStepper(runners, streams, graph=graph, cuda=FakeCuda(log))


def test_an_eager_step_issues_producers_first_each_rank_on_its_stream():
    log, steps = stepper((3, 1), graph=False)
    steps.step([], bucket=8, skip_ranks=frozenset({1}))
    waits = [("wait", f"s{rank}", "producer") for rank in range(4)]
    assert log == [
        *waits,
        ("load", 0, "s0"),
        ("hold", "s0"),
        ("dispatch", 0, "s0"),
        ("load", 1, "s1"),
        ("hold", "s1"),
        ("dispatch-skip", 1, "s1"),
        ("load", 2, "s2"),
        ("hold", "s2"),
        ("dispatch", 2, "s2"),
        ("load", 3, "s3"),
        ("hold", "s3"),
        ("dispatch", 3, "s3"),
        ("combine", 3, "s3"),
        ("combine", 0, "s0"),
        ("combine", 1, "s1"),
        ("combine", 2, "s2"),
        ("open",),  # every rank issued: they start together
    ]
    assert [runner.bucket for runner in steps.runners] == [8] * 4


def test_a_rank_s_launch_skew_sleeps_after_its_copies_right_before_its_dispatch(monkeypatch):
    """Queued before the copies, the attention's sleep would run while the
    host still issues its copies and dispatch, and the FFN, issued after
    them, would lead by less than its skew says."""
    import tools.driver.logical_steps as logical_steps

    log, steps = stepper((1, 1), graph=True)
    monkeypatch.setattr(
        logical_steps, "delay_stream", lambda cycles: log.append(("sleep", cycles, log.stream))
    )
    steps.step([], bucket=8, delays=[62_676, 0])
    issued = [entry for entry in log if entry[0] in ("load", "hold", "sleep", "replay", "open")]
    assert issued == [
        ("load", 0, "s0"),
        ("hold", "s0"),
        ("sleep", 62_676, "s0"),
        ("replay", "g1", "s0"),
        ("load", 1, "s1"),
        ("hold", "s1"),
        ("sleep", 0, "s1"),
        ("replay", "g3", "s1"),
        ("replay", "g4", "s1"),
        ("replay", "g2", "s0"),
        ("open",),
    ]


def test_a_graph_step_captures_every_rank_before_any_replay():
    log, steps = stepper((1, 3), graph=True)
    steps.step([], bucket=8)
    captures = [
        entry
        for rank in range(4)
        for entry in (
            ("dispatch", rank, f"capture g{2 * rank + 1}"),
            ("combine", rank, f"capture g{2 * rank + 2}"),
        )
    ]
    replays = [
        *[
            entry
            for rank in range(4)
            for entry in (
                ("load", rank, f"s{rank}"),
                ("hold", f"s{rank}"),
                ("replay", f"g{2 * rank + 1}", f"s{rank}"),
            )
        ],
        *[("replay", f"g{2 * rank + 2}", f"s{rank}") for rank in (1, 2, 3)],
        ("replay", "g2", "s0"),
        ("open",),
    ]
    waits = [("wait", f"s{rank}", "producer") for rank in range(4)]
    assert log == [*captures, *waits, *replays]
    log.clear()
    steps.step([], bucket=8)  # the same protocol: replayed, not captured again
    assert not [entry for entry in log if str(entry[-1]).startswith("capture")]
    steps.step([], bucket=512)  # the other protocol: captured once more
    assert len([entry for entry in log if str(entry[-1]).startswith("capture")]) == 8


def test_the_start_gate_opens_when_issuing_a_step_fails():
    """A rank whose launch raises must not leave the others' streams waiting
    on the gate: it opens on the way out, and the error still reaches the driver."""
    log, steps = stepper((1, 1), graph=False)

    def broken(skip_send=False):
        raise RuntimeError("launch failed")

    steps.runners[1]._dispatch = broken
    with pytest.raises(RuntimeError, match="launch failed"):
        steps.step([], bucket=8)
    assert log[-3:] == [("load", 1, "s1"), ("hold", "s1"), ("open",)]


# ------------------------------------------------------------------ failures
@pytest.fixture
def no_gpu_needed(monkeypatch):
    import torch

    import tools.driver.logical as logical

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(logical, "gpu_count", lambda: 1)
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")  # restored after the test

    def exit_now(code):
        raise SystemExit(code)

    monkeypatch.setattr(logical.os, "_exit", exit_now)
    return logical


def test_a_disagreement_is_reported_by_every_logical_rank(no_gpu_needed, monkeypatch, capsys):
    from afdep.buffer import agree_on_config
    from afdep.config import Settings
    from afdep.ranks import LocalWorld

    configs = [Settings(), Settings(ungate=True)]

    def disagreeing(world_size, **kwargs):
        return LocalWorld(world_size).run(lambda group: agree_on_config(group, configs[group.rank]))

    monkeypatch.setattr(no_gpu_needed, "logical_ranks", disagreeing)
    args = parse_args(["--role-env", "ffn:AFDEP_COUNT_FIRST_UNGATE=1"])
    resolve_rank_mode(args, PLAIN)
    with pytest.raises(SystemExit) as caught:
        no_gpu_needed.main_logical(args)
    assert caught.value.code == 1
    out, err = capsys.readouterr()
    facts = parse_log(out + err)
    assert facts.agreement_ranks == [0, 1]
    assert [(r["ok"], r["rank"]) for r in facts.results] == [(False, 0), (False, 1)]
    assert facts.results[1]["error"].startswith(
        "ConfigError: all ranks must use the same count-first configuration: "
        "AFDEP_COUNT_FIRST_UNGATE differs"
    )
    assert out.splitlines()[2] == "[default0]:rank mode: 1xH200, 2 logical ranks"


def test_a_geometry_that_cannot_be_resident_ends_the_run_in_one_line(
    no_gpu_needed, monkeypatch, capfd
):
    from afdep.residency import ResidencyError

    message = "one-GPU mode: 3A:1F needs 3×40 (attention) + 1×40 (ffn) = 160 CTAs ..."

    def refused(world_size, **kwargs):
        raise ResidencyError(message)

    monkeypatch.setattr(no_gpu_needed, "logical_ranks", refused)
    args = parse_args(["--ranks", "4"])
    resolve_rank_mode(args, PLAIN)
    assert no_gpu_needed.main_logical(args) == 2
    out, err = capfd.readouterr()
    assert err.splitlines() == [f"afdep drive: error: {message}"]
    assert "AFDEP_RESULT" not in out


def test_logical_mode_without_a_gpu_is_one_line(no_gpu_needed, monkeypatch, capsys):
    monkeypatch.setattr(no_gpu_needed, "gpu_count", lambda: 0)
    args = parse_args([])
    resolve_rank_mode(args, PLAIN)
    assert no_gpu_needed.main_logical(args) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "afdep drive: error: --mode logical: needs a GPU, found 0\n")
