"""The driver matrices: every run parses with the driver's own parser into a
geometry the buffer accepts, names are unique, and the 4-GPU matrix covers
the 4-GPU grid."""

from __future__ import annotations

import itertools

import pytest

from afdep.config import COUNT_FIRST_EVERY_BUCKET
from afdep.vocab import RouteKind
from afdep.workspace import Geometry
from tools.driver.driver import parse_args
from tools.driver.parts import buffer_arguments
from tools.validate.matrix import (
    Expect,
    Group,
    Run,
    matrix_2gpu,
    matrix_4gpu,
    matrix_split_knobs,
)
from tools.validate.validation import list_not_run


def geometry_of(run) -> Geometry:
    """The geometry of the Buffer the driver builds from the run's arguments."""
    return Geometry(world_size=run.nproc, **buffer_arguments(parse_args(run.args)))


def test_every_run_is_a_valid_geometry_and_names_are_unique():
    runs = matrix_2gpu() + matrix_4gpu() + matrix_split_knobs()
    assert len({r.name for r in runs}) == len(runs)
    for run in runs:
        geometry_of(run)  # raises ValueError naming the bad field


def test_the_four_gpu_grid_of_issue_e():
    runs = {r.name: r for r in matrix_4gpu()}
    assert all(r.nproc == 4 for r in runs.values())
    for split, protocol, payload, execution in itertools.product(
        ("3a1f", "2a2f", "1a3f"), ("cf", "pf"), ("bf16", "fp8"), ("eager", "graph")
    ):
        run = runs[f"{split}-{protocol}-{payload}-{execution}"]
        assert (run.env == COUNT_FIRST_EVERY_BUCKET) == (protocol == "cf")
        geometry = geometry_of(run)
        assert (geometry.world_size - geometry.ffn_ranks, geometry.ffn_ranks) == (
            int(split[0]),
            int(split[2]),
        )
    assert geometry_of(runs["1a3f-cf-bf16-eager"]).num_experts == 96  # 32 per FFN rank
    assert geometry_of(runs["3a1f-view-fp8-graph"]).collect_view
    assert {(r.expect, r.route) for r in runs.values()} == {
        (Expect.PASS, None),
        (Expect.AGREEMENT, None),
        *((Expect.ROUTE, kind) for kind in RouteKind),
    }
    assert {r.expectation for r in runs.values()} == {
        "pass",
        "agreement",
        "route:negative",
        "route:wide",
        "route:duplicate",
        "route:dummy",
    }
    assert {r.group for r in runs.values()} == {Group.FOUR_GPU}


def test_every_run_is_in_one_group_and_expects_by_enum():
    runs = matrix_2gpu() + matrix_4gpu() + matrix_split_knobs()
    assert {type(r.expect) for r in runs} == {Expect}
    assert {r.group for r in runs} == set(Group)
    assert all(type(r.route) is RouteKind for r in runs if r.expect == Expect.ROUTE)


def test_a_route_kind_goes_with_a_route_run_only():
    with pytest.raises(ValueError) as info:
        Run("x", [], Expect.PASS, Group.FAILURES, route=RouteKind.WIDE)
    assert str(info.value) == "run x: a route kind goes with Expect.ROUTE only"
    with pytest.raises(ValueError):
        Run("y", [], Expect.ROUTE, Group.FAILURES)


def test_runs_a_machine_cannot_hold_are_listed_with_their_gpus(capsys):
    list_not_run(matrix_4gpu()[:2])
    out = capsys.readouterr().out
    assert "2 runs need 4 GPUs (nvidia-h200-x4):" in out
    assert "--nproc-per-node=4" in out and "3a1f-cf-bf16-eager:" in out


def test_the_split_knob_rows():
    runs = {r.name: r for r in matrix_split_knobs()}
    assert {r.group for r in runs.values()} == {Group.SPLIT_KNOBS}
    knobs = ("UNGATED_TOKENS", "UNGATE", "WARP_COUNT", "UNIT_MIN_ROWS", "EPILOGUE_SMS")
    for split in ("3a1f", "1a3f"):
        assert {runs[f"{split}-knob-{k}"].nproc for k in knobs} == {4}
        for execution in ("eager", "graph"):
            assert (
                runs[f"{split}-arm-attention-{execution}"].env["AFDEP_COUNT_FIRST_ARM"]
                == "attention"
            )
    assert runs["1a3f-knob-EPILOGUE_SMS"].env["AFDEP_COUNT_FIRST_EPILOGUE_SMS"] == "32"
    view = geometry_of(runs["2a1f-view-fp8-graph"])
    assert (view.world_size, view.ffn_ranks, view.collect_view, view.payload) == (3, 1, True, "fp8")
    assert runs["3a1f-mixed-role-timeout"].expect == Expect.PASS
    assert runs["3a1f-disagree"].expect == Expect.AGREEMENT
    assert len(runs) == 2 * (len(knobs) + 2) + 4


def test_the_correctness_cells_of_7_sms_run_ffn_expand_and_ffn_combine_on_7_ctas():
    cells = {r.name: r.env for r in matrix_2gpu() if r.group == Group.CORRECTNESS}
    seven = {"AFDEP_EXPAND_SMS": "7", "AFDEP_COMBINE_SMS": "7"}
    assert cells["bf16-graph-h2048-sms7"] == seven
    assert cells["fp8-eager-h7168-sms7"] == seven
    assert cells["bf16-graph-h2048-sms24"] == {}  # the default: every SM
    assert sum(env == seven for env in cells.values()) == 8


def test_fp8_rows_as_wide_as_the_seeds_run_under_both_protocols():
    runs = {r.name: r for r in matrix_2gpu()}
    for name in ("fp8-eager-h8192-sms24", "fp8-graph-h8192-sms24"):
        assert geometry_of(runs[name]).hidden == 8192 and runs[name].env == {}
    for name in ("cf-fp8-eager-h8192", "cf-fp8-graph-h8192"):
        geometry = geometry_of(runs[name])
        assert (geometry.hidden, geometry.payload) == (8192, "fp8")
        assert runs[name].env == COUNT_FIRST_EVERY_BUCKET
