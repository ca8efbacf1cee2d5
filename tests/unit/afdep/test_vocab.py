from __future__ import annotations

import json
import re
import sys
import time

import pytest

from afdep.jit import CSRC
from afdep.vocab import (
    ASSERTION,
    MISMATCH,
    RESULT,
    TIMEOUT,
    Arm,
    Protocol,
    Role,
    RouteKind,
    Word,
    digest_line,
    parse_log,
    result_line,
)
from hostio import run_logged

COMM = (CSRC / "common" / "comm.cuh").read_text()

DIGEST = "a" * 64
LOG = f"""\
[default0]:"native_source_sha256": "{DIGEST}"
[default0]:[rank 0] Mismatched out rank=0 step=1 tokens=8: 3 elements differ
[default1]:afdep assertion failed: route dummy token=128 slot=0 (detected on rank 0, seen on rank 1)
[default0]:afdep assertion failed: route dummy token=128 slot=0 rank=0
[default1]:afdep timeout: site=pf.ffn_expand.done_wait rank=1 expected=48 seen=24
[default1]:AFDEP_RESULT {{"ok": false, "rank": 1, "error": "x"}}
[default0]:AFDEP_RESULT {{"ok": false, "checks": 3, "ranks": []}}
[default1]:AFDEP_SKEW step=2 rank=1 cycles=41234
"""


def test_parse_log_reads_every_line_kind():
    facts = parse_log(LOG)
    assert facts.mismatches == 1
    assert facts.timeouts == [("pf.ffn_expand.done_wait", 1)]
    assert facts.route_asserts == [("dummy", 128, 0, 1), ("dummy", 128, 0, 0)]
    assert len(facts.assertions) == 2
    assert facts.digests == [DIGEST]
    assert facts.final_result == {"ok": False, "checks": 3, "ranks": []}
    assert facts.skews == [(2, 1, 41234)]


def test_parse_log_without_summary_returns_the_last_failure():
    facts = parse_log('AFDEP_RESULT {"ok": false, "rank": 0}\nAFDEP_RESULT {not json}\n')
    assert facts.final_result == {"unparsed": "{not json}"}
    assert parse_log("").final_result is None


def test_run_logged_records_exit_and_log_hash(tmp_path):
    outcome = run_logged(
        [sys.executable, "-c", "print('hello'); raise SystemExit(3)"],
        tmp_path / "a.log",
        timeout_s=30,
    )
    assert outcome.exit_code == 3 and not outcome.outer_timeout
    assert (tmp_path / "a.log").read_text() == "hello\n"
    assert len(outcome.log_sha256) == 64


def test_outer_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "child-survived"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w').close()\n")
    script = (
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\n"
        "time.sleep(60)\n"
    )
    started = time.perf_counter()
    outcome = run_logged([sys.executable, "-c", script], tmp_path / "b.log", timeout_s=1)
    assert outcome.outer_timeout and outcome.exit_code is None
    assert time.perf_counter() - started < 10
    time.sleep(4)
    assert not marker.exists()


def test_the_device_strings_are_the_kernels_own():
    """The words the host reads are the ones common/comm.cuh prints."""
    assert f'"{TIMEOUT} site=' in COMM
    assert f'"{ASSERTION}: ' in COMM
    assert f'"{ASSERTION}: route %s token=' in COMM
    names = re.findall(r'return "(\w+)";', COMM[COMM.index("route_kind_name") :])
    assert names == [kind.value for kind in RouteKind]


def printed(fmt: str, *values) -> str:
    """`fmt` as the device's printf writes it with `values`."""
    parts = re.split(r"%(?:llu|u|d|s)", fmt)
    assert len(parts) == len(values) + 1, fmt
    return "".join(part + str(value) for part, value in zip(parts, [*values, ""], strict=True))


def test_every_line_the_kernels_print_is_parsed():
    """Each complete printf format in comm.cuh, filled in, reads back as its facts."""
    # Distinct formats: the weaker twins of wait_until (docs/operators.md,
    # "Mutation operators") print its timeout line as it does.
    formats = sorted(set(re.findall(r'printf\(\s*"(afdep [^"]*)\\n"', COMM)))
    (timeout,) = [f for f in formats if f.startswith(TIMEOUT)]
    (detected,) = [f for f in formats if "(detected on rank" in f]
    (own,) = [f for f in formats if f.endswith(" rank=%d")]
    assert len(formats) == 3  # a new device line needs its parsing here
    log = "\n".join(
        [
            printed(timeout, "cf.attention_dispatch.prefix_wait", 1, 48, 24),
            printed(detected, RouteKind.WIDE, 3, 1, 0, 1),
            printed(own, RouteKind.DUMMY, 128, 0, 0),
        ]
    )
    facts = parse_log(log)
    assert facts.timeouts == [("cf.attention_dispatch.prefix_wait", 1)]
    assert facts.route_asserts == [("wide", 3, 1, 1), ("dummy", 128, 0, 0)]
    assert len(facts.assertions) == 2


def test_host_lines_round_trip_through_parse_log():
    summary = {"ok": True, "checks": 4, "ranks": [{"rank": 0, "role": Role.FFN}]}
    log = "\n".join(
        [
            f"[default0]:{digest_line(DIGEST)}",
            f"[default0]:[rank 0] {MISMATCH} out rank=0 step=0 tokens=8: 1 element differs",
            f"[default0]:{result_line(summary)}",
        ]
    )
    facts = parse_log(log)
    assert facts.digests == [DIGEST]
    assert facts.mismatches == 1
    assert facts.final_result == {"ok": True, "checks": 4, "ranks": [{"rank": 0, "role": "ffn"}]}
    assert result_line({"ok": False}) == f'{RESULT} {{"ok": false}}'


@pytest.mark.parametrize(
    "word, text",
    [
        (Role.ATTENTION, "attention"),
        (Role.FFN, "ffn"),
        (Protocol.PAYLOAD_FIRST, "payload-first"),
        (Protocol.COUNT_FIRST, "count-first"),
        (Arm.FFN, "ffn"),
        (Arm.ATTENTION, "attention"),
        (RouteKind.DUPLICATE, "duplicate"),
    ],
)
def test_words_print_and_serialize_as_their_value(word, text):
    assert (str(word), f"{word}", json.dumps({word: [word]})) == (
        text,
        text,
        f'{{"{text}": ["{text}"]}}',
    )
    assert type(word)(text) is word


def test_a_word_named_in_the_functional_form_is_spelled_from_its_name():
    kind = Word("Kind", "ONE TWO_THREE")
    assert [member.value for member in kind] == ["one", "two-three"]
    assert isinstance(kind.ONE, Word) and f"{kind.TWO_THREE}" == "two-three"
