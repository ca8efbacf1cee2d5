"""The pytest plugin: marker, options, and each xdist worker's GPU group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from afdep.jit import source_digest
from faults.pytest_plugin import gpu_group

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    "worker, size, visible, count, expected",
    [
        (None, 2, None, 8, ["0", "1"]),
        ("gw0", 2, None, 8, ["0", "1"]),
        ("gw3", 2, None, 8, ["6", "7"]),
        ("gw1", 2, "4,5,6,7", 8, ["6", "7"]),
        ("gw0", 1, "3", 8, ["3"]),
    ],
)
def test_gpu_group(worker, size, visible, count, expected):
    assert gpu_group(worker, size, visible, count) == expected


def test_gpu_group_refuses_a_worker_without_enough_devices():
    with pytest.raises(LookupError, match=r"worker gw2 needs devices 4..5 of \['0', '1'\]"):
        gpu_group("gw2", 2, "0,1", 2)


def test_plugin_registers_marker_and_options(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.faults
        def test_marked(pytestconfig):
            assert pytestconfig.getoption("--faults-repeat") == 3
    """)
    # Load it by module name whether or not the pytest11 entry point is installed.
    plugin = ["-p", "no:afdep_faults", "-p", "faults.pytest_plugin"]
    result = pytester.runpytest(*plugin, "--strict-markers", "--faults-repeat", "3", "-m", "faults")
    result.assert_outcomes(passed=1)
    help_text = pytester.runpytest(*plugin, "--help")
    help_text.stdout.fnmatch_lines(["*afdep fault catalogs*", "*--faults-catalog*"])
    markers = pytester.runpytest(*plugin, "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.faults:*"])


def test_faults_session_header_names_the_sources_it_judges():
    repo = Path(__file__).parents[3]
    # The README's form (`-m faults` over testpaths) and an explicit path both say it.
    for selection in (["-m", "faults"], ["tests/faults"]):
        command = [sys.executable, "-m", "pytest", *selection, "--collect-only"]
        collected = subprocess.run(
            [*command, "-p", "no:cacheprovider"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        )
        expected = f"faults: afdep sources afdep/csrc sha256 {source_digest()}, catalog sha256 "
        assert expected in collected.stdout, (selection, collected.stdout[:2000])


def test_a_catalog_that_does_not_load_is_named_in_the_header(pytester):
    pytester.makefile(".toml", broken="[target]\nname = 1\n")
    plugin = ["-p", "no:afdep_faults", "-p", "faults.pytest_plugin"]
    result = pytester.runpytest(*plugin, "--faults-catalog", "broken.toml", "--collect-only")
    result.stdout.fnmatch_lines(["faults: broken.toml: *broken.toml*"])


def test_quiet_faults_session_ends_with_the_digest_and_every_run_line():
    """`-q` hides the header; the summary still says what was judged, and how."""
    repo = Path(__file__).parents[3]
    catalog = "tests/fixtures/flag_payload/catalog.toml"
    command = [sys.executable, "-m", "pytest", "-q", "-m", "faults", "tests/faults"]
    ran = subprocess.run(
        [*command, "--faults-catalog", catalog, "-k", "D1 or S1", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    summary = ran.stdout.split("= fault runs =")[1].splitlines()
    digest = source_digest(repo / "tests/fixtures/flag_payload")
    sources = "flag_payload sources tests/fixtures/flag_payload"
    assert summary[1].startswith(f"faults: {sources} sha256 {digest}")
    assert summary[2].startswith("D1-default tree=") and summary[2].endswith("-> PASSED")
    assert summary[3].startswith("S1-default tree=") and " -> KILLED" in summary[3]
