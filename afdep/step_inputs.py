"""A step's inputs as the host checks them before any launch: an attention
rank's dispatch() arguments, an FFN rank's combine() rows, and the bucket that
picks the step's protocol. Each check raises ValueError naming the argument;
routes themselves are checked on the device."""

from __future__ import annotations

import torch

from afdep.workspace import Geometry

FP8 = torch.float8_e4m3fn


def step_bucket(bucket, num_tokens, capacity: int) -> int:
    """The host-known bound that picks a step's protocol, the same rule on
    every rank: `bucket` when given (0 included), else an int `num_tokens`,
    else the capacity. ValueError naming `bucket` when it is not in range."""
    if bucket is None:
        bucket = num_tokens if isinstance(num_tokens, int) else capacity
    if not isinstance(bucket, int) or isinstance(bucket, bool) or not 0 <= bucket <= capacity:
        raise ValueError(f"bucket={bucket!r} must be an int in [0, capacity={capacity}]")
    return bucket


def check_source_inputs(
    g: Geometry, device: torch.device, x, topk_idx, topk_weights, num_tokens, x_scales
) -> None:
    """An attention rank's step inputs, checked on the host: ValueError naming
    the argument (routes themselves are checked on the device)."""
    c, h, k = g.capacity, g.hidden, g.top_k
    if g.payload == "fp8":
        _check_tensor("x", x, FP8, (c, h), device)
        _check_tensor("x_scales", x_scales, torch.float32, (c, h // 128), device)
    else:
        _check_tensor("x", x, torch.bfloat16, (c, h), device)
        if x_scales is not None:
            raise ValueError("x_scales is only for fp8 payloads")
    _check_tensor("topk_idx", topk_idx, torch.int64, (c, k), device)
    _check_tensor("topk_weights", topk_weights, torch.float32, (c, k), device)
    if isinstance(num_tokens, torch.Tensor):
        _check_tensor("num_tokens", num_tokens, torch.int32, (1,), device)
    elif not isinstance(num_tokens, int) or isinstance(num_tokens, bool):
        raise ValueError(f"num_tokens must be an int or an int32 tensor, got {num_tokens!r}")
    elif not 0 <= num_tokens <= c:
        raise ValueError(f"num_tokens={num_tokens} must lie in [0, capacity={c}]")


def check_expert_outputs(g: Geometry, device: torch.device, y) -> None:
    """An FFN rank's expert outputs: bf16 rows of `hidden`, expert-major."""
    _check_tensor("y", y, torch.bfloat16, None, device)
    if y.dim() != 2 or y.shape[1] != g.hidden or y.shape[0] < 1:
        raise ValueError(f"y must have shape [rows, {g.hidden}], got {list(y.shape)}")


def _check_tensor(name, t, dtype, shape, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {t.dtype}")
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {list(shape)}, got {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} must be on {device}, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
