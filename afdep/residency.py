"""Can every logical rank's kernels of a step be resident on one GPU at once?
A consumer spins until its producer runs; if the spinning CTAs hold every SM,
the producer never starts and the step hangs until the device timeout. So the
one-GPU mode counts before it launches (docs/synchronization.md, "One GPU,
logical ranks"). A pure function of the geometry, the protocols, the
expansion grids and the SM count.

Every afdep kernel is `__launch_bounds__(kNumThreads, 1)`: one resident CTA per
SM is all it promises (the compiler may give that CTA every register of the
SM), and a CTA's shared memory is at most one SM's (Geometry refuses more).
So each CTA is counted as a whole SM.

A launch that waits on nothing (ffn_combine) need not be resident at once: its
CTAs always finish, and the rest start on the SMs they free. It needs one SM
to make progress, so it counts as one CTA, whatever its grid.

The FFN rank's expansion kernel (count-first's streaming epilogue,
payload-first's ffn_expand) takes every SM its FFN rank can hold beside what
is resident with it, at most a cap (AFDEP_COUNT_FIRST_EPILOGUE_SMS, as the
seed's was; AFDEP_EXPAND_SMS): the FFN GPU has nothing else to do while rows
arrive (`expansion_ctas`). So it always fits, and only --num-sms can make a
geometry too large."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from afdep.kernels import Launch, combine_launch, dispatch_launches
from afdep.vocab import Protocol, Role
from afdep.workspace import Geometry


class ResidencyError(ValueError):
    """A geometry whose logical ranks cannot all be resident on this GPU."""


def concurrent_ctas(launches: list[Launch]) -> int:
    """The most CTAs of one stream's launches resident at once: a launch starts
    after the one before it ends, unless it is programmatic (PDL), which may
    start while its predecessor still runs. A launch that waits on nothing
    counts as one CTA (the module's docstring says why)."""
    most = running = 0
    for launch in launches:
        ctas = launch.grid if launch.waits else 1
        running = running + ctas if launch.programmatic else ctas
        most = max(most, running)
    return most


ExpandGrids = Mapping[Protocol, int]  # the FFN expansion kernel's CTAs per protocol


def role_ctas(
    g: Geometry, role: Role, protocols: tuple[Protocol, ...], expand: ExpandGrids | None
) -> int:
    """The most CTAs one rank of `role` holds at once in a step: its dispatch
    kernels, then its combine, under any protocol it may run. (The FFN's
    expert function between them does not spin: it runs on what is free.)
    `expand`: the FFN expansion grids; a protocol left out runs on num_sms."""
    return max(
        concurrent_ctas(
            [
                *dispatch_launches(g, role, protocol, (expand or {}).get(protocol)),
                combine_launch(g, role),
            ]
        )
        for protocol in protocols
    )


def expansion_ctas(
    g: Geometry,
    protocol: Protocol,
    protocols: tuple[Protocol, ...],
    cap: int | None,
    sm_count: int,
    shared: bool,
) -> int:
    """The CTAs of one FFN rank's expansion kernel under `protocol`: the SMs of
    its GPU less what is resident beside it (count-first: its ffn_place CTA,
    before which the epilogue starts programmatically; with `shared`, every
    logical rank on this GPU, the FFN ranks splitting what is left), at most
    `cap`, at least 1."""
    others = g.num_attention * role_ctas(g, Role.ATTENTION, protocols, None) if shared else 0
    beside = 1 if protocol == Protocol.COUNT_FIRST else 0
    free = (sm_count - others) // (g.ffn_ranks if shared else 1) - beside
    return max(1, free if cap is None else min(cap, free))


@dataclass(frozen=True)
class Residency:
    num_attention: int
    num_ffn: int
    attention_ctas: int  # per attention rank
    ffn_ctas: int  # per FFN rank
    sm_count: int

    @property
    def total(self) -> int:
        return self.num_attention * self.attention_ctas + self.num_ffn * self.ffn_ctas

    @property
    def fits(self) -> bool:
        return self.total <= self.sm_count

    def refusal(self) -> str:
        """The one-line error for a geometry that does not fit."""
        a, f = self.num_attention, self.num_ffn
        return (
            f"one-GPU mode: {a}A:{f}F needs {a}×{self.attention_ctas} (attention) + "
            f"{f}×{self.ffn_ctas} (ffn) = {self.total} CTAs resident at once; "
            f"the GPU has {self.sm_count} SMs: lower --num-sms"
        )


def residency(
    g: Geometry, protocols: tuple[Protocol, ...], expand: ExpandGrids | None, sm_count: int
) -> Residency:
    return Residency(
        num_attention=g.num_attention,
        num_ffn=g.ffn_ranks,
        attention_ctas=role_ctas(g, Role.ATTENTION, protocols, expand),
        ffn_ctas=role_ctas(g, Role.FFN, protocols, expand),
        sm_count=sm_count,
    )


def check_residency(
    g: Geometry, protocols: tuple[Protocol, ...], expand: ExpandGrids | None, sm_count: int
) -> Residency:
    """The residency of a step, or ResidencyError naming the geometry."""
    fit = residency(g, protocols, expand, sm_count)
    if not fit.fits:
        raise ResidencyError(fit.refusal())
    return fit
