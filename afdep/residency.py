"""Can every logical rank's kernels of a step be resident on one GPU at once?
A consumer spins until its producer runs; if the spinning CTAs hold every SM,
the producer never starts and the step hangs until the device timeout. So the
one-GPU mode counts before it launches (docs/architecture.md, "One GPU,
logical ranks"). A pure function of the geometry, the protocols, the epilogue
knob and the SM count.

Every afdep kernel is `__launch_bounds__(kNumThreads, 1)`: one resident CTA per
SM is all it promises (the compiler may give that CTA every register of the
SM), and a CTA's shared memory is at most one SM's (Geometry refuses more).
So each CTA is counted as a whole SM.

A launch that waits on nothing (ffn_combine) need not be resident at once: its
CTAs always finish, and the rest start on the SMs they free. It needs one SM
to make progress, so it counts as one CTA, whatever its grid.

Count-first's streaming epilogue takes every SM its FFN rank can hold beside
what is resident with it, at most AFDEP_COUNT_FIRST_EPILOGUE_SMS (a cap, as
the seed's was): the FFN GPU has nothing else to do while rows arrive
(`epilogue_ctas`). So it always fits, and only --num-sms can make a geometry
too large."""

from __future__ import annotations

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


def role_ctas(
    g: Geometry, role: Role, protocols: tuple[Protocol, ...], epilogue_sms: int | None
) -> int:
    """The most CTAs one rank of `role` holds at once in a step: its dispatch
    kernels, then its combine, under any protocol it may run. (The FFN's
    expert function between them does not spin: it runs on what is free.)"""
    return max(
        concurrent_ctas(
            [*dispatch_launches(g, role, protocol, epilogue_sms), combine_launch(g, role)]
        )
        for protocol in protocols
    )


def epilogue_ctas(
    g: Geometry, protocols: tuple[Protocol, ...], cap: int | None, sm_count: int, shared: bool
) -> int:
    """The streaming epilogue's CTAs on one FFN rank: the SMs of its GPU less
    what is resident beside it (its own dispatch kernel's CTA, before which it
    starts programmatically; with `shared`, every logical rank on this GPU,
    the FFN ranks splitting what is left), at most `cap`, at least 1."""
    others = g.num_attention * role_ctas(g, Role.ATTENTION, protocols, None) if shared else 0
    free = (sm_count - others) // (g.ffn_ranks if shared else 1) - 1
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
    g: Geometry, protocols: tuple[Protocol, ...], epilogue_sms: int | None, sm_count: int
) -> Residency:
    return Residency(
        num_attention=g.num_attention,
        num_ffn=g.ffn_ranks,
        attention_ctas=role_ctas(g, Role.ATTENTION, protocols, epilogue_sms),
        ffn_ctas=role_ctas(g, Role.FFN, protocols, epilogue_sms),
        sm_count=sm_count,
    )


def check_residency(
    g: Geometry, protocols: tuple[Protocol, ...], epilogue_sms: int | None, sm_count: int
) -> Residency:
    """The residency of a step, or ResidencyError naming the geometry."""
    fit = residency(g, protocols, epilogue_sms, sm_count)
    if not fit.fits:
        raise ResidencyError(fit.refusal())
    return fit
