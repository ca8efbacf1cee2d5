"""What the correctness driver's two rank modes share (tools.driver.driver:
a rank per GPU under torchrun; tools.driver.logical: logical ranks on one
GPU): the invalid step, the per-role environment, a rank's Buffer from the
arguments, a step's inputs, the rank's log line and the run's summary."""

from __future__ import annotations

import argparse
import os
import time

import afdep
from afdep.vocab import Protocol, Role, result_line
from invariants.data.inputs import inputs_of

INVALID_STEP = 1  # one valid step runs first, so the pipeline is warm when it breaks
ROLES = [role.value for role in Role]


def protocol_name(protocol: Protocol | None) -> str:
    """As the summary's `protocols` spells it: `none` when no dispatch recorded one."""
    return "none" if protocol is None else protocol.value


def parse_role_env(item: str) -> tuple[Role, str, str]:
    """`ROLE:VAR=VALUE` as (role, variable, value); ValueError naming the item."""
    role, _, assignment = item.partition(":")
    name, eq, value = assignment.partition("=")
    if role not in ROLES or not eq or not name:
        raise ValueError(f"--role-env {item!r}: expected {'|'.join(ROLES)}:VAR=VALUE")
    return Role(role), name, value


def log(rank: int, message: str) -> None:
    print(f"[rank {rank}] {message}", flush=True)


def role_of(rank: int, world_size: int, ffn_ranks: int) -> Role:
    return Role.ATTENTION if rank < world_size - ffn_ranks else Role.FFN


def apply_role_env(args: argparse.Namespace, rank: int, world_size: int) -> None:
    role = role_of(rank, world_size, args.ffn_ranks)
    for target, name, value in map(parse_role_env, args.role_env):
        if target == role:
            os.environ[name] = value


def step_sources(args: argparse.Namespace, g, device, step: int, num_tokens: int) -> list:
    """Every attention rank's inputs of `step` (step-encoded: inputs.py), the
    same in both rank modes."""
    return [
        inputs_of(
            g,
            rank=a,
            step=step,
            seed=args.seed,
            num_tokens=num_tokens,
            device=device,
            empty_prob=args.empty_prob,
            skew=args.route_skew,
        )
        for a in range(g.num_attention)
    ]


def failure_line(rank: int, error: BaseException, digest: str) -> str:
    """A failed rank's result line (a CUDA error leaves the context unusable:
    the rank reports this and exits at once)."""
    failure = {
        "ok": False,
        "rank": rank,
        "error": f"{type(error).__name__}: {error}"[:800],
        "native_source_sha256": digest,
    }
    return result_line(failure)


def buffer_arguments(args: argparse.Namespace) -> dict:
    return {
        "num_experts": args.num_experts,
        "hidden": args.hidden_size,
        "capacity": args.capacity,
        "top_k": args.top_k,
        "payload": args.payload,
        "ffn_ranks": args.ffn_ranks,
        "num_sms": args.num_sms,
        "collect_view": args.collect_view,
    }


def run_summary(ranks: list[dict], digest: str, mode, label: str, args, config, started: float):
    """The run's result, over every rank's: what `AFDEP_RESULT` says (its
    checks and mismatches summed, the tree that ran, the mode, the config)."""
    return {
        "ok": all(r["mismatches"] == 0 for r in ranks),
        "checks": sum(r["checks"] for r in ranks),
        "mismatches": sum(r["mismatches"] for r in ranks),
        "native_source_sha256": digest,
        "afdep_file": afdep.__file__,
        "mode": mode,
        "rank_mode": label,
        "config": {**vars(args), "afdep": config.__dict__},
        "wall_s": round(time.perf_counter() - started, 3),
        "ranks": ranks,
    }
