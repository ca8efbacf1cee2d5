"""Bad input to afdep's commands: exit 2 and one line on stderr naming the
culprit, no traceback, before any work starts (nothing on stdout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from afdep.workspace import INT32_MAX, MAX_HIDDEN, Geometry, GeometryError

ROOT = Path(__file__).resolve().parents[2]
STRAY = {"AFDEP_TIMOUT_MS": "5"}
UNKNOWN = "error: unknown afdep variable AFDEP_TIMOUT_MS; known: ['AFDEP_COUNT_FIRST_ARM'"
NO_GPUS = {"CUDA_VISIBLE_DEVICES": ""}

ROWS = [
    (
        ["afdep.build", "--hidden", "100"],
        {},
        "error: --hidden 100: hidden=100 must be a multiple of 8 (16-byte rows)",
    ),
    (
        ["afdep.build", "--hidden", "1000"],
        {},
        "error: --hidden 1000: hidden=1000 must be a multiple of 128 for fp8 payloads",
    ),
    (
        ["afdep.build", "--hidden", "1099511627776"],
        {},
        "error: --hidden 1099511627776: hidden=1099511627776 exceeds 1073741823: the kernels "
        "hold a row's bytes (2 * hidden) in an int32",
    ),
    (["afdep.build", "--hidden", "0"], {}, "error: --hidden 0: hidden must be a positive int"),
    (
        ["afdep.build", "--top-k", "64"],
        {},
        "error: --top-k 64: top_k=64 must be <= min(32, num_experts)",
    ),
    (["afdep.build"], STRAY, UNKNOWN),
    (["afdep.validate"], STRAY, UNKNOWN),
    (["afdep.bench"], STRAY, UNKNOWN),
    (["afdep.bench.screen"], STRAY, UNKNOWN),
    (
        ["afdep.build"],
        {"AFDEP_TIMEOUT_MS": "99999999999999999999"},
        "error: AFDEP_TIMEOUT_MS='99999999999999999999': at most 9223372036854",
    ),
    (
        ["afdep.validate"],
        {"AFDEP_JIT_CACHE_MAX_MB": "0"},
        "error: AFDEP_JIT_CACHE_MAX_MB='0': expected a positive integer",
    ),
    (["afdep.bench"], NO_GPUS, "error: afdep.bench needs 2 GPUs (--nproc 2) and found 0"),
    (
        ["afdep.bench", "--arm", "C:", "--arm", "X:AFDEP_TIMOUT_MS=3"],
        NO_GPUS,
        "error: --arm X: unknown afdep variable AFDEP_TIMOUT_MS; known:",
    ),
]


@pytest.mark.parametrize("words, env, message", ROWS, ids=[" ".join([*w, *e]) for w, e, _ in ROWS])
def test_bad_input_is_one_line_exit_2(words, env, message, tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("AFDEP_")}
    # A cache of its own: a regression that starts compiling stays out of the user's.
    environ = {**base, "PYTHONPATH": str(ROOT), "AFDEP_JIT_CACHE": str(tmp_path / "jit"), **env}
    done = subprocess.run(
        [sys.executable, "-m", *words],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # refused before any work started
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]


def geometry(**fields) -> Geometry:
    shape = dict(world_size=2, ffn_ranks=1, num_experts=8, capacity=64, hidden=2048, top_k=2)
    return Geometry(**{**shape, **fields})


def test_hidden_is_bounded_by_the_int32_row_bytes_of_the_kernels():
    assert MAX_HIDDEN == 1_073_741_823 and 2 * MAX_HIDDEN <= INT32_MAX
    assert geometry(hidden=MAX_HIDDEN // 8 * 8).hidden == 1_073_741_816
    with pytest.raises(GeometryError) as error:
        geometry(hidden=2**40)
    assert (error.value.field, error.value.value) == ("hidden", 2**40)
    assert str(error.value) == (
        "hidden=1099511627776 exceeds 1073741823: the kernels hold a row's bytes "
        "(2 * hidden) in an int32"
    )
    assert isinstance(error.value, ValueError)


def test_fp8_scales_of_the_capacity_must_be_int32_indexable():
    hidden = 2**30 - 128  # 8388607 scales per token
    assert geometry(hidden=hidden, payload="fp8", capacity=256).num_scales == 8_388_607
    with pytest.raises(GeometryError) as error:
        geometry(hidden=hidden, payload="fp8", capacity=257)
    assert error.value.field == "hidden"
    assert str(error.value) == (
        "hidden=1073741696 with capacity=257 makes 2155871999 fp8 scales; the kernels index them "
        "in an int32 (at most 2147483647)"
    )


def test_geometry_errors_name_their_field_and_value():
    cases = [
        ({"top_k": 9}, "top_k", 9),
        ({"num_experts": 9, "ffn_ranks": 2, "world_size": 3}, "num_experts", 9),
        ({"capacity": 0}, "capacity", 0),
        ({"payload": "fp16"}, "payload", "fp16"),
        ({"world_size": 33}, "world_size", 33),
    ]
    for fields, field, value in cases:
        with pytest.raises(GeometryError) as error:
            geometry(**fields)
        assert (error.value.field, error.value.value) == (field, value), fields
