"""The driver runs tools.validate.validation judges: the 2-GPU matrix (1A:1F, both
protocols, knobs, views, failures) and the 4-GPU matrix (3A:1F, 2A:2F,
1A:3F). Each Run names its GPUs (`nproc`); a machine with fewer lists
it as not run."""

from __future__ import annotations

from dataclasses import dataclass, field

from afdep.config import COUNT_FIRST_EVERY_BUCKET as CF
from afdep.vocab import Arm, Role, RouteKind, Word

COMMON = ["--capacity", "2048", "--top-k", "8", "--num-experts", "128"]
TOKENS = ["--tokens", "1", "8", "128", "512", "2048"]
ROUTE_DEADLINE_S = 60.0


class Expect(Word):
    """What a run must show: a clean pass, an invalid route asserted on every
    rank (`Run.route` names the kind), a wait timing out, or every rank
    refusing a protocol configuration the ranks disagree on."""

    PASS = "pass"
    ROUTE = "route"
    TIMEOUT = "timeout"
    AGREEMENT = "agreement"


class Group(Word):
    """The parts of the matrix `--select` picks."""

    CORRECTNESS = "correctness"
    FAILURES = "failures"
    COUNT_FIRST = "count-first"
    FOUR_GPU = "four-gpu"
    SPLIT_KNOBS = "split-knobs"


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
    expect: Expect
    group: Group
    env: dict[str, str] = field(default_factory=dict)
    nproc: int = 2
    outer_timeout_s: float = 300.0
    route: RouteKind | None = None  # the kind an Expect.ROUTE run must assert

    def __post_init__(self) -> None:
        if (self.expect == Expect.ROUTE) != (self.route is not None):
            raise ValueError(f"run {self.name}: a route kind goes with Expect.ROUTE only")

    @property
    def expectation(self) -> str:
        """As the validate document records it: `route:<kind>` or the Expect."""
        return f"{self.expect}:{self.route}" if self.route is not None else self.expect.value


def passing(
    name: str, args: list[str], group: Group, env: dict[str, str] | None = None, nproc: int = 2
) -> Run:
    """A run that must pass every check."""
    return Run(name, args, Expect.PASS, group, env=dict(env or {}), nproc=nproc)


def failure_args(steps: int, *extra: str) -> list[str]:
    """A short bf16 run at 128 tokens: where the failure runs break things."""
    return [*COMMON, "--tokens", "128", "--steps", str(steps), "--payload", "bf16", *extra]


def agreement_run(name: str, group: Group, nproc: int = 2, extra: tuple[str, ...] = ()) -> Run:
    """The FFN role alone ungated: every rank must fail with the agreement error."""
    args = failure_args(2, *extra, "--role-env", f"{Role.FFN}:AFDEP_COUNT_FIRST_UNGATE=1")
    return Run(name, args, Expect.AGREEMENT, group, env=CF, nproc=nproc, outer_timeout_s=120)


def invalid_route_runs(
    prefix: str, group: Group, env: dict[str, str], nproc: int = 2, extra: tuple[str, ...] = ()
) -> list[Run]:
    """Each invalid kind in each execution: it must assert on every rank in time."""
    runs = []
    for execution in ("eager", "graph"):
        for kind in RouteKind:
            args = failure_args(
                3, "--invalid-route", kind.value, "--invalid-execution", execution, *extra
            )
            runs.append(
                Run(
                    f"{prefix}invalid-{execution}-{kind}",
                    args,
                    Expect.ROUTE,
                    group,
                    env=env,
                    nproc=nproc,
                    outer_timeout_s=ROUTE_DEADLINE_S + 30,
                    route=kind,
                )
            )
    return runs


def ffn_grids_env(sms: int) -> dict[str, str]:
    """ffn_expand and ffn_combine take every SM they can by default; a cell of
    fewer SMs runs them on as few, so their warps loop over several slots."""
    return {} if sms == 24 else {"AFDEP_EXPAND_SMS": str(sms), "AFDEP_COMBINE_SMS": str(sms)}


WIDEST_FP8 = 8192  # hidden: the seed validated fp8 rows this wide


def matrix_2gpu(bench_iters: int = 50) -> list[Run]:
    runs = []
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            for hidden in (2048, 7168):
                for sms in (7, 24):
                    args = grid(payload, execution, hidden, sms)
                    if (payload, execution, hidden, sms) == ("bf16", "graph", 2048, 24):
                        args += ["--bench-iters", str(bench_iters)]
                    name = f"{payload}-{execution}-h{hidden}-sms{sms}"
                    runs.append(passing(name, args, Group.CORRECTNESS, ffn_grids_env(sms)))
            for hidden in (2048, 7168):
                args = grid(payload, execution, hidden, 24, "--collect-view")
                name = f"view-{payload}-{execution}-h{hidden}"
                runs.append(passing(name, args, Group.CORRECTNESS))
    for execution in ("eager", "graph"):  # the seed's widest rows: hidden 8192 in fp8
        name = f"fp8-{execution}-h{WIDEST_FP8}-sms24"
        runs.append(passing(name, grid("fp8", execution, WIDEST_FP8), Group.CORRECTNESS))
    runs += invalid_route_runs("", Group.FAILURES, {})
    runs += matrix_count_first()
    for skip_rank, role in ((0, Role.ATTENTION), (1, Role.FFN)):
        args = failure_args(2, "--test-skip-dispatch-rank", str(skip_rank))
        runs.append(
            Run(
                f"skip-dispatch-{role}",
                args,
                Expect.TIMEOUT,
                Group.FAILURES,
                env={"AFDEP_TIMEOUT_MS": "3000"},
                outer_timeout_s=90,
            )
        )
    return runs


# One setting per knob away from its default; each runs alone with count-first forced.
KNOB_SETTINGS = (
    "UNGATED_TOKENS=48",
    "UNGATE=1",
    "WARP_COUNT=1",
    "UNIT_MIN_ROWS=32",
    "EPILOGUE_SMS=48",
)


def matrix_count_first() -> list[Run]:
    """Count-first (AFDEP_COUNT_FIRST_MIN_BUCKET=1: count-first at every bucket)."""
    group = Group.COUNT_FIRST
    runs = []
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            for hidden in (2048, 7168):
                args = grid(payload, execution, hidden)
                runs.append(passing(f"cf-{payload}-{execution}-h{hidden}", args, group, CF))
            args = grid(payload, execution, 2048, 24, "--collect-view")
            runs.append(passing(f"cf-view-{payload}-{execution}", args, group, CF))
    for execution in ("eager", "graph"):
        name = f"cf-fp8-{execution}-h{WIDEST_FP8}"
        runs.append(passing(name, grid("fp8", execution, WIDEST_FP8), group, CF))
    for sms in (7, 23):  # the epilogue capped as few: its warps loop over several slots
        env = {**CF, "AFDEP_COUNT_FIRST_EPILOGUE_SMS": str(sms)}
        runs.append(passing(f"cf-sms{sms}", grid("bf16", "graph", 2048, sms), group, env))
    for setting in KNOB_SETTINGS:
        name, _, value = setting.partition("=")
        env = {**CF, f"AFDEP_COUNT_FIRST_{name}": value}
        runs.append(passing(f"cf-knob-{name}", grid("bf16", "graph"), group, env))
    arm = {**CF, "AFDEP_COUNT_FIRST_ARM": Arm.ATTENTION.value}
    for payload, extra in (("bf16", []), ("fp8", []), ("bf16", ["--collect-view"])):
        for execution in ("eager", "graph"):
            args = grid(payload, execution, 2048, 24, *extra)
            view = "-view" if extra else ""
            runs.append(passing(f"cf-arm-attention-{payload}{view}-{execution}", args, group, arm))
    for execution in ("eager", "graph"):  # the protocol switches between buckets
        env = {"AFDEP_COUNT_FIRST_MIN_BUCKET": "512"}
        runs.append(passing(f"cf-mixed-min512-{execution}", grid("bf16", execution), group, env))
    runs += invalid_route_runs("cf-", group, CF)
    runs.append(agreement_run("cf-disagree", group))
    return runs


# On 4 GPUs, the three splits: 32 experts per FFN rank at 3A:1F and 1A:3F (96
# in all at 1A:3F: 128 does not divide by 3); 2A:2F keeps 128.
SPLITS = {1: ["--experts-per-ffn", "32"], 2: [], 3: ["--experts-per-ffn", "32"]}


def split_name(ffn_ranks: int, gpus: int = 4) -> str:
    return f"{gpus - ffn_ranks}a{ffn_ranks}f"


def matrix_4gpu() -> list[Run]:
    """3A:1F, 2A:2F and 1A:3F x bf16/fp8 x eager/graph x count-first forced
    and off; the collect view at 3A:1F; invalid routes in both executions
    (2A:2F, count-first forced); the agreement failure."""
    group = Group.FOUR_GPU
    runs = []
    for ffn_ranks, experts in SPLITS.items():
        split = ["--ffn-ranks", str(ffn_ranks), *experts]
        for payload in ("bf16", "fp8"):
            for execution in ("eager", "graph"):
                for protocol, env in (("cf", CF), ("pf", {})):
                    name = f"{split_name(ffn_ranks)}-{protocol}-{payload}-{execution}"
                    args = [*grid(payload, execution), *split]
                    runs.append(passing(name, args, group, env, nproc=4))
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            args = [*grid(payload, execution), "--ffn-ranks", "1", *SPLITS[1], "--collect-view"]
            runs.append(passing(f"3a1f-view-{payload}-{execution}", args, group, CF, nproc=4))
    runs += invalid_route_runs("2a2f-", group, CF, nproc=4, extra=("--ffn-ranks", "2"))
    runs.append(agreement_run("2a2f-disagree", group, nproc=4, extra=("--ffn-ranks", "2")))
    return runs


# The knobs at 3 and 4 ranks. EPILOGUE_SMS is a cap: 48 at 1A:3F as logical
# ranks would be capped to the (132 - 24) / 3 - 1 = 35 SMs each FFN rank has
# left, so the knob row would test the default; 32 caps it at every split.
SPLIT_KNOB_SETTINGS = tuple(s for s in KNOB_SETTINGS if not s.startswith("EPILOGUE_SMS")) + (
    "EPILOGUE_SMS=32",
)


def matrix_split_knobs() -> list[Run]:
    """Count-first's knobs and ARM=attention at 3A:1F and 1A:3F, the collect view
    in fp8 at 2A:1F (3 ranks), and per-role knobs: one outside the protocol
    (the FFN's wait timeout) that must pass beside one inside it (the FFN
    alone ungated) that every rank must refuse."""
    group = Group.SPLIT_KNOBS
    runs = []
    for ffn_ranks in (1, 3):
        split = ["--ffn-ranks", str(ffn_ranks), *SPLITS[ffn_ranks]]
        for setting in SPLIT_KNOB_SETTINGS:
            name, _, value = setting.partition("=")
            env = {**CF, f"AFDEP_COUNT_FIRST_{name}": value}
            args = [*grid("bf16", "graph"), *split]
            runs.append(passing(f"{split_name(ffn_ranks)}-knob-{name}", args, group, env, 4))
        arm = {**CF, "AFDEP_COUNT_FIRST_ARM": Arm.ATTENTION.value}
        for execution in ("eager", "graph"):
            args = [*grid("bf16", execution), *split]
            name = f"{split_name(ffn_ranks)}-arm-attention-{execution}"
            runs.append(passing(name, args, group, arm, 4))
    for execution in ("eager", "graph"):
        args = [*grid("fp8", execution), "--ffn-ranks", "1", "--collect-view"]
        runs.append(passing(f"2a1f-view-fp8-{execution}", args, group, CF, nproc=3))
    split = ("--ffn-ranks", "1", *SPLITS[1])
    role_knob = ["--role-env", f"{Role.FFN}:AFDEP_TIMEOUT_MS=5000"]
    args = [*failure_args(2, *split), *role_knob]
    runs.append(passing("3a1f-mixed-role-timeout", args, group, CF, nproc=4))
    runs.append(agreement_run("3a1f-disagree", group, nproc=4, extra=split))
    return runs
