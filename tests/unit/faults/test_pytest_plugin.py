"""The pytest plugin: options and marker, the catalog cases and their ids, the
session header, the `fault runs` section, each xdist worker's GPU group, and
the project's catalogs from pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from afdep.jit import source_digest
from faults.catalog.project import NoCatalogsTable, ProjectError, default_catalog, project_catalogs
from faults.pytest_plugin import worker_gpu_env, worker_index, xdist_worker_id
from faults.report.document import catalog_sha256
from hostio import gpu_count, gpu_group

GPUS_HERE = gpu_count()

pytest_plugins = ["pytester"]

REPO = Path(__file__).parents[3]
FIXTURE = "tests/fixtures/flag_payload"
# Load it by module name whether or not the pytest11 entry point is installed
# (the entry point carries the module's name, so the two are one plugin).
PLUGIN = ["-p", "faults.pytest_plugin"]
FIXTURE_IDS = ["D1", "S1", "S2", "N1"]


# ---------------------------------------------------------------- GPU groups
@pytest.mark.parametrize(
    "index, size, visible, count, expected",
    [
        (0, 2, None, 8, ["0", "1"]),
        (3, 2, None, 8, ["6", "7"]),
        (1, 2, "4,5,6,7", 8, ["6", "7"]),
        (0, 1, "3", 8, ["3"]),
    ],
)
def test_gpu_group(index, size, visible, count, expected):
    assert gpu_group(index, size, visible, count) == expected


def test_gpu_group_refuses_a_group_without_enough_devices():
    with pytest.raises(LookupError) as raised:
        gpu_group(2, 2, "0,1", 2)
    assert str(raised.value) == "GPU group 2 needs devices 4..5 of ['0', '1']: run fewer workers"


@pytest.mark.parametrize("worker, index", [("master", 0), ("gw0", 0), ("gw3", 3), ("gw12", 12)])
def test_worker_index(worker, index):
    assert worker_index(worker) == index


def test_without_xdist_the_worker_is_master(monkeypatch, request):
    monkeypatch.setitem(sys.modules, "xdist", None)  # import xdist now fails
    assert xdist_worker_id(request) == "master"


def test_worker_gpu_env_asks_xdist_for_the_worker(monkeypatch, request):
    import xdist

    monkeypatch.setattr(xdist, "get_xdist_worker_id", lambda request_or_session: "gw1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert worker_gpu_env(request, 2) == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert worker_gpu_env(request, 0) == {}


WORKER_GROUP_TEST = """
    import pathlib
    from faults.pytest_plugin import worker_gpu_env, xdist_worker_id

    def test_group(request):
        env = worker_gpu_env(request, 1)["CUDA_VISIBLE_DEVICES"]
        (pathlib.Path(__file__).parent / (xdist_worker_id(request) + ".seen")).write_text(env)
"""


def test_each_xdist_worker_runs_on_its_own_gpu_group(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    pytester.makepyfile(WORKER_GROUP_TEST)
    result = pytester.runpytest(*PLUGIN, "-n", "2", "--dist", "each")
    result.assert_outcomes(passed=2)
    seen = {p.stem: p.read_text() for p in pytester.path.glob("*.seen")}
    assert seen == {"gw0": "4", "gw1": "5"}


def test_outside_a_worker_the_group_is_the_first(pytester, monkeypatch):
    # An outer xdist worker's environment does not make the inner session a worker.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    pytester.makepyfile(WORKER_GROUP_TEST)
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    seen = {p.stem: p.read_text() for p in pytester.path.glob("*.seen")}
    assert seen == {"master": "4"}


# ---------------------------------------------------------------- project catalogs
def write_pyproject(root: Path, text: str) -> Path:
    path = root / "pyproject.toml"
    path.write_text(text)
    return path


def test_project_catalogs_and_the_default(tmp_path):
    write_pyproject(tmp_path, '[tool.faults]\ncatalogs = ["a/one.toml", "two.toml"]\n')
    assert project_catalogs(tmp_path) == [tmp_path / "a/one.toml", tmp_path / "two.toml"]
    assert default_catalog(tmp_path) == tmp_path / "a/one.toml"
    assert default_catalog(Path(".")) == Path("catalogs/afdep.toml")


def test_this_project_lists_its_catalogs():
    assert project_catalogs(REPO) == [
        REPO / "catalogs/afdep.toml",
        REPO / FIXTURE / "catalog.toml",
    ]


def test_a_project_without_pyproject_has_no_catalogs(tmp_path):
    with pytest.raises(NoCatalogsTable) as raised:
        project_catalogs(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}/pyproject.toml: not found; it must list "
        f'[tool.faults] catalogs = ["<catalog>.toml", ...]'
    )


def test_a_pyproject_without_the_table_has_no_catalogs(tmp_path):
    write_pyproject(tmp_path, '[project]\nname = "x"\n')
    with pytest.raises(NoCatalogsTable) as raised:
        default_catalog(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}/pyproject.toml: no [tool.faults] table; it must list "
        f'[tool.faults] catalogs = ["<catalog>.toml", ...]'
    )
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "table, shown",
    [
        ("[tool.faults]\n", "nothing"),
        ("[tool.faults]\ncatalogs = []\n", "[]"),
        ('[tool.faults]\ncatalogs = "one.toml"\n', "'one.toml'"),
        ('[tool.faults]\ncatalogs = ["one.toml", 2]\n', "['one.toml', 2]"),
        ('[tool.faults]\ncatalogs = [""]\n', "['']"),
        ("[tool]\nfaults = 3\n", "3"),
    ],
)
def test_a_malformed_catalogs_key_is_named(tmp_path, table, shown):
    write_pyproject(tmp_path, table)
    with pytest.raises(ProjectError) as raised:
        project_catalogs(tmp_path)
    assert not isinstance(raised.value, NoCatalogsTable)
    assert str(raised.value) == (
        f"{tmp_path}/pyproject.toml: [tool.faults] catalogs must be a non-empty list of paths, "
        f"got {shown}"
    )


def test_a_pyproject_that_is_not_toml_is_named(tmp_path):
    write_pyproject(tmp_path, "[tool.faults\n")
    with pytest.raises(ProjectError) as raised:
        project_catalogs(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}/pyproject.toml: cannot read [tool.faults] catalogs: "
        "Expected ']' at the end of a table declaration (at line 1, column 13)"
    )


# ---------------------------------------------------------------- options, marker
def test_plugin_registers_marker_and_options(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.faults
        def test_marked(pytestconfig):
            assert pytestconfig.getoption("--faults-repeat") == 3
    """)
    result = pytester.runpytest(*PLUGIN, "--strict-markers", "--faults-repeat", "3", "-m", "faults")
    result.assert_outcomes(passed=1)
    help_text = pytester.runpytest(*PLUGIN, "--help")
    help_text.stdout.fnmatch_lines(
        [
            "fault catalogs (faults.pytest_plugin):",
            "  --faults-catalog=FAULTS_CATALOG",
            "  --faults-repeat=FAULTS_REPEAT",
            "  --faults-workdir=FAULTS_WORKDIR",
        ]
    )
    markers = pytester.runpytest(*PLUGIN, "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.faults:*"])


@pytest.mark.parametrize("repeat", ["0", "-1"])
def test_faults_repeat_below_one_is_a_usage_error(pytester, repeat):
    # Zero repeats would judge no run, and every catalog case would pass.
    result = pytester.runpytest(*PLUGIN, f"--faults-repeat={repeat}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # `*`: argparse's prog, how pytest was started (`pytest`, `__main__.py`).
    result.stderr.fnmatch_lines([f"*: error: argument --faults-repeat: at least 1, got {repeat}"])


# ---------------------------------------------------------------- catalog cases
CASE_TEST = """
    def test_case(catalog_case):
        assert catalog_case.fault_id in catalog_case.path.read_text()
"""


def fixture_project(pytester: pytest.Pytester, listed: list[str]) -> None:
    """The CPU fixture target under pytester's root, and a second catalog of
    the same sources named `twin`; pyproject.toml lists `listed`."""
    shutil.copytree(REPO / FIXTURE, pytester.path / FIXTURE)
    catalog = (pytester.path / FIXTURE / "catalog.toml").read_text()
    twin = catalog.replace('name = "flag_payload"', 'name = "twin"')
    (pytester.path / "twin.toml").write_text(twin)
    quoted = ", ".join(f'"{p}"' for p in listed)
    write_pyproject(pytester.path, f"[tool.faults]\ncatalogs = [{quoted}]\n")


def case_ids(module: str, targets: list[str]) -> list[str]:
    """`--collect-only -q`'s lines for CASE_TEST in `module` over `targets`' catalogs."""
    return [
        f"{module}.py::test_case[{target}-{fault}-default]"
        for target in targets
        for fault in FIXTURE_IDS
    ]


def test_cases_are_catalog_x_fault_x_config_over_the_listed_catalogs_that_exist(pytester):
    fixture_project(pytester, ["missing.toml", "twin.toml", f"{FIXTURE}/catalog.toml"])
    pytester.makepyfile(CASE_TEST)
    result = pytester.runpytest(*PLUGIN, "--collect-only", "-q")
    module = "test_cases_are_catalog_x_fault_x_config_over_the_listed_catalogs_that_exist"
    ids = case_ids(module, ["twin", "flag_payload"])
    assert result.outlines[: len(ids) + 1] == [*ids, ""]
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=8)


def test_faults_catalog_chooses_the_catalogs(pytester):
    fixture_project(pytester, [f"{FIXTURE}/catalog.toml"])
    pytester.makepyfile(CASE_TEST)
    result = pytester.runpytest(*PLUGIN, "--faults-catalog", "twin.toml", "--collect-only", "-q")
    ids = case_ids("test_faults_catalog_chooses_the_catalogs", ["twin"])
    assert result.outlines[: len(ids) + 1] == [*ids, ""]


def test_cases_without_listed_catalogs_are_one_collection_error(pytester):
    pytester.makepyfile(CASE_TEST)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=1)
    message = (
        f"{pytester.path}/pyproject.toml: not found; it must list "
        f'[tool.faults] catalogs = ["<catalog>.toml", ...]'
    )
    result.stdout.fnmatch_lines(["*ERROR collecting*", message, "*short test summary*"])


def test_a_catalog_that_does_not_load_is_one_collection_error(pytester):
    pytester.makefile(".toml", broken="[target]\nname = 1\n")
    pytester.makepyfile(CASE_TEST)
    result = pytester.runpytest(*PLUGIN, "--faults-catalog", "broken.toml")
    result.assert_outcomes(errors=1)
    message = "broken.toml: target: sources: required"
    result.stdout.fnmatch_lines(["*ERROR collecting*", message, "*short test summary*"])


# ---------------------------------------------------------------- session header
def test_header_names_each_catalogs_sources_and_digests(pytester):
    fixture_project(pytester, ["twin.toml", f"{FIXTURE}/catalog.toml"])
    result = pytester.runpytest(*PLUGIN, "--collect-only")
    digest = source_digest(REPO / FIXTURE)
    sources = f"sources {FIXTURE} sha256 {digest}"
    twin_sha = catalog_sha256(pytester.path / "twin.toml")[:12]
    fixture_sha = catalog_sha256(REPO / FIXTURE / "catalog.toml")[:12]
    gpus = f"{GPUS_HERE} GPUs here, rank mode per-gpu"  # the fixture has one mode
    assert result.outlines[2:4] == [
        f"faults: twin {sources}, catalog sha256 {twin_sha}, {gpus}",
        f"faults: flag_payload {sources}, catalog sha256 {fixture_sha}, {gpus}",
    ]


def test_header_is_silent_in_a_project_without_catalogs(pytester):
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if line.startswith("faults:")]


def test_header_names_a_malformed_catalogs_key(pytester):
    write_pyproject(pytester.path, "[tool.faults]\ncatalogs = 1\n")
    result = pytester.runpytest(*PLUGIN, "--collect-only")
    result.stdout.fnmatch_lines(
        [
            f"faults: {pytester.path}/pyproject.toml: [tool.faults] catalogs must be a "
            "non-empty list of paths, got 1"
        ]
    )


def test_a_catalog_that_does_not_load_is_named_in_the_header(pytester):
    pytester.makefile(".toml", broken="[target]\nname = 1\n")
    result = pytester.runpytest(*PLUGIN, "--faults-catalog", "broken.toml", "--collect-only")
    result.stdout.fnmatch_lines(["faults: broken.toml: *broken.toml*"])


def test_faults_session_header_names_the_sources_it_judges():
    # The README's form (`-m faults` over testpaths) and an explicit path both say it.
    for selection in (["-m", "faults"], ["tests/faults"]):
        command = [sys.executable, "-m", "pytest", *selection, "--collect-only"]
        collected = subprocess.run(
            [*command, "-p", "no:cacheprovider"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        expected = f"faults: afdep sources afdep/csrc sha256 {source_digest()}, catalog sha256 "
        assert expected in collected.stdout, (selection, collected.stdout[:2000])


# ---------------------------------------------------------------- fault runs section
RUN_LINES_TEST = """
    import pytest
    from faults.pytest_plugin import RESULT_PROPERTY

    @pytest.mark.parametrize("name", ["B1", "A1", "C1"])
    def test_run(name, record_property):
        record_property(RESULT_PROPERTY, f"{name}-default -> PASSED")
"""


@pytest.mark.parametrize("options", [["-q"], ["-q", "-n", "2"]], ids=["quiet", "xdist"])
def test_fault_runs_section_holds_the_header_and_every_run_line_sorted(pytester, options):
    fixture_project(pytester, [f"{FIXTURE}/catalog.toml"])
    pytester.makepyfile(RUN_LINES_TEST)
    result = pytester.runpytest(*PLUGIN, *options)
    result.assert_outcomes(passed=3)
    start = next(i for i, line in enumerate(result.outlines) if "= fault runs =" in line)
    header = result.outlines[start + 1]
    assert header.startswith(f"faults: flag_payload sources {FIXTURE} sha256 ")
    assert result.outlines[start + 2 : start + 5] == [
        "A1-default -> PASSED",
        "B1-default -> PASSED",
        "C1-default -> PASSED",
    ]
    assert result.outlines[start + 5].startswith("3 passed")


def test_quiet_faults_session_ends_with_the_digest_and_every_run_line():
    """`-q` hides the header; the summary still says what was judged, and how
    (every repeat: --faults-repeat 2 runs each case twice)."""
    catalog = f"{FIXTURE}/catalog.toml"
    command = [sys.executable, "-m", "pytest", "-q", "-m", "faults", "tests/faults"]
    ran = subprocess.run(
        [*command, "--faults-catalog", catalog, "--faults-repeat", "2", "-k", "D1 or S1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    summary = ran.stdout.split("= fault runs =")[1].splitlines()
    digest = source_digest(REPO / FIXTURE)
    sources = f"flag_payload sources {FIXTURE}"
    assert summary[1].startswith(f"faults: {sources} sha256 {digest}")
    names = ["D1@default#0", "D1@default#1", "S1@default#0", "S1@default#1"]
    assert [line.split(" tree=")[0] for line in summary[2:6]] == names
    assert summary[2].endswith("-> PASSED") and summary[3].endswith("-> PASSED")
    assert " -> KILLED" in summary[4] and " -> KILLED" in summary[5]
