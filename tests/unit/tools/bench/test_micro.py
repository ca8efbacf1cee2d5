"""The micro-benches' bounds on the CPU: each card's datasheet figures picked
from the name CUDA gives it, an unknown card refused in one line before any
GPU work, and the figures a report's head carries."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from hostio import UsageError
from tools.bench import combine, dispatch, expand, micro, timing
from tools.bench.micro import (
    DATASHEET_BOUNDS,
    CardBounds,
    card_bounds,
    document_bounds,
    hbm_rate,
    nvlink_rate,
)

H100_SXM = "NVIDIA H100 80GB HBM3"


def test_an_h100_sxm_is_bound_by_hbm3_at_3_35_tbps_and_nvlink_at_450_gbps_each_way():
    assert card_bounds(H100_SXM) == CardBounds(
        card="H100 SXM",
        hbm_gbps=3350,
        nvlink_gbps_per_direction=450,
        hbm_source="H100 datasheet, SXM5 HBM3",
        nvlink_source="H100 datasheet, SXM5: 900 GB/s bidirectional",
    )


def test_an_h200_is_bound_by_hbm3e_at_4_8_tbps_and_nvlink_at_450_gbps_each_way():
    assert card_bounds("NVIDIA H200") == CardBounds(
        card="H200",
        hbm_gbps=4800,
        nvlink_gbps_per_direction=450,
        hbm_source="H200 datasheet, HBM3e",
        nvlink_source="H200 datasheet: 900 GB/s bidirectional",
    )


@pytest.mark.parametrize(
    "name, card, hbm_gbps, nvlink_gbps",
    [
        ("NVIDIA H100 NVL", "H100 NVL", 3900, 300),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000, 300),
        (" NVIDIA H200\n", "H200", 4800, 450),  # the name's surrounding blanks aside
    ],
)
def test_the_other_h100s_have_their_own_figures(name, card, hbm_gbps, nvlink_gbps):
    bounds = card_bounds(name)
    assert (bounds.card, bounds.hbm_gbps, bounds.nvlink_gbps_per_direction) == (
        card,
        hbm_gbps,
        nvlink_gbps,
    )


@pytest.mark.parametrize(
    "name",
    ["NVIDIA A100-SXM4-80GB", "NVIDIA H100", "NVIDIA H100 94GB HBM3", "NVIDIA GH200 480GB", ""],
)
def test_a_card_without_datasheet_bounds_is_refused_naming_it(name):
    """Another SKU of a known GPU (other memory, other bandwidth) is refused too."""
    with pytest.raises(UsageError) as caught:
        card_bounds(name)
    assert str(caught.value) == (
        f"GPU {name!r}: no datasheet bounds in tools/bench/micro.py (known: NVIDIA H200, "
        "NVIDIA H100 80GB HBM3, NVIDIA H100 NVL, NVIDIA H100 PCIe)"
    )


@pytest.mark.parametrize("name", list(DATASHEET_BOUNDS))
def test_each_nvlink_source_states_twice_the_per_direction_figure_both_ways(name):
    bounds = DATASHEET_BOUNDS[name]
    both_ways = f"{2 * bounds.nvlink_gbps_per_direction:g} GB/s bidirectional"
    assert both_ways in bounds.nvlink_source
    assert bounds.hbm_source.startswith(f"{bounds.card.split()[0]} datasheet, ")


def test_the_rates_are_stated_as_the_datasheets_state_them():
    h100, h200 = card_bounds(H100_SXM), card_bounds("NVIDIA H200")
    assert (hbm_rate(h100), hbm_rate(h200)) == ("3.35 TB/s", "4.8 TB/s")
    assert hbm_rate(card_bounds("NVIDIA H100 PCIe")) == "2 TB/s"
    assert nvlink_rate(h100) == "450 GB/s per direction"
    assert nvlink_rate(card_bounds("NVIDIA H100 NVL")) == "300 GB/s per direction"


def test_the_bounds_a_head_carries_come_back_from_its_json():
    bounds = card_bounds(H100_SXM)
    document = json.loads(json.dumps({"bounds": asdict(bounds)}))
    assert document["bounds"]["card"] == "H100 SXM"
    assert document_bounds(document) == bounds


@pytest.mark.parametrize(
    "bench, prog",
    [
        (combine, "python -m tools.bench.combine"),
        (dispatch, "python -m tools.bench.dispatch"),
        (expand, "python -m tools.bench.expand"),
    ],
)
def test_an_unknown_card_is_one_line_before_any_gpu_work(
    bench, prog, one_gpu_named, monkeypatch, capsys, tmp_path
):
    one_gpu_named("NVIDIA A100-SXM4-80GB")

    def gpu_work(args):
        raise AssertionError("the node floor was measured on a card without bounds")

    monkeypatch.setattr(timing, "node_floor_us", gpu_work)
    assert bench.main(["--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"{prog}: error: GPU 'NVIDIA A100-SXM4-80GB': no datasheet bounds in "
        "tools/bench/micro.py (known: NVIDIA H200, NVIDIA H100 80GB HBM3, NVIDIA H100 NVL, "
        "NVIDIA H100 PCIe)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_head_carries_the_card_that_ran_and_its_notes(one_gpu_named, tmp_path):
    one_gpu_named(H100_SXM)
    args = expand.checked_arguments(["--results-dir", str(tmp_path)])
    document = micro.start(args, expand.notes)
    assert (document["machine"], document["rank_mode"]) == ("1xH100", "1xH100, 2 logical ranks")
    assert document["node_floor_us"] == 2.5
    assert document["bounds"] == {
        "card": "H100 SXM",
        "hbm_gbps": 3350,
        "nvlink_gbps_per_direction": 450,
        "hbm_source": "H100 datasheet, SXM5 HBM3",
        "nvlink_source": "H100 datasheet, SXM5: 900 GB/s bidirectional",
    }
    assert document["notes"][0].startswith(
        "HBM bound: the read and written bytes at 3.35 TB/s (H100 datasheet, SXM5 HBM3); "
    )
    assert list(document)[-3:] == ["bounds", "notes", "rows"]
