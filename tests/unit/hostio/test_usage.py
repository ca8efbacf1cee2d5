"""hostio.usage: a parser's options as one-line errors."""

from __future__ import annotations

from enum import Enum

import pytest

from hostio import OneLineParser


class Protocol(str, Enum):
    PAYLOAD_FIRST = "payload-first"
    COUNT_FIRST = "count-first"


def test_some_of_takes_any_of_its_choices_and_defaults_to_every_one(capsys):
    parser = OneLineParser(prog="p")
    parser.add_some_of("--protocol", Protocol)
    parser.add_some_of("--view", ("expanded", "collect"))
    assert vars(parser.parse_args([])) == {
        "protocol": ["payload-first", "count-first"],
        "view": ["expanded", "collect"],
    }
    assert parser.parse_args(["--view", "collect"]).view == ["collect"]
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--protocol", "other"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.startswith("p: error: argument --protocol: invalid choice")
