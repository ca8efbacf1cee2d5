"""afdep sanitize on one GPU (`pytest -m gpu`): compute-sanitizer's real
reports read into the findings the stage records (a probe kernel with a
known bug per tool), and memcheck's eager run of the driver is clean
(docs/tools.md, "compute-sanitizer stage")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from afdep.jit import source_digest
from hostio import UsageError, run_logged
from tools.sanitize.findings import Tool, parse_tool_log
from tools.sanitize.stage import find_sanitizer, sanitizer_command

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
PROBE = Path(__file__).with_name("sanitize_probe.py")
PYTHONPATH = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this tree first


@pytest.fixture(scope="module")
def sanitizer() -> str:
    try:
        return find_sanitizer(None)
    except UsageError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize(
    "tool, bug, kind, line",
    [
        (Tool.MEMCHECK, "out-of-bounds", "Invalid __global__ write", 3),
        (Tool.INITCHECK, "uninitialized", "Uninitialized __global__ memory read", 6),
    ],
)
def test_a_real_report_names_the_kernel_and_line(tmp_path, sanitizer, tool, bug, kind, line):
    log = tmp_path / "tool.log"
    command = sanitizer_command(sanitizer, tool, log, [sys.executable, str(PROBE), bug])
    outcome = run_logged(command, tmp_path / "probe.log", timeout_s=300)
    text = log.read_text(errors="replace")
    parsed = parse_tool_log(text)
    assert outcome.exit_code != 0 and not outcome.outer_timeout, text[-3000:]
    assert parsed.findings, text[-3000:]
    first = parsed.findings[0]
    # extern "C": the name alone, or with `()` where the tool prints a prototype
    assert first.kernel in (f"probe_{bug.replace('-', '_')}", f"probe_{bug.replace('-', '_')}()")
    assert (first.kind, first.location) == (kind, f"probe.cu:{line}"), text[-3000:]
    assert first.count >= 1 and parsed.summary_errors >= 1


def test_memcheck_runs_the_driver_clean(tmp_path, sanitizer):
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "tools.sanitize", "--tool", "memcheck", "--execution", "eager",
         "--results-dir", str(results), "--logs-dir", str(tmp_path / "logs")],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = results.glob("sanitize-*-logical.json")
    document = json.loads(path.read_text())
    assert document["native_source_sha256"] == source_digest()
    assert document["rank_mode"].endswith(", 2 logical ranks")
    assert document["baseline"]["ok"] and document["ok"]
    (run,) = document["runs"]
    assert (run["tool"], run["execution"], run["verdict"]) == ("memcheck", "eager", "CLEAN")
    assert (run["findings"], run["summary_errors"], run["exit_code"]) == ([], 0, 0)
