from __future__ import annotations

import os

import pytest

from afdep.vocab import Role, RouteKind
from tools.driver.driver import apply_role_env, parse_args, parse_role_env
from tools.driver.skew import LaunchSkew


def test_defaults_and_overrides():
    args = parse_args(["--experts-per-ffn", "32", "--ffn-ranks", "3", "--graph"])
    assert args.num_experts == 96 and args.graph and args.tokens == [1, 8, 128, 512, 2048]
    invalid = parse_args(
        ["--invalid-route", "wide", "--invalid-execution", "graph", "--tokens", "128"]
    )
    assert invalid.graph and invalid.invalid_route is RouteKind.WIDE


@pytest.mark.parametrize(
    "argv",
    [
        ["--invalid-route", "dummy", "--tokens", "2048"],
        ["--invalid-route", "dummy", "--tokens", "8", "--steps", "1"],
        ["--steps", "0"],
        ["--invalid-route", "bogus"],
    ],
)
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_role_env_names_a_role_a_variable_and_a_value():
    assert parse_role_env("ffn:AFDEP_COUNT_FIRST_UNGATE=1") == (
        Role.FFN,
        "AFDEP_COUNT_FIRST_UNGATE",
        "1",
    )
    assert parse_role_env("attention:AFDEP_X=a=b") == (Role.ATTENTION, "AFDEP_X", "a=b")
    args = parse_args(["--role-env", "ffn:AFDEP_X=1"])
    assert args.role_env == ["ffn:AFDEP_X=1"]  # the summary records it as written


@pytest.mark.parametrize("item", ["gpu:AFDEP_X=1", "ffn:AFDEP_X", "ffn:=1", "AFDEP_X=1"])
def test_a_bad_role_env_is_refused_naming_it(item, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(["--role-env", item])
    assert info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == (f"afdep drive: error: --role-env {item!r}: expected attention|ffn:VAR=VALUE")


@pytest.mark.parametrize("rank, value", [(0, None), (1, None), (2, "1")])
def test_role_env_reaches_only_its_role(monkeypatch, rank, value):
    monkeypatch.setenv("AFDEP_X", "")  # so monkeypatch removes what the driver sets
    monkeypatch.delenv("AFDEP_X")
    args = parse_args(["--ffn-ranks", "1", "--role-env", "ffn:AFDEP_X=1"])
    apply_role_env(args, rank, world_size=3)
    assert os.environ.get("AFDEP_X") == value


def test_launch_skew_is_seeded_by_default_from_the_seed():
    args = parse_args(["--seed", "4"])
    assert args.skew is LaunchSkew.SEEDED and args.skew_seed == 4
    assert parse_args(["--skew-seed", "9"]).skew_seed == 9
    off = parse_args(["--skew", "off"])
    assert off.skew is LaunchSkew.OFF and off.skew_seed is None
    assert parse_args(["--route-skew", "5"]).route_skew == 5


@pytest.mark.parametrize(
    "argv, error",
    [
        (
            ["--skew", "bogus"],
            "argument --skew: invalid choice: 'bogus' (choose from 'off', 'seeded')",
        ),
        (["--skew-seed", "-1"], "argument --skew-seed: at least 0, got -1"),
        (["--skew-seed", "x"], "argument --skew-seed: an integer, got 'x'"),
        (["--skew", "off", "--skew-seed", "3"], "--skew-seed needs --skew seeded"),
        (["--route-skew", "x"], "argument --route-skew: invalid int value: 'x'"),
    ],
)
def test_a_bad_skew_option_is_refused_naming_it(argv, error, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err == f"afdep drive: error: {error}\n"
