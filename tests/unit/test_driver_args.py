from __future__ import annotations

import pytest

from afdep.testing.driver import parse_args


def test_defaults_and_overrides():
    args = parse_args(["--experts-per-ffn", "32", "--ffn-ranks", "3", "--graph"])
    assert args.num_experts == 96 and args.graph and args.tokens == [1, 8, 128, 512, 2048]
    assert parse_args(
        ["--invalid-route", "wide", "--invalid-execution", "graph", "--tokens", "128"]
    ).graph


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
