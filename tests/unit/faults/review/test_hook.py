"""The pre-commit hook the repository ships (.pre-commit-hooks.yaml): its
command line, run as pre-commit runs it (from the top of a checkout, the
staged change against HEAD, no argument added), and the review's bad input."""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path

import pytest
import tomllib

from faults.review.model import Review, ReviewVerdict
from tests.unit.faults.review.test_review import SRC, edit, fixture_repo, git, kept_reviews
from tests.unit.faults.review.test_static import RELEASE_FINDING, install_contract
from tools.faults_cli.main import main as faults_main
from tools.faults_cli.steps import program

REPO = Path(__file__).parents[4]


def hooks() -> dict[str, dict[str, str]]:
    """.pre-commit-hooks.yaml, a list of flat mappings, read without a YAML library."""
    found: dict[str, dict[str, str]] = {}
    for line in (REPO / ".pre-commit-hooks.yaml").read_text().splitlines():
        match = re.fullmatch(r"(- |  )(\w+): (.*)", line)
        if match is None:
            continue
        if match[1] == "- ":
            found[match[3]] = hook = {}
        hook[match[2]] = match[3]
    return found


def test_the_hook_runs_the_static_review_against_head():
    hook = hooks()["faults-review"]
    assert hook["entry"] == "afdep-faults review HEAD"
    assert (hook["language"], hook["pass_filenames"]) == ("system", "false")
    program = shlex.split(hook["entry"])[0]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "tools.faults_cli.main:main"  # the command the hook runs is this CLI


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A checkout whose pyproject.toml names the fixture's catalog, as pre-commit
    finds it: the current folder, the change staged."""
    repo = fixture_repo(tmp_path)
    (repo / "pyproject.toml").write_text(f'[tool.faults]\ncatalogs = ["{SRC}/catalog.toml"]\n')
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-qm", "the project's catalogs")
    monkeypatch.chdir(repo)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # what the review leaves
    (tmp_path / "tmp").mkdir()
    return repo


def run_hook(repo: Path) -> tuple[int, Review]:
    """The hook's command on the staged change: its exit status and its Review."""
    git(repo, "add", "-A")
    words = shlex.split(hooks()["faults-review"]["entry"])
    with kept_reviews() as kept:
        status = faults_main(words[1:])
    [result] = kept
    return status, result


def test_the_hook_passes_an_ordering_neutral_change(project, monkeypatch):
    install_contract(monkeypatch)
    edit(project, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    status, result = run_hook(project)
    assert status == 0
    assert [(c.site.name, c.site.kind) for c in result.touched] == [
        ("fx.consumer.flag_wait", "wait")
    ]
    assert result.verdict is ReviewVerdict.OK
    assert list((project.parent / "tmp").iterdir()) == []


def test_the_hook_stops_a_change_the_contract_flags_naming_the_site(project, monkeypatch):
    install_contract(monkeypatch)
    edit(project, "std::memory_order_release);", "std::memory_order_relaxed);")
    status, result = run_hook(project)
    assert status == 1
    assert [c.site.name for c in result.touched] == ["fx.producer.flag_release"]
    assert result.contract.at("fx.producer.flag_release") == [RELEASE_FINDING]
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED


BAD = {
    "unknown BASE": (["origni/main"], "unknown git ref 'origni/main' given as BASE"),
    "unknown CHANGE": (["HEAD", "nope"], "unknown git ref 'nope' given as CHANGE"),
    "SARIF where no folder can be": (
        ["HEAD", "--sarif", "/dev/null/r.sarif"],
        "--sarif's folder /dev/null: not a directory",
    ),
    "SARIF in a folder that cannot be made": (
        ["HEAD", "--sarif", "{tmp}/file/out/r.sarif"],
        "--sarif {tmp}/file/out/r.sarif: its folder {tmp}/file/out does not exist",
    ),
    "SARIF a folder": (["HEAD", "--sarif", "{tmp}"], "--sarif {tmp}: a directory, not a file"),
    "SARIF over the report": (
        ["HEAD", "--report", "{tmp}/r", "--sarif", "{tmp}/r"],
        "--report and --sarif name one file: {tmp}/r",
    ),
}


@pytest.mark.parametrize("words, message", BAD.values(), ids=BAD.keys())
def test_bad_input_is_one_line_before_any_work(words, message, project, capsys):
    tmp = project.parent / "tmp"
    (tmp / "file").write_text("a file where a folder should be")
    words = [word.format(tmp=tmp) for word in words]
    assert faults_main(["review", *words]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"{program()}: error: {message.format(tmp=tmp)}\n"
    assert captured.out == ""
    assert sorted(p.name for p in tmp.iterdir()) == ["file"]  # no scratch folder was made


def test_a_bad_ref_is_named_before_the_gpu_question(capsys):
    """This checkout's catalog needs GPUs this machine may lack: the ref comes first."""
    catalog = str(REPO / "catalogs/afdep.toml")
    words = ["--catalog", catalog, "--root", str(REPO), "review", "HEAD", "nope", "--run"]
    assert faults_main(words) == 2
    error = f"{program()}: error: unknown git ref 'nope' given as CHANGE\n"
    assert capsys.readouterr().err == error
