"""The driver runs afdep.validate judges: the 2-GPU matrix (1A:1F, both
protocols, knobs, views, failures) and the 4-GPU matrix of issue E (3A:1F,
2A:2F, 1A:3F). Each Run names its GPUs (`nproc`); a machine with fewer lists
it as not run."""

from __future__ import annotations

from dataclasses import dataclass, field

from afdep.config import COUNT_FIRST_EVERY_BUCKET as CF

ROUTE_KINDS = ("negative", "wide", "duplicate", "dummy")
COMMON = ["--capacity", "2048", "--top-k", "8", "--num-experts", "128"]
TOKENS = ["--tokens", "1", "8", "128", "512", "2048"]
ROUTE_DEADLINE_S = 60.0


def grid(payload: str, execution: str, hidden: int = 2048, sms: int = 24, *extra: str) -> list[str]:
    """The driver's arguments for one cell of a correctness grid (every token count)."""
    return [
        *COMMON,
        *TOKENS,
        "--payload",
        payload,
        f"--{execution}",
        "--hidden-size",
        str(hidden),
        "--num-sms",
        str(sms),
        *extra,
    ]


@dataclass(frozen=True)
class Run:
    name: str
    args: list[str]
    expect: str  # "pass", "route:<kind>", "timeout" or "agreement"
    group: str  # "correctness", "failures", "count-first" or "four-gpu"
    env: dict[str, str] = field(default_factory=dict)
    nproc: int = 2
    outer_timeout_s: float = 300.0


def failure_args(steps: int, *extra: str) -> list[str]:
    """A short bf16 run at 128 tokens: where the failure runs break things."""
    return [*COMMON, "--tokens", "128", "--steps", str(steps), "--payload", "bf16", *extra]


def agreement_run(name: str, group: str, nproc: int = 2, extra: tuple[str, ...] = ()) -> Run:
    """The FFN role alone ungated: every rank must fail with the agreement error."""
    args = failure_args(2, *extra, "--role-env", "ffn:AFDEP_COUNT_FIRST_UNGATE=1")
    return Run(name, args, "agreement", group, env=CF, nproc=nproc, outer_timeout_s=120)


def invalid_route_runs(
    prefix: str, group: str, env: dict[str, str], nproc: int = 2, extra: tuple[str, ...] = ()
) -> list[Run]:
    """Each invalid kind in each execution: it must assert on every rank in time."""
    runs = []
    for execution in ("eager", "graph"):
        for kind in ROUTE_KINDS:
            args = failure_args(
                3, "--invalid-route", kind, "--invalid-execution", execution, *extra
            )
            runs.append(
                Run(
                    f"{prefix}invalid-{execution}-{kind}",
                    args,
                    f"route:{kind}",
                    group,
                    env=env,
                    nproc=nproc,
                    outer_timeout_s=ROUTE_DEADLINE_S + 30,
                )
            )
    return runs


def matrix_2gpu(bench_iters: int = 50) -> list[Run]:
    runs = []
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            for hidden in (2048, 7168):
                for sms in (7, 24):
                    args = grid(payload, execution, hidden, sms)
                    if (payload, execution, hidden, sms) == ("bf16", "graph", 2048, 24):
                        args += ["--bench-iters", str(bench_iters)]
                    runs.append(
                        Run(
                            f"{payload}-{execution}-h{hidden}-sms{sms}", args, "pass", "correctness"
                        )
                    )
            for hidden in (2048, 7168):
                args = grid(payload, execution, hidden, 24, "--collect-view")
                runs.append(
                    Run(f"view-{payload}-{execution}-h{hidden}", args, "pass", "correctness")
                )
    runs += invalid_route_runs("", "failures", {})
    runs += matrix_count_first()
    for skip_rank, role in ((0, "attention"), (1, "ffn")):
        args = failure_args(2, "--test-skip-dispatch-rank", str(skip_rank))
        runs.append(
            Run(
                f"skip-dispatch-{role}",
                args,
                "timeout",
                "failures",
                env={"AFDEP_TIMEOUT_MS": "3000"},
                outer_timeout_s=90,
            )
        )
    return runs


# The seed's runner set each knob so; each runs on its own with count-first forced.
KNOB_SETTINGS = (
    "UNGATED_TOKENS=48",
    "UNGATE=1",
    "WARP_COUNT=1",
    "UNIT_MIN_ROWS=32",
    "EPILOGUE_SMS=48",
)


def matrix_count_first() -> list[Run]:
    """Count-first (AFDEP_COUNT_FIRST_MIN_BUCKET=1: count-first at every bucket)."""
    runs = []
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            for hidden in (2048, 7168):
                args = grid(payload, execution, hidden)
                runs.append(
                    Run(f"cf-{payload}-{execution}-h{hidden}", args, "pass", "count-first", env=CF)
                )
            args = grid(payload, execution, 2048, 24, "--collect-view")
            runs.append(Run(f"cf-view-{payload}-{execution}", args, "pass", "count-first", env=CF))
    for sms in (7, 23):
        args = grid("bf16", "graph", 2048, sms)
        runs.append(Run(f"cf-sms{sms}", args, "pass", "count-first", env=CF))
    for setting in KNOB_SETTINGS:
        name, _, value = setting.partition("=")
        args = grid("bf16", "graph")
        runs.append(
            Run(
                f"cf-knob-{name}",
                args,
                "pass",
                "count-first",
                env={**CF, f"AFDEP_COUNT_FIRST_{name}": value},
            )
        )
    arm = {**CF, "AFDEP_COUNT_FIRST_ARM": "source"}
    for payload, extra in (("bf16", []), ("fp8", []), ("bf16", ["--collect-view"])):
        for execution in ("eager", "graph"):
            args = grid(payload, execution, 2048, 24, *extra)
            view = "-view" if extra else ""
            runs.append(
                Run(
                    f"cf-arm-source-{payload}{view}-{execution}",
                    args,
                    "pass",
                    "count-first",
                    env=arm,
                )
            )
    for execution in ("eager", "graph"):  # the protocol switches between buckets
        args = grid("bf16", execution)
        runs.append(
            Run(
                f"cf-mixed-min512-{execution}",
                args,
                "pass",
                "count-first",
                env={"AFDEP_COUNT_FIRST_MIN_BUCKET": "512"},
            )
        )
    runs += invalid_route_runs("cf-", "count-first", CF)
    runs.append(agreement_run("cf-disagree", "count-first"))
    return runs


# Issue E: on 4 GPUs, the three splits. The seed gave each FFN rank 32 experts
# at 3A:1F and 1A:3F (96 at 1A:3F: 128 does not divide by 3); 2A:2F keeps 128.
SPLITS = {1: ["--experts-per-ffn", "32"], 2: [], 3: ["--experts-per-ffn", "32"]}


def split_name(ffn_ranks: int, gpus: int = 4) -> str:
    return f"{gpus - ffn_ranks}a{ffn_ranks}f"


def matrix_4gpu() -> list[Run]:
    """3A:1F, 2A:2F and 1A:3F x bf16/fp8 x eager/graph x count-first forced
    and off; the collect view at 3A:1F; invalid routes in both executions
    (2A:2F, count-first forced); the agreement failure."""
    runs = []
    for ffn_ranks, experts in SPLITS.items():
        split = ["--ffn-ranks", str(ffn_ranks), *experts]
        for payload in ("bf16", "fp8"):
            for execution in ("eager", "graph"):
                for protocol, env in (("cf", CF), ("pf", {})):
                    args = grid(payload, execution)
                    runs.append(
                        Run(
                            f"{split_name(ffn_ranks)}-{protocol}-{payload}-{execution}",
                            [*args, *split],
                            "pass",
                            "four-gpu",
                            env=env,
                            nproc=4,
                        )
                    )
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            args = grid(payload, execution)
            runs.append(
                Run(
                    f"3a1f-view-{payload}-{execution}",
                    [*args, "--ffn-ranks", "1", *SPLITS[1], "--collect-view"],
                    "pass",
                    "four-gpu",
                    env=CF,
                    nproc=4,
                )
            )
    runs += invalid_route_runs("2a2f-", "four-gpu", CF, nproc=4, extra=("--ffn-ranks", "2"))
    runs.append(agreement_run("2a2f-disagree", "four-gpu", nproc=4, extra=("--ffn-ranks", "2")))
    return runs
