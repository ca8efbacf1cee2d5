"""Geometry of a buffer: its validated shape, the symmetric workspace's byte
layout (identical on every rank) and the Params block the kernels read."""

from __future__ import annotations

from dataclasses import dataclass

# Same names, same order as `struct Params` in csrc/common/params.cuh.
PARAM_FIELDS: tuple[str, ...] = (
    "rank",
    "world_size",
    "num_attention",
    "num_ffn",
    "num_experts",
    "experts_per_ffn",
    "capacity",
    "source_ctas",
    "timeout_ns",
    "off_abort",
    "off_done",
    "off_counts",
    "off_slot_meta",
    "off_slot_rows",
    "off_combine_flags",
    "off_combine_rows",
    "off_count_ready",
    "off_slot_flags",
    "off_prefix_ready",
    "off_placement",
    "off_direct_x",
    "off_direct_scales",
    "counts_stride",
    "slot_meta_bytes",
    "row_bytes",
    "gate",
    "ungated_tokens",
    "warp_count",
    "unit_min_rows",
    "collect_view",
    "peer_bases",
    "epoch",
    "num_tokens",
    "token_ffn_mask",
    "slot_epoch",
    "slot_rows",
    "slot_weights",
    "protocol_log",
    "out_x",
    "out_scales",
    "out_src_rank",
    "out_src_token",
    "out_topk_slot",
    "out_weight",
    "out_expert_offsets",
    "out_collect_row",
    "col_x",
    "col_scales",
    "col_src_rank",
    "col_src_token",
    "col_local_experts",
    "col_weights",
    "col_expert_rows",
)

PAYLOADS = ("bf16", "fp8")
NUM_THREADS = 512
MAX_SHARED_BYTES = 227 * 1024  # per block on sm_90
MAX_WORLD = 32  # FFN masks are 32-bit; abort words carry 7 bits of rank
COUNT_HEADER = 4  # i32 before the per-expert counts of a count-table row (layout.cuh)
INT32_MAX = 2**31 - 1
# kHidden is an int template argument and a bf16 row's bytes, 2 * kHidden, an
# int constant (layout.cuh RowShape): past this they overflow.
MAX_HIDDEN = INT32_MAX // 2


class GeometryError(ValueError):
    """A geometry the kernels cannot hold; `field` and `value` name the culprit."""

    def __init__(self, field: str, value: object, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


def align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class Geometry:
    world_size: int
    ffn_ranks: int
    num_experts: int
    capacity: int
    hidden: int
    top_k: int
    payload: str = "bf16"
    collect_view: bool = False
    num_sms: int = 24
    arm_attention: bool = False  # count-first ARM=attention: sources write the FFN's output rows

    def __post_init__(self) -> None:
        for name in (
            "world_size",
            "ffn_ranks",
            "num_experts",
            "capacity",
            "hidden",
            "top_k",
            "num_sms",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise GeometryError(name, value, f"{name} must be a positive int, got {value!r}")
        if self.payload not in PAYLOADS:
            raise self._refused(
                "payload", f"payload must be one of {PAYLOADS}, got {self.payload!r}"
            )
        if self.world_size > MAX_WORLD:
            raise self._refused(
                "world_size", f"world_size={self.world_size} exceeds {MAX_WORLD} ranks"
            )
        if self.world_size < self.ffn_ranks + 1:
            raise self._refused(
                "world_size",
                f"world_size={self.world_size} is too small for ffn_ranks={self.ffn_ranks} "
                "plus at least one attention rank",
            )
        if self.num_experts % self.ffn_ranks:
            raise self._refused(
                "num_experts",
                f"num_experts={self.num_experts} is not divisible by ffn_ranks={self.ffn_ranks}",
            )
        self._check_hidden()
        if self.top_k > min(32, self.num_experts):
            raise self._refused("top_k", f"top_k={self.top_k} must be <= min(32, num_experts)")
        if self.dispatch_smem_bytes > MAX_SHARED_BYTES:
            raise self._refused(
                "capacity",
                f"capacity={self.capacity} with num_experts={self.num_experts} needs "
                f"{self.dispatch_smem_bytes} bytes of shared memory for the route bitmaps; "
                f"the limit is {MAX_SHARED_BYTES}",
            )

    def _refused(self, field: str, message: str) -> GeometryError:
        return GeometryError(field, getattr(self, field), message)

    def _check_hidden(self) -> None:
        if self.hidden > MAX_HIDDEN:
            raise self._refused(
                "hidden",
                f"hidden={self.hidden} exceeds {MAX_HIDDEN}: the kernels hold a row's "
                "bytes (2 * hidden) in an int32",
            )
        if self.payload == "fp8" and self.hidden % 128:
            raise self._refused(
                "hidden", f"hidden={self.hidden} must be a multiple of 128 for fp8 payloads"
            )
        if self.hidden % 8:
            raise self._refused(
                "hidden", f"hidden={self.hidden} must be a multiple of 8 (16-byte rows)"
            )
        # The fp8 scales of a token are found at token * (hidden / 128), an int
        # (dispatch.cuh write_slot_row).
        if self.capacity * self.num_scales > INT32_MAX:
            raise self._refused(
                "hidden",
                f"hidden={self.hidden} with capacity={self.capacity} makes "
                f"{self.capacity * self.num_scales} fp8 scales; the kernels index them "
                f"in an int32 (at most {INT32_MAX})",
            )

    @property
    def num_attention(self) -> int:
        return self.world_size - self.ffn_ranks

    @property
    def experts_per_ffn(self) -> int:
        return self.num_experts // self.ffn_ranks

    @property
    def payload_bytes(self) -> int:
        return self.hidden if self.payload == "fp8" else 2 * self.hidden

    @property
    def num_scales(self) -> int:
        return self.hidden // 128 if self.payload == "fp8" else 0

    @property
    def row_bytes(self) -> int:
        return align(self.payload_bytes + 4 * self.num_scales, 16)

    @property
    def slot_meta_bytes(self) -> int:
        return align(16 + 12 * self.top_k, 16)  # SlotMeta<kTopK>

    @property
    def counts_stride(self) -> int:
        return align(COUNT_HEADER + self.experts_per_ffn, 4)

    @property
    def max_rows(self) -> int:
        """Rows an FFN rank can receive in one step (expert-major view)."""
        return self.num_attention * self.capacity * min(self.top_k, self.experts_per_ffn)

    @property
    def max_collect_rows(self) -> int:
        return self.num_attention * self.capacity

    @property
    def placement_ints(self) -> int:
        a, e = self.num_attention, self.experts_per_ffn
        return a + (a + 1) + (e + 1) + e * a  # common/dispatch.cuh placement_ints

    @property
    def token_words(self) -> int:
        """Words of 32 tokens that hold the capacity: one bit per token."""
        return -(-self.capacity // 32)

    @property
    def route_map_words(self) -> int:
        """The route maps attention_route writes: a map per expert and per FFN
        rank, of bitmap_words(capacity) u32 words (odd: common/dispatch.cuh)."""
        return (self.num_experts + self.ffn_ranks) * (self.token_words | 1)

    @property
    def route_ctas(self) -> int:
        """attention_route's grid: a warp per word of tokens (32 tokens)."""
        return -(-self.token_words // (NUM_THREADS // 32))

    @property
    def route_smem_bytes(self) -> int:
        """Each warp's own word of every map."""
        return NUM_THREADS // 32 * (self.num_experts + self.ffn_ranks) * 4

    @property
    def dispatch_smem_bytes(self) -> int:
        """Route bitmaps and their prefix sums, then ARM=attention's remote bases."""
        return 2 * self.route_map_words * 4 + 4 * (self.num_experts + self.ffn_ranks)

    @property
    def epilogue_smem_bytes(self) -> int:
        return 4 * (self.placement_ints + self.experts_per_ffn)

    @property
    def direct_rows(self) -> int:
        """Rows the sources write directly under ARM=attention (0 otherwise)."""
        if not self.arm_attention:
            return 0
        return self.max_collect_rows if self.collect_view else self.max_rows


def symmetric_layout(g: Geometry) -> dict[str, int]:
    """Byte offsets of each region of the symmetric workspace, and its total size."""
    a, f, c = g.num_attention, g.ffn_ranks, g.capacity
    sizes = {
        "off_abort": 8,
        "off_done": 8 * a,
        "off_counts": 4 * a * g.counts_stride,
        "off_slot_meta": a * c * g.slot_meta_bytes,
        "off_slot_rows": a * c * g.row_bytes,
        "off_combine_flags": 8 * f * c,
        "off_combine_rows": 2 * f * c * g.hidden,
        "off_count_ready": 8 * a,
        "off_slot_flags": 8 * a * c,
        "off_prefix_ready": 8,
        "off_placement": 4 * g.placement_ints,
        "off_direct_x": g.direct_rows * g.payload_bytes,
        "off_direct_scales": g.direct_rows * 4 * g.num_scales,
    }
    layout, offset = {}, 0
    for name, size in sizes.items():
        layout[name] = offset
        offset = align(offset + size, 256)  # own cache lines: flags never share with data
    layout["total_bytes"] = offset
    return layout


def pack_params(values: dict[str, int]) -> list[int]:
    """The Params block as a list in field order; every field must be given."""
    missing = [name for name in PARAM_FIELDS if name not in values]
    extra = sorted(set(values) - set(PARAM_FIELDS))
    if missing or extra:
        raise ValueError(f"Params fields: missing {missing}, unknown {extra}")
    return [int(values[name]) for name in PARAM_FIELDS]
