"""Host-side route validation (docs/data-layout.md, "Route validity").

The device kernel (attention_route) applies the same rules and kind names; with
one invalid entry it reports that entry, so the host check is the oracle the
invalid-route runs compare the device log against.
"""

from __future__ import annotations

import torch

from afdep.vocab import RouteKind

# When one entry breaks several rules, the first kind in this order is reported.
_PRIORITY = (RouteKind.NEGATIVE, RouteKind.WIDE, RouteKind.DUMMY, RouteKind.DUPLICATE)


class InvalidRouteError(ValueError):
    """The first invalid `topk_idx` entry in row-major (token, slot) order."""

    def __init__(self, kind: RouteKind, token: int, slot: int):
        try:
            self.kind = RouteKind(kind)
        except ValueError:
            kinds = [k.value for k in RouteKind]
            raise ValueError(f"kind must be one of {kinds}, got {kind!r}") from None
        self.token = int(token)
        self.slot = int(slot)
        super().__init__(f"route {self.kind} token={self.token} slot={self.slot}")

    def __reduce__(self):
        # Keep the exception picklable across worker processes.
        return (type(self), (self.kind, self.token, self.slot))


def _is_int(value) -> bool:
    # bool is an int subclass, but True as a count is always a bug.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_args(topk_idx, num_experts, num_tokens) -> None:
    if (
        not isinstance(topk_idx, torch.Tensor)
        or topk_idx.dim() != 2
        or topk_idx.dtype != torch.int64
    ):
        got = (
            f"dtype={topk_idx.dtype} ndim={topk_idx.dim()}"
            if isinstance(topk_idx, torch.Tensor)
            else type(topk_idx).__name__
        )
        raise ValueError(f"topk_idx must be a 2-D int64 tensor, got {got}")
    if not _is_int(num_experts) or num_experts <= 0:
        raise ValueError(f"num_experts must be a positive int, got {num_experts!r}")
    capacity = topk_idx.shape[0]
    if not _is_int(num_tokens) or not 0 <= num_tokens <= capacity:
        raise ValueError(
            f"num_tokens must be an int with 0 <= num_tokens <= topk_idx.shape[0]"
            f" (={capacity}), got {num_tokens!r}"
        )


def _violation_masks(
    topk_idx: torch.Tensor, num_experts: int, num_tokens: int
) -> dict[RouteKind, torch.Tensor]:
    """One [C, K] bool mask per kind: the rule holds for that entry."""
    capacity, top_k = topk_idx.shape
    token = torch.arange(capacity, device=topk_idx.device).unsqueeze(1)
    real = topk_idx >= 0
    duplicate = torch.zeros_like(real)
    for k in range(1, top_k):
        seen_before = (topk_idx[:, :k] == topk_idx[:, k : k + 1]).any(dim=1)
        duplicate[:, k] = seen_before
    return {
        RouteKind.NEGATIVE: topk_idx < -1,
        RouteKind.WIDE: topk_idx >= num_experts,
        RouteKind.DUMMY: (token >= num_tokens) & real,
        RouteKind.DUPLICATE: (token < num_tokens) & real & duplicate,
    }


def find_invalid(
    topk_idx: torch.Tensor, num_experts: int, num_tokens: int
) -> tuple[RouteKind, int, int] | None:
    """Return (kind, token, slot) of the first violation, or None if all valid."""
    _check_args(topk_idx, num_experts, num_tokens)
    masks = _violation_masks(topk_idx, num_experts, num_tokens)
    bad = torch.zeros_like(topk_idx, dtype=torch.bool)
    for mask in masks.values():
        bad |= mask
    flat = bad.flatten()
    if flat.numel() == 0 or not bool(flat.any()):
        return None
    # argmax returns the first maximal index; bool is not supported on every device.
    first = int(flat.to(torch.uint8).argmax())
    token, slot = divmod(first, topk_idx.shape[1])
    for kind in _PRIORITY:
        if bool(masks[kind][token, slot]):
            return kind, token, slot
    raise AssertionError("unreachable: a flagged entry matched no kind")


def validate(topk_idx: torch.Tensor, num_experts: int, num_tokens: int) -> None:
    """Raise InvalidRouteError for the first invalid entry; return None otherwise."""
    found = find_invalid(topk_idx, num_experts, num_tokens)
    if found is not None:
        raise InvalidRouteError(*found)
