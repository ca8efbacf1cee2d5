"""Deterministic per-step inputs of one attention rank (docs/data-layout.md, "Inputs")."""

from __future__ import annotations

from dataclasses import dataclass

import torch

FP8_BLOCK = 128
FP8_MAX = 448.0  # largest finite float8_e4m3fn value
_AMAX_FLOOR = 1e-4  # keeps all-zero blocks from dividing by zero
_WEIGHT_LOW, _WEIGHT_HIGH = 0.05, 1.0
_PAYLOADS = ("bf16", "fp8")
# A step's rows lie in one of three magnitude bands (log2), by step % 3, and
# are +0 in one of two channels, by step % 2 (`step_rows`).
STEP_BANDS = (-11, 0, 11)  # 2^-11 stays above quantize_fp8's amax floor
PARITY_CHANNELS = (1, 2)
# A geometry's fields that shape a step's inputs (`inputs_of`).
SHAPE_FIELDS = ("capacity", "hidden", "top_k", "num_experts", "payload")


@dataclass
class SourceInputs:
    x: torch.Tensor  # [C, H] bf16 or float8_e4m3fn
    x_scales: torch.Tensor | None  # [C, H/128] fp32, fp8 only
    topk_idx: torch.Tensor  # [C, K] int64, -1 = no expert
    topk_weights: torch.Tensor  # [C, K] fp32
    num_tokens: int

    @property
    def capacity(self) -> int:
        return self.topk_idx.shape[0]

    @property
    def top_k(self) -> int:
        return self.topk_idx.shape[1]

    def to(self, device) -> SourceInputs:
        scales = None if self.x_scales is None else self.x_scales.to(device)
        return SourceInputs(
            self.x.to(device),
            scales,
            self.topk_idx.to(device),
            self.topk_weights.to(device),
            self.num_tokens,
        )


def graph_inputs(geometry, device) -> dict[str, torch.Tensor | None]:
    """Capacity-sized buffers named as `Buffer.dispatch`'s inputs, for a
    geometry (capacity, hidden, top_k, payload): a CUDA graph captures their
    addresses, and each step copies its inputs in (`load_graph_inputs`)."""
    capacity, hidden, top_k = geometry.capacity, geometry.hidden, geometry.top_k
    if geometry.payload not in _PAYLOADS:
        raise ValueError(f"payload must be one of {_PAYLOADS}, got {geometry.payload!r}")
    fp8 = geometry.payload == "fp8"
    return {
        "x": torch.zeros(
            capacity, hidden, dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16, device=device
        ),
        "x_scales": (
            torch.zeros(capacity, hidden // FP8_BLOCK, dtype=torch.float32, device=device)
            if fp8
            else None
        ),
        "topk_idx": torch.full((capacity, top_k), -1, dtype=torch.int64, device=device),
        "topk_weights": torch.zeros(capacity, top_k, dtype=torch.float32, device=device),
        "num_tokens": torch.zeros(1, dtype=torch.int32, device=device),
    }


def load_graph_inputs(buffers: dict[str, torch.Tensor | None], inputs: SourceInputs) -> None:
    """Copy one step's inputs into the buffers `graph_inputs` made."""
    for name in ("x", "x_scales", "topk_idx", "topk_weights"):
        if buffers[name] is not None:
            buffers[name].copy_(getattr(inputs, name))
    buffers["num_tokens"].fill_(inputs.num_tokens)


def quantize_fp8(x_f32: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row and 128-channel block: scale = amax / 448, x_fp8 = x / scale."""
    if x_f32.dim() != 2 or x_f32.shape[1] % FP8_BLOCK != 0:
        raise ValueError(
            f"x_f32 must be [C, H] with H % {FP8_BLOCK} == 0, got shape={tuple(x_f32.shape)}"
        )
    rows, hidden = x_f32.shape
    blocks = x_f32.float().reshape(rows, hidden // FP8_BLOCK, FP8_BLOCK)
    amax = blocks.abs().amax(dim=2).clamp(min=_AMAX_FLOOR)
    scales = amax / FP8_MAX
    x_fp8 = (blocks / scales.unsqueeze(2)).to(torch.float8_e4m3fn)
    return x_fp8.reshape(rows, hidden), scales


def random_routes(
    num_tokens: int,
    capacity: int,
    num_experts: int,
    top_k: int,
    generator: torch.Generator,
    *,
    empty_prob: float = 0.1,
    skew: int | None = None,
    device="cpu",
) -> torch.Tensor:
    """Valid int64 [C, K] routes; padding rows are all -1.

    Random numbers are drawn for every row (padding included) so the stream
    consumed from `generator` depends only on the shape, not on num_tokens.
    """
    if not 0 <= num_tokens <= capacity:
        raise ValueError(f"num_tokens must be in [0, capacity={capacity}], got {num_tokens}")
    if not 0 <= top_k <= num_experts:
        raise ValueError(f"top_k must be in [0, num_experts={num_experts}], got {top_k}")
    if skew is not None and not 0 <= skew < num_experts:
        raise ValueError(f"skew must be an expert id in [0, {num_experts}), got {skew}")
    scores = torch.rand(capacity, num_experts, generator=generator)
    routes = scores.argsort(dim=1, stable=True)[:, :top_k].contiguous()
    if skew is not None and top_k > 0:
        # Swap the skew expert into slot 0 (or overwrite slot 0): rows stay distinct.
        hit = routes == skew
        pos = hit.to(torch.uint8).argmax(dim=1)  # 0 when absent
        rows = torch.arange(capacity)
        skewed = routes.clone()
        skewed[rows, pos] = routes[:, 0]
        skewed[:, 0] = skew
        routes = skewed
    drop = torch.rand(capacity, top_k, generator=generator) < empty_prob
    if skew is not None and top_k > 0:
        drop[:, 0] = False  # the skew is a guarantee, not a tendency
    routes = routes.masked_fill(drop, -1)
    routes[num_tokens:] = -1
    return routes.to(device)


def _step_seed(seed: int, step: int, rank: int) -> int:
    # Odd multipliers mix the three ints; the result only needs to be distinct
    # for the (seed, step, rank) triples a test uses.
    mixed = (seed * 0x9E3779B97F4A7C15 + step) * 0xBF58476D1CE4E5B9 + rank
    return mixed % (1 << 63)


def step_rows(capacity: int, hidden: int, step: int, generator: torch.Generator) -> torch.Tensor:
    """fp32 [C, H] rows that encode `step` (docs/synchronization.md, "Stale data and
    launch skew"): with `band = 2 ** STEP_BANDS[step % 3]`,

    - channel `128 b` (each block's lead) is `±band * [1, 2]`, every other channel
      below `band` in magnitude: the lead is its block's amax, so an fp8 block
      scale lies in `band * [1, 2] / 448` and a partial's channel 0 in
      `band * [2^-5.4, 36]` (top-k <= 8, weights in [0.05, 1), s(e) in [0.5, 2.25]);
      bands 11 binades apart never meet;
    - channel `1 + step % 2` is +0 and channel `2 - step % 2` is `±band * [0.5, 1]`:
      a row, its expert rows, its partials and its combined output are +0 there
      at this step and nonzero at the step before, whatever the routes.
    """
    if hidden < 3:
        raise ValueError(
            f"hidden must be at least 3 (a lead and two parity channels), got {hidden}"
        )
    band = 2.0 ** STEP_BANDS[step % 3]
    rows = (torch.rand(capacity, hidden, generator=generator) * 2 - 1) * band
    blocks = len(range(0, hidden, FP8_BLOCK))
    lead = (1 + torch.rand(capacity, blocks, generator=generator)) * band
    negative = torch.rand(capacity, blocks, generator=generator) < 0.5
    rows[:, ::FP8_BLOCK] = torch.where(negative, -lead, lead)
    kept = (0.5 + 0.5 * torch.rand(capacity, generator=generator)) * band
    zero_channel, kept_channel = PARITY_CHANNELS[step % 2], PARITY_CHANNELS[1 - step % 2]
    rows[:, zero_channel] = 0.0
    rows[:, kept_channel] = torch.where(negative[:, 0], -kept, kept)
    return rows


def step_weights(capacity: int, top_k: int, step: int, generator: torch.Generator) -> torch.Tensor:
    """fp32 [C, K] in [0.05, 1) whose last mantissa bit is `step % 2`: a weight
    from the step before never equals this step's."""
    low = torch.nextafter(torch.tensor(_WEIGHT_LOW), torch.tensor(1.0))
    # uniform_ can round up to the excluded upper bound in fp32.
    high = torch.nextafter(torch.tensor(_WEIGHT_HIGH), torch.tensor(0.0))
    weights = torch.empty(capacity, top_k).uniform_(_WEIGHT_LOW, _WEIGHT_HIGH, generator=generator)
    # From above `low`, clearing the bit stays >= 0.05; below `high`, setting it stays < 1.
    bits = weights.clamp(min=low, max=high).view(torch.int32)
    return ((bits & ~1) | (step % 2)).view(torch.float32)


def make_source_inputs(
    *,
    rank: int,
    step: int,
    seed: int,
    capacity: int,
    hidden: int,
    top_k: int,
    num_experts: int,
    num_tokens: int,
    payload: str,
    device="cpu",
    empty_prob: float = 0.1,
    skew: int | None = None,
) -> SourceInputs:
    """Inputs of attention rank `rank` at `step`, a pure function of its
    arguments; rows, scales and weights encode the step (`step_rows`,
    `step_weights`)."""
    if payload not in _PAYLOADS:
        raise ValueError(f"payload must be one of {_PAYLOADS}, got {payload!r}")
    gen = torch.Generator(device="cpu")
    gen.manual_seed(_step_seed(seed, step, rank))
    topk_idx = random_routes(
        num_tokens, capacity, num_experts, top_k, gen, empty_prob=empty_prob, skew=skew
    )
    weights = step_weights(capacity, top_k, step, gen)
    x_f32 = step_rows(capacity, hidden, step, gen)
    if payload == "bf16":
        x, scales = x_f32.to(torch.bfloat16), None
    else:
        x, scales = quantize_fp8(x_f32)
    inputs = SourceInputs(x, scales, topk_idx, weights, num_tokens)
    return inputs.to(device)


def inputs_of(geometry, *, rank: int, step: int, seed: int, num_tokens: int, device, **options):
    """make_source_inputs in the shape of `geometry` (its SHAPE_FIELDS)."""
    shape = {name: getattr(geometry, name) for name in SHAPE_FIELDS}
    steps = {"rank": rank, "step": step, "seed": seed, "num_tokens": num_tokens}
    return make_source_inputs(**steps, **shape, device=device, **options)
