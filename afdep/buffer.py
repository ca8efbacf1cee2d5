"""The symmetric workspace, roles, and the dispatch()/combine() entry points.

Attention ranks call `dispatch(x, topk_idx, topk_weights, num_tokens)` then
`combine()`; FFN ranks call `dispatch()` (it returns the received rows) then
`combine(y)`. All ranks call both once per step, in that order. Every launch
goes on the current torch stream, so a whole step can be captured in a CUDA
graph: inputs are read from the tensors' memory at replay time, and the step's
epoch lives on the device.

A Buffer's peers are a RankGroup (afdep.ranks): a rank per GPU through
torch.distributed, or logical ranks sharing one GPU in one process
(afdep.logical; docs/synchronization.md, "One GPU, logical ranks").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from afdep.config import Settings, ConfigError, disagreement
from afdep.kernels import Launcher, combine_launch, dispatch_launches
from afdep.ranks import RankGroup, rank_group
from afdep.residency import expansion_ctas
from afdep.step_inputs import FP8, check_expert_outputs, check_source_inputs, step_bucket
from afdep.vocab import Arm, Protocol, Role
from afdep.workspace import Geometry, pack_params, symmetric_layout


@dataclass(frozen=True)
class CollectBatch:
    """One row per received (source, token) (docs/data-layout.md, "Collect view")."""

    x: torch.Tensor
    x_scales: torch.Tensor | None
    src_rank: torch.Tensor
    src_token: torch.Tensor
    local_experts: torch.Tensor
    weights: torch.Tensor
    expert_rows: torch.Tensor


@dataclass(frozen=True)
class FfnBatch:
    """An FFN rank's received rows, expert-major; the first
    `expert_offsets[-1]` rows are this step's (x is None in the collect view)."""

    x: torch.Tensor | None
    x_scales: torch.Tensor | None
    src_rank: torch.Tensor
    src_token: torch.Tensor
    topk_slot: torch.Tensor
    weight: torch.Tensor
    expert_offsets: torch.Tensor
    collect_row: torch.Tensor
    collect: CollectBatch | None


class Buffer:
    def __init__(
        self,
        group=None,
        *,
        num_experts: int,
        hidden: int,
        capacity: int,
        top_k: int,
        payload: str = "bf16",
        ffn_ranks: int = 1,
        num_sms: int = 24,
        collect_view: bool = False,
        config: Settings | None = None,
        sources: Path | None = None,
    ) -> None:
        # `group`: a RankGroup (afdep.ranks: logical ranks pass theirs), else a
        # torch.distributed process group or None for the world. `sources`: the
        # kernel sources to build (default: this package's), e.g. a bench arm's tree.
        self.group = group = rank_group(group)
        self.rank = group.rank
        self._settle_config(config)
        self.geometry = g = Geometry(
            world_size=group.world_size,
            ffn_ranks=ffn_ranks,
            num_experts=num_experts,
            capacity=capacity,
            hidden=hidden,
            top_k=top_k,
            payload=payload,
            collect_view=collect_view,
            num_sms=num_sms,
            arm_attention=Protocol.COUNT_FIRST in self.protocols
            and self.config.arm == Arm.ATTENTION,
        )
        self.role = Role.ATTENTION if self.rank < g.num_attention else Role.FFN
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.layout = symmetric_layout(g)
        self._map_workspace()
        self._allocate_step_state()
        self._params = self._params_block()
        self._load_kernels(sources)
        torch.cuda.synchronize()
        group.barrier()

    # ------------------------------------------------------------------ construction
    def _settle_config(self, config: Settings | None) -> None:
        """This rank's knobs (`config`, else the environment's), checked equal on
        every rank (a collective), and the protocols they let a step pick."""
        self.config = config or Settings.from_env()
        agree_on_config(self.group, self.config)
        self.protocols = (Protocol.PAYLOAD_FIRST,) + (
            (Protocol.COUNT_FIRST,) if self.config.min_bucket else ()
        )

    def _map_workspace(self) -> None:
        """This rank's slice of the symmetric workspace (a rendezvous), zeroed,
        and the device table of every rank's base the kernels reach peers through."""
        workspace = self.group.symmetric_workspace(self.layout["total_bytes"], self.device)
        self._workspace = workspace
        self._symmetric = workspace.local
        self._symmetric.zero_()  # before the closing barrier: no peer writes before it
        self._peer_bases = torch.tensor(workspace.peer_bases, dtype=torch.int64, device=self.device)

    def _allocate_step_state(self) -> None:
        """The device state the kernels keep across a step (the epoch lives here,
        so a captured graph advances it on replay), then this role's outputs."""
        zeros = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=self.device)  # noqa: E731
        g = self.geometry
        a, c, k, h = g.num_attention, g.capacity, g.top_k, g.hidden
        self._epoch = zeros(1, dtype=torch.int64)
        self._num_tokens_used = zeros(1, dtype=torch.int32)
        self._num_tokens_in = zeros(1, dtype=torch.int32)
        self._protocol_log = zeros(1, dtype=torch.int32)
        self._token_ffn_mask = zeros(c, dtype=torch.int32)
        self._slot_epoch = zeros(a * c, dtype=torch.int64)
        self._slot_rows = zeros(a * c * k, dtype=torch.int32)
        self._slot_weights = zeros(a * c * k, dtype=torch.float32)
        self._out = zeros(c, h, dtype=torch.bfloat16) if self.role == Role.ATTENTION else None
        # attention_route's maps, which attention_dispatch reads (attention ranks only)
        attention = self.role == Role.ATTENTION
        self._route_maps = zeros(g.route_map_words, dtype=torch.int32) if attention else None
        self.batch = self._allocate_ffn_outputs(zeros) if self.role == Role.FFN else None

    def _params_block(self) -> torch.Tensor:
        """The Params block every kernel reads, on the device: the workspace's
        offsets, the geometry, the knobs, and the addresses of the step state."""
        g, layout = self.geometry, self.layout
        values = {name: layout[name] for name in layout if name.startswith("off_")}
        values.update(
            rank=self.rank,
            world_size=g.world_size,
            num_attention=g.num_attention,
            num_ffn=g.ffn_ranks,
            num_experts=g.num_experts,
            experts_per_ffn=g.experts_per_ffn,
            capacity=g.capacity,
            source_ctas=g.num_sms,
            timeout_ns=self.config.timeout_ms * 1_000_000,
            counts_stride=g.counts_stride,
            slot_meta_bytes=g.slot_meta_bytes,
            row_bytes=g.row_bytes,
            gate=int(not self.config.ungate),
            ungated_tokens=self.config.ungated_tokens,
            warp_count=self.config.warp_count,
            unit_min_rows=self.config.unit_min_rows,
            collect_view=int(g.collect_view),
            peer_bases=self._peer_bases.data_ptr(),
            epoch=self._epoch.data_ptr(),
            num_tokens=self._num_tokens_used.data_ptr(),
            token_ffn_mask=self._token_ffn_mask.data_ptr(),
            slot_epoch=self._slot_epoch.data_ptr(),
            slot_rows=self._slot_rows.data_ptr(),
            slot_weights=self._slot_weights.data_ptr(),
            protocol_log=self._protocol_log.data_ptr(),
        )
        values.update(self._output_pointers())
        return torch.tensor(pack_params(values), dtype=torch.int64, device=self.device)

    def _load_kernels(self, sources: Path | None) -> None:
        """This role's dispatch kernels under each protocol, and its combine."""
        g = self.geometry
        # The FFN's expansion kernel: the SMs this FFN rank can hold beside what
        # runs with it, at most AFDEP_COUNT_FIRST_EPILOGUE_SMS (count-first) or
        # AFDEP_EXPAND_SMS (payload-first) (afdep/residency.py).
        caps = {
            Protocol.COUNT_FIRST: self.config.epilogue_sms,
            Protocol.PAYLOAD_FIRST: self.config.expand_sms,
        }
        self.expand_ctas = {
            protocol: expansion_ctas(
                g,
                protocol,
                self.protocols,
                caps[protocol],
                device_sm_count(self.device),
                shared=self.group.shares_device,
            )
            for protocol in self.protocols
        }
        self._dispatch_kernels = {
            protocol: [
                Launcher(launch, self.device.index, sources)
                for launch in dispatch_launches(g, self.role, protocol, self.expand_ctas[protocol])
            ]
            for protocol in self.protocols
        }
        self.combine_sms = self.config.combine_sms or device_sm_count(self.device)
        self._combine_kernel = Launcher(
            combine_launch(g, self.role, self.combine_sms), self.device.index, sources
        )

    # ------------------------------------------------------------------ outputs
    def _symmetric_rows(self, offset: str, rows: int, width: int, dtype: torch.dtype):
        """`rows` x `width` elements of the symmetric workspace (ARM=attention rows)."""
        start = self.layout[offset]
        size = rows * width * torch.empty(0, dtype=dtype).element_size()
        return self._symmetric[start : start + size].view(dtype).view(rows, width)

    def _allocate_ffn_outputs(self, zeros) -> FfnBatch:
        g = self.geometry
        rows, crows, h, k, s = g.max_rows, g.max_collect_rows, g.hidden, g.top_k, g.num_scales
        dtype = FP8 if g.payload == "fp8" else torch.bfloat16
        fp8 = g.payload == "fp8"

        def rows_of(count: int):
            """The received rows (and scales): the sources' own target under ARM=attention."""
            if g.arm_attention:
                x = self._symmetric_rows("off_direct_x", count, h, dtype)
                scales = (
                    self._symmetric_rows("off_direct_scales", count, s, torch.float32)
                    if fp8
                    else None
                )
                return x, scales
            return zeros(count, h, dtype=dtype), zeros(
                count, s, dtype=torch.float32
            ) if fp8 else None

        collect = None
        if g.collect_view:
            x, scales = rows_of(crows)
            collect = CollectBatch(
                x=x,
                x_scales=scales,
                src_rank=zeros(crows, dtype=torch.int32),
                src_token=zeros(crows, dtype=torch.int32),
                local_experts=zeros(crows, k, dtype=torch.int32),
                weights=zeros(crows, k, dtype=torch.float32),
                expert_rows=zeros(crows, k, dtype=torch.int32),
            )
        x, scales = (None, None) if g.collect_view else rows_of(rows)
        return FfnBatch(
            x=x,
            x_scales=scales,
            src_rank=zeros(rows, dtype=torch.int32),
            src_token=zeros(rows, dtype=torch.int32),
            topk_slot=zeros(rows, dtype=torch.int32),
            weight=zeros(rows, dtype=torch.float32),
            expert_offsets=zeros(g.experts_per_ffn + 1, dtype=torch.int32),
            collect_row=zeros(rows, dtype=torch.int32),
            collect=collect,
        )

    def _output_pointers(self) -> dict[str, int]:
        ptr = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
        b, c = self.batch, self.batch.collect if self.batch else None
        pointers = {
            "out_x": ptr(b and b.x),
            "out_scales": ptr(b and b.x_scales),
            "out_src_rank": ptr(b and b.src_rank),
            "out_src_token": ptr(b and b.src_token),
            "out_topk_slot": ptr(b and b.topk_slot),
            "out_weight": ptr(b and b.weight),
            "out_expert_offsets": ptr(b and b.expert_offsets),
            "out_collect_row": ptr(b and b.collect_row),
            "col_x": ptr(c and c.x),
            "col_scales": ptr(c and c.x_scales),
            "col_src_rank": ptr(c and c.src_rank),
            "col_src_token": ptr(c and c.src_token),
            "col_local_experts": ptr(c and c.local_experts),
            "col_weights": ptr(c and c.weights),
            "col_expert_rows": ptr(c and c.expert_rows),
        }
        return pointers

    # ------------------------------------------------------------------ steps
    def protocol_for(self, bucket: int) -> Protocol:
        return Protocol.COUNT_FIRST if self.config.count_first(bucket) else Protocol.PAYLOAD_FIRST

    def dispatch(
        self,
        x: torch.Tensor | None = None,
        topk_idx: torch.Tensor | None = None,
        topk_weights: torch.Tensor | None = None,
        num_tokens: int | torch.Tensor | None = None,
        x_scales: torch.Tensor | None = None,
        *,
        bucket: int | None = None,
        skip_send: bool = False,
    ) -> FfnBatch | None:
        """Start a step. `bucket` is the host-known bound on this step's tokens
        that picks the protocol; every rank must pass the same one. It defaults
        to num_tokens when that is an int, else to the capacity. FFN ranks must
        pass it when count-first is configured. `skip_send` (tests only)
        advances the epoch and sends nothing, so the peers' waits must time out
        naming their site."""
        g = self.geometry
        if self.role == Role.FFN:
            if any(t is not None for t in (x, topk_idx, topk_weights, num_tokens, x_scales)):
                raise ValueError("dispatch on an FFN rank takes no inputs")
            if bucket is None and Protocol.COUNT_FIRST in self.protocols:
                raise ValueError(
                    "bucket: FFN ranks must pass the step's bucket when "
                    "AFDEP_COUNT_FIRST_MIN_BUCKET is set"
                )
            bucket = step_bucket(bucket, None, g.capacity)
            self._epoch.add_(1)
            if not skip_send:
                self._launch_ffn_dispatch(bucket)
            return self.batch
        check_source_inputs(g, self.device, x, topk_idx, topk_weights, num_tokens, x_scales)
        count = self._num_tokens_in
        if isinstance(num_tokens, torch.Tensor):
            count = num_tokens
        else:
            count.fill_(num_tokens)
        bucket = step_bucket(bucket, num_tokens, g.capacity)
        if skip_send:
            self._epoch.add_(1)
        else:
            route, send = self._dispatch_kernels[self.protocol_for(bucket)]
            maps = self._route_maps.data_ptr()
            # attention_route advances the epoch, then checks and lays out the routes.
            route(self._params.data_ptr(), topk_idx.data_ptr(), count.data_ptr(), maps)
            send(
                self._params.data_ptr(),
                x.data_ptr(),
                0 if x_scales is None else x_scales.data_ptr(),
                topk_idx.data_ptr(),
                topk_weights.data_ptr(),
                count.data_ptr(),
                maps,
            )
        return None

    def expand_again(self, bucket: int) -> None:
        """Benches only (tools.bench.expand): this FFN rank's dispatch kernels
        once more at the current epoch, with no new step. Every row of it has
        landed, so they pass their waits and write the same output again."""
        if self.role != Role.FFN:
            raise ValueError("expand_again: an FFN rank's kernels, not an attention rank's")
        self._launch_ffn_dispatch(step_bucket(bucket, None, self.geometry.capacity))

    def _launch_ffn_dispatch(self, bucket: int) -> None:
        for kernel in self._dispatch_kernels[self.protocol_for(bucket)]:
            kernel(self._params.data_ptr())

    def combine(self, y: torch.Tensor | None = None) -> torch.Tensor | None:
        """FFN ranks pass `y` (bf16, expert-major rows); attention ranks get
        `out [capacity, hidden]`, rows below this step's num_tokens written."""
        if self.role == Role.ATTENTION:
            if y is not None:
                raise ValueError("combine on an attention rank takes no y")
            self._combine_kernel(self._params.data_ptr(), self._out.data_ptr())
            return self._out
        check_expert_outputs(self.geometry, self.device, y)
        self._combine_kernel(self._params.data_ptr(), y.data_ptr(), y.shape[0])
        return None

    def last_protocol(self) -> Protocol | None:
        """The protocol this rank's kernels recorded for the last dispatch (syncs);
        None until a dispatch has run its kernels on this rank."""
        logged = {1: Protocol.PAYLOAD_FIRST, 2: Protocol.COUNT_FIRST}
        return logged.get(int(self._protocol_log.item()))


def device_sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def agree_on_config(group: RankGroup, config: Settings) -> None:
    """Every rank must run the same protocol knobs: a mismatch fails on every
    rank, naming the knob and each rank's value."""
    problem = disagreement(group.all_gather_object(config.protocol()))
    if problem is not None:
        raise ConfigError(problem)
