from __future__ import annotations

import os

import pytest

from afdep.testing.driver import apply_role_env, parse_args, parse_role_env
from afdep.vocab import Role, RouteKind


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
