"""What the correctness driver's two rank modes share (tools.driver.driver:
a rank per GPU under torchrun; tools.driver.logical: logical ranks on one
GPU): the invalid step, the per-role environment, the rank's log line."""

from __future__ import annotations

import argparse
import os

from afdep.vocab import Protocol, Role, result_line
from invariants.data.inputs import make_source_inputs

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
        make_source_inputs(
            rank=a,
            step=step,
            seed=args.seed,
            capacity=g.capacity,
            hidden=g.hidden,
            top_k=g.top_k,
            num_experts=g.num_experts,
            num_tokens=num_tokens,
            payload=g.payload,
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
