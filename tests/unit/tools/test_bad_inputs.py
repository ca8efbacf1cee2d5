"""Bad input to afdep's commands: exit 2 and one line on stderr naming the
culprit, no traceback, before any work starts (nothing on stdout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from afdep.workspace import INT32_MAX, MAX_HIDDEN, Geometry, GeometryError

ROOT = Path(__file__).resolve().parents[3]
CSRC = ROOT / "afdep/csrc"  # the kernel sources: no command writes there
STRAY = {"AFDEP_TIMOUT_MS": "5"}
# A message ending in "..." is the line's start (the rest lists every knob);
# any other is the whole line.
UNKNOWN = "error: unknown afdep variable AFDEP_TIMOUT_MS; known: ['AFDEP_COMBINE_SMS', ..."
NO_GPUS = {"CUDA_VISIBLE_DEVICES": ""}

A_FILE = str(ROOT / "README.md")  # in the way of a folder
NO_FOLDER = f"{A_FILE}/logs"  # a folder no one can make (a file is in the way)


def mkdir_error(path: str) -> str:
    """Why this machine cannot make `path` (the message's words depend on the user)."""
    try:
        os.mkdir(path)
    except OSError as error:
        return error.strerror
    os.rmdir(path)
    raise AssertionError(f"{path} could be made")


PROC_NOPE = mkdir_error("/proc/nope")  # the trial's row: root is told ENOENT
# (words, the exact line): the arguments of validate and bench, through the
# `afdep` dispatcher and the modules.
COMMAND_ROWS = [
    (
        ["tools.afdep_cli", "validate", "--only", "["],
        "afdep validate: error: argument --only: '[' is not a regular expression: "
        "unterminated character set at position 0",
    ),
    (
        ["tools.afdep_cli", "validate", "--only", "nothing"],
        "afdep validate: error: --only 'nothing' matches no run",
    ),
    (
        ["tools.validate", "--select", "failures", "--only", "^bf16"],
        "afdep validate: error: --only '^bf16' matches no run of --select failures",
    ),
    (
        ["tools.validate", "--select", "some"],
        "afdep validate: error: argument --select: invalid choice: 'some' (choose from 'all', "
        "'correctness', 'failures', 'count-first', 'four-gpu', 'split-knobs')",
    ),
    (
        ["tools.validate", "--jobs", "0"],
        "afdep validate: error: argument --jobs: at least 1, got 0",
    ),
    (
        ["tools.validate", "--bench-iters", "-1"],
        "afdep validate: error: argument --bench-iters: at least 0, got -1",
    ),
    (
        ["tools.validate", "--bench-iters", "many"],
        "afdep validate: error: argument --bench-iters: an integer, got 'many'",
    ),
    (
        ["tools.validate", "--results-dir", A_FILE],
        f"afdep validate: error: argument --results-dir: {A_FILE}: not a folder",
    ),
    (
        ["tools.validate", "--logs-dir", A_FILE],
        f"afdep validate: error: argument --logs-dir: {A_FILE}: not a folder",
    ),
    (
        ["tools.validate", "--keep=1"],
        "afdep validate: error: argument --keep: ignored explicit argument '1'",
    ),
    (
        ["tools.validate", "--selct", "all"],
        "afdep validate: error: unrecognized arguments: --selct all",
    ),
    (
        ["tools.afdep_cli", "bench", "--processes", "0"],
        "afdep bench: error: argument --processes: at least 1, got 0",
    ),
    (
        ["tools.bench", "--nproc", "1"],
        "afdep bench: error: argument --nproc: at least 2, got 1",
    ),
    (
        ["tools.bench", "--buckets", "8", "0"],
        "afdep bench: error: argument --buckets: at least 1, got 0",
    ),
    (
        ["tools.bench", "--buckets"],
        "afdep bench: error: argument --buckets: expected at least one argument",
    ),
    (["tools.bench", "--iters", "x"], "afdep bench: error: argument --iters: an integer, got 'x'"),
    (
        ["tools.bench", "--trace-buckets", "-5"],
        "afdep bench: error: argument --trace-buckets: at least 1, got -5",
    ),
    (
        ["tools.bench", "--tag", "a/b"],
        "afdep bench: error: argument --tag: 'a/b': letters, digits, '.', '-' or '_' only",
    ),
    (
        ["tools.bench", "--arm", "CF:AFDEP_A"],
        "afdep bench: error: argument --arm: --arm 'CF:AFDEP_A': expected "
        "NAME:AFDEP_VAR=VALUE,...[,tree=DIR]",
    ),
    (
        ["tools.bench", "--arm", "C:", "--arm", f"T:tree={A_FILE}"],
        f"afdep bench: error: --arm T: tree {A_FILE} holds no kernel sources (no impls/ folder)",
    ),
    (
        ["tools.bench", "--arm", "C:", "--arm", "ISO:", "--iso"],
        "afdep bench: error: --iso: an arm is already named ISO",
    ),
    (
        ["tools.bench", "--arm", "C:", "--arm", "C:AFDEP_PAYLOAD_FIRST=1"],
        "afdep bench: error: --arm C is given twice",
    ),
    (
        ["tools.bench", "--arm", "CF:AFDEP_COUNT_FIRST_MIN_BUCKET=1"],
        "afdep bench: error: the control arm C is required (--arm C:...)",
    ),
    (
        ["tools.bench", "--results-dir", A_FILE],
        f"afdep bench: error: argument --results-dir: {A_FILE}: not a folder",
    ),
    (
        ["tools.bench", "--logs-dir", A_FILE],
        f"afdep bench: error: argument --logs-dir: {A_FILE}: not a folder",
    ),
    (
        ["tools.afdep_cli", "sanitize", "--tool", "memchek"],
        "afdep sanitize: error: argument --tool: invalid choice: 'memchek' (choose from "
        "'memcheck', 'racecheck', 'synccheck', 'initcheck')",
    ),
    (
        ["tools.sanitize", "--execution", "replay"],
        "afdep sanitize: error: argument --execution: invalid choice: 'replay' (choose from "
        "'eager', 'graph')",
    ),
    (
        ["tools.sanitize", "--ranks", "5"],
        "afdep sanitize: error: --ranks: at most 4, got 5",
    ),
    (
        ["tools.sanitize", "--ranks", "1"],
        "afdep sanitize: error: argument --ranks: at least 2, got 1",
    ),
    (
        ["tools.sanitize", "--results-dir", A_FILE],
        f"afdep sanitize: error: argument --results-dir: {A_FILE}: not a folder",
    ),
    (
        ["tools.sanitize", "--wait-timeout-ms", "0"],
        "afdep sanitize: error: argument --wait-timeout-ms: at least 1, got 0",
    ),
    (
        ["tools.afdep_cli", "validate", "--logs-dir", "/proc/nope"],
        f"afdep validate: error: argument --logs-dir: /proc/nope: cannot create it ({PROC_NOPE})",
    ),
    (
        ["tools.validate", "--logs-dir", NO_FOLDER],
        f"afdep validate: error: argument --logs-dir: {NO_FOLDER}: cannot create it "
        "(Not a directory)",
    ),
    (
        ["tools.afdep_cli", "validate", "--results-dir", NO_FOLDER],
        f"afdep validate: error: argument --results-dir: {NO_FOLDER}: cannot create it "
        "(Not a directory)",
    ),
    (
        ["tools.driver", "--tokens", "-1"],
        "afdep drive: error: argument --tokens: at least 0, got -1",
    ),
    (
        ["tools.driver", "--capacity", "0"],
        "afdep drive: error: argument --capacity: at least 1, got 0",
    ),
    (
        ["tools.driver", "--hidden-size", "0"],
        "afdep drive: error: argument --hidden-size: at least 1, got 0",
    ),
    (["tools.driver", "--top-k", "0"], "afdep drive: error: argument --top-k: at least 1, got 0"),
    (
        ["tools.driver", "--num-sms", "0"],
        "afdep drive: error: argument --num-sms: at least 1, got 0",
    ),
    (
        ["tools.driver", "--tokens", "8", "4096"],
        "afdep drive: error: argument --tokens: 4096 is more than --capacity 2048",
    ),
    (
        ["tools.afdep_cli", "drive", "--num-sms", "0"],
        "afdep drive: error: argument --num-sms: at least 1, got 0",
    ),
]

ROWS = [
    (
        ["tools.build", "--hidden", "100"],
        {},
        "error: --hidden 100: hidden=100 must be a multiple of 8 (16-byte rows)",
    ),
    (
        ["tools.build", "--hidden", "1000"],
        {},
        "error: --hidden 1000: hidden=1000 must be a multiple of 128 for fp8 payloads",
    ),
    (
        ["tools.build", "--hidden", "1099511627776"],
        {},
        "error: --hidden 1099511627776: hidden=1099511627776 exceeds 1073741823: the kernels "
        "hold a row's bytes (2 * hidden) in an int32",
    ),
    (
        ["tools.build", "--hidden", "0"],
        {},
        "error: --hidden 0: hidden must be a positive int, got 0",
    ),
    (
        ["tools.build", "--top-k", "64"],
        {},
        "error: --top-k 64: top_k=64 must be <= min(32, num_experts)",
    ),
    (["tools.build"], STRAY, UNKNOWN),
    (["tools.driver"], STRAY, f"afdep drive: {UNKNOWN}"),
    (["tools.driver.drive"], STRAY, f"afdep drive: {UNKNOWN}"),
    (["tools.afdep_cli", "drive", "--tokens", "8"], STRAY, f"afdep drive: {UNKNOWN}"),
    (
        ["tools.build"],
        {"AFDEP_JIT_CACHE": NO_FOLDER},
        f"error: AFDEP_JIT_CACHE={NO_FOLDER!r}: cannot create it (Not a directory)",
    ),
    (
        ["tools.afdep_cli", "build"],
        {"AFDEP_JIT_CACHE": "/proc/nope"},
        f"error: AFDEP_JIT_CACHE='/proc/nope': cannot create it ({PROC_NOPE})",
    ),
    (
        ["tools.validate"],
        {"AFDEP_JIT_CACHE": NO_FOLDER},
        f"afdep validate: error: AFDEP_JIT_CACHE={NO_FOLDER!r}: cannot create it (Not a directory)",
    ),
    (["tools.validate"], STRAY, f"afdep validate: {UNKNOWN}"),
    (["tools.bench"], STRAY, f"afdep bench: {UNKNOWN}"),
    (["tools.bench.screen"], STRAY, UNKNOWN),
    (
        ["tools.build"],
        {"AFDEP_TIMEOUT_MS": "99999999999999999999"},
        "error: AFDEP_TIMEOUT_MS='99999999999999999999': at most 9223372036854...",
    ),
    (
        ["tools.validate"],
        {"AFDEP_JIT_CACHE_MAX_MB": "0"},
        "afdep validate: error: AFDEP_JIT_CACHE_MAX_MB='0': expected a positive integer",
    ),
    (["tools.bench"], NO_GPUS, "afdep bench: error: --nproc 2: needs 2 GPUs and found 0"),
    (
        ["tools.bench", "--arm", "C:", "--arm", "X:AFDEP_TIMOUT_MS=3"],
        NO_GPUS,
        "afdep bench: error: --arm X: unknown afdep variable AFDEP_TIMOUT_MS; known: ...",
    ),
    (
        ["tools.sanitize"],
        NO_GPUS,
        "afdep sanitize: error: needs a GPU (one H200 runs every rank), found 0; "
        "--list shows the runs",
    ),
    (
        ["tools.sanitize"],
        {"AFDEP_TIMEOUT_MS": "soon"},
        "afdep sanitize: error: AFDEP_TIMEOUT_MS='soon': expected a positive integer",
    ),
    # The one rule of every path a command writes (hostio.output_problem).
    (
        ["tools.build", "--ptx", f"{CSRC}/ptx"],
        {},
        f"error: --ptx {CSRC}/ptx: inside the target's sources ...",
    ),
    (
        ["tools.build", "--cubin", f"{CSRC}/impls/cubins"],
        {},
        f"error: --cubin {CSRC}/impls/cubins: inside the target's sources ...",
    ),
    (
        ["tools.validate", "--results-dir", f"{CSRC}/results"],
        {},
        f"afdep validate: error: argument --results-dir: {CSRC}/results: inside the target's ...",
    ),
    (
        ["tools.bench", "--logs-dir", f"{CSRC}/logs"],
        {},
        f"afdep bench: error: argument --logs-dir: {CSRC}/logs: inside the target's ...",
    ),
    *[(words, {}, message) for words, message in COMMAND_ROWS],
]


SOURCES_BEFORE = sorted(CSRC.rglob("*"))


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
    assert sorted(CSRC.rglob("*")) == SOURCES_BEFORE  # nothing written among the sources
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    if message.endswith("..."):
        assert lines[0].startswith(message.removesuffix("...")), lines[0]
    else:
        assert lines[0] == message


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


def test_a_folder_is_checked_without_leaving_one_made(tmp_path):
    """hostio.folder_problem: what --logs-dir, --results-dir and
    AFDEP_JIT_CACHE are checked with before any work; a folder it made to
    find out is gone again."""
    from hostio import folder_problem

    (tmp_path / "file").write_text("in the way")
    assert folder_problem(tmp_path / "a" / "b") is None
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]
    assert folder_problem(tmp_path / "file") == "not a directory"
    assert folder_problem(tmp_path / "file" / "x") == "cannot create it (Not a directory)"
    assert folder_problem(tmp_path) is None and (tmp_path / "file").exists()
