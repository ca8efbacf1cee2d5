"""Per-kernel traces: names shortened, replays split, ranks aligned on rank 0."""

from __future__ import annotations

import pytest

from tools.bench.traces import aligned_lines, short_name, split_replays


def test_short_names():
    assert (
        short_name(
            "void afdep::attention_dispatch<2048, 8, false, true, false, 512>(afdep::Params)"
        )
        == "attention_dispatch"
    )
    assert short_name("ffn_combine") == "ffn_combine"


def replay(base: int, swap: bool) -> tuple[list, list]:
    """Rank 0: dispatch then combine; rank 1: a dispatch and its PDL epilogue
    that start together (their order swaps), then combine. ns from `base`."""
    rank0 = [
        ("attention_dispatch", base, base + 20_000),
        ("attention_combine", base + 21_000, base + 60_000),
    ]
    pair = [
        ("ffn_place", base + 500, base + 19_000),
        ("ffn_stream_expand", base + 600, base + 25_000),
    ]
    if swap:
        pair.reverse()
    rank1 = [*pair, ("ffn_combine", base + 26_000, base + 59_000)]
    return rank0, rank1


def test_ranks_align_on_rank_zero_and_pdl_swaps_do_not_matter():
    rank0, rank1 = [], []
    for i, base in enumerate((1_000_000, 1_100_000, 1_200_000)):
        r0, r1 = replay(base, swap=i == 1)
        rank0 += r0
        rank1 += sorted(r1, key=lambda s: s[1]) if i != 1 else r1
    lines = aligned_lines("CF T=512", [rank0, rank1], 3)
    assert lines == [
        "## CF T=512",
        "anchor rank 0 first kernel start = 0; period median 100.00 us",
        " rank0 0:attention_dispatch start 0.00 end 20.00 dur 20.00",
        " rank0 1:attention_combine start 21.00 end 60.00 dur 39.00",
        " rank1 0:ffn_place start 0.50 end 19.00 dur 18.50",
        " rank1 1:ffn_stream_expand start 0.60 end 25.00 dur 24.40",
        " rank1 2:ffn_combine start 26.00 end 59.00 dur 33.00",
    ]


def test_spans_that_do_not_split_into_replays_are_an_error():
    with pytest.raises(ValueError, match="rank 1: 5 GPU activities do not split into 2 replays"):
        split_replays([("k", 0, 1)] * 5, 2, rank=1)


def test_when_any_rank_lacks_the_profiler_all_skip_the_barrier(monkeypatch):
    import torch

    from tools.bench.traces import ProfilerUnavailable, record_spans

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # no GPU in CI
    called = []
    with pytest.raises(ProfilerUnavailable):
        record_spans(
            lambda: called.append("run"),
            3,
            all_agree=lambda started: False,  # some rank could not start its profiler
            start_together=lambda: called.append("barrier"),
        )
    assert called == []  # no collective and no replay that the other ranks skip
