"""Warm workers ([target.serve], faults/pipeline/serve.py, hostio/serve.py) on
the CPU fixture: a run that crashes or hangs never touches the next, no
worker outlives the engine, and a tree whose worker-loaded Python differs
gets a worker of its own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from faults.catalog import Fault, Patch, load_catalog
from faults.judge.verdict import Verdict
from faults.pipeline.engine import Engine
from faults.pipeline.serve import WorkerPool
from tests.unit.hostio.test_children import MARK, PYTHONPATH, marked, token, wait_for  # noqa: F401

REPO = Path(__file__).parents[4]
FIXTURE = "tests/fixtures/flag_payload"
CATALOG = REPO / FIXTURE / "catalog.toml"

CRASH = Patch(
    "E1",
    file="main.cpp",
    old='std::printf("fixture rounds=%d failed=%d\\n", kRounds, failed_rounds);',
    new="std::fflush(stdout); throw 1;",
    marker_site="fx.producer.flag_release",
)


def with_fault(catalog, fault: Fault):
    return replace(catalog, faults={**catalog.faults, fault.id: fault})


def test_a_crashing_run_then_a_clean_one_on_the_same_worker_are_killed_then_passed(tmp_path):
    catalog = load_catalog(CATALOG, tree_root=REPO)
    assert catalog.target.serve  # the fixture's runs go through hostio.serve
    catalog = with_fault(catalog, Fault("E1", "the target crashes", "fail", (CRASH,)))
    engine = Engine(catalog, REPO, tmp_path)
    try:
        [crashed] = engine.evaluate("E1", list(catalog.configs))
        [clean] = engine.evaluate("D1", list(catalog.configs))
        assert (crashed.verdict, crashed.outcome["exit_code"]) == (Verdict.KILLED, -6)
        assert (clean.verdict, clean.outcome["exit_code"]) == (Verdict.PASSED, 0)
        # One worker made both runs: the crash ended its child only.
        assert (engine.workers.started, engine.workers.replaced) == (1, 0)
    finally:
        engine.close()
    assert engine.workers.alive == []


def test_a_hung_run_is_killed_at_its_timeout_and_its_worker_replaced(tmp_path):
    catalog = load_catalog(CATALOG, tree_root=REPO)
    catalog = replace(catalog, target=replace(catalog.target, timeout_s=2.0))
    hang = Patch("H1", site="fx.producer.payload_store", action="delay", ns=240_000_000_000)
    catalog = with_fault(catalog, Fault("H1", "the producer stalls for minutes", "pass", (hang,)))
    engine = Engine(catalog, REPO, tmp_path)
    try:
        engine.prepare("D1", "D1")  # built before the clock
        [hung] = engine.evaluate("H1", list(catalog.configs))
        first = engine.workers.started
        [after] = engine.evaluate("D1", list(catalog.configs))
        assert hung.outcome["outer_timeout"] and hung.outcome["exit_code"] is None
        assert 2.0 <= hung.outcome["wall_s"] < 10
        assert hung.verdict is not Verdict.PASSED
        assert after.verdict is Verdict.PASSED
        assert (first, engine.workers.started, engine.workers.replaced) == (1, 2, 1)
        assert not marked_binaries(tmp_path)  # the hung binary went with its worker
    finally:
        engine.close()


def marked_binaries(tmp_path: Path) -> list[int]:
    """The fixture binaries still running from trees under `tmp_path`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(tmp_path) in os.readlink(entry / "exe"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_no_worker_outlives_its_parents_sigkill(tmp_path, token):  # noqa: F811
    """The engine (python -m faults run) is SIGKILLed while its worker's child
    spins: the worker and the child end with it (the guard's parent-death signal)."""
    root = tmp_path / "root"
    shutil.copytree(REPO / FIXTURE, root / FIXTURE)
    spin = (REPO / FIXTURE / "spin.toml").read_text()
    catalog = tmp_path / "spin.toml"
    catalog.write_text(spin + '\n[target.serve]\ncommand = ["{python}", "-m", "hostio.serve"]\n')
    parent = subprocess.Popen(
        [sys.executable, "-m", "faults", "--catalog", str(catalog), "--root", str(root)]
        + ["--workdir", str(tmp_path / "work"), "run", "SPIN"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": PYTHONPATH, MARK: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: "flag_payload" in marked(token).values(), 120, "the binary runs")
        assert any("python" in name for name in marked(token).values())  # its worker
    finally:
        parent.kill()
        parent.communicate(timeout=30)
    wait_for(lambda: not marked(token), 5, "no worker or run left after SIGKILL of the parent")


def tree_with(tmp_path: Path, name: str, probe: str, serve_line: str = "") -> Path:
    """A tree holding hostio (the worker's own Python) and probe.py, which prints `probe`."""
    tree = tmp_path / name
    shutil.copytree(REPO / "hostio", tree / "hostio", ignore=shutil.ignore_patterns("__pycache__"))
    if serve_line:
        with open(tree / "hostio" / "serve.py", "a") as serve:
            serve.write(f"\n{serve_line}\n")
    (tree / "probe.py").write_text(f"print({probe!r}, __file__)\n")
    return tree


def test_a_tree_whose_worker_python_differs_gets_a_worker_of_its_own(tmp_path):
    a = tree_with(tmp_path, "a", "A")
    same = tree_with(tmp_path, "same", "SAME")  # only probe.py differs: the worker never loaded it
    changed = tree_with(tmp_path, "changed", "CHANGED", "# a change to the worker's own Python")
    pool = WorkerPool(
        lambda tree, out: [sys.executable, "-m", "hostio.serve"],
        lambda tree: {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"},
        tmp_path / "workers",
        start_timeout_s=30,
    )
    said = {}
    try:
        for tree in (a, same, changed):
            log = tmp_path / f"{tree.name}.log"
            env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
            outcome = pool.run(
                [sys.executable, "-m", "probe"], log, timeout_s=30, env=env, tree=tree, out=tmp_path
            )
            assert outcome.exit_code == 0, log.read_text()
            said[tree.name] = (log.read_text().split(), pool.started)
    finally:
        pool.close()
    # Each run imported its own tree's probe.py, whichever worker ran it.
    assert said["a"] == (["A", str(a / "probe.py")], 1)
    assert said["same"] == (["SAME", str(same / "probe.py")], 1)
    assert said["changed"] == (["CHANGED", str(changed / "probe.py")], 2)
    assert pool.alive == []


def test_a_worker_that_cannot_start_is_one_reason(tmp_path):
    from faults.pipeline.serve import WorkerError

    pool = WorkerPool(
        lambda tree, out: [sys.executable, "-m", "hostio.serve", "--preload", "no_such_module"],
        lambda tree: dict(os.environ),
        tmp_path / "workers",
        start_timeout_s=30,
    )
    with pytest.raises(WorkerError, match="ended before it was ready.*No module named"):
        pool.run(["true"], tmp_path / "run.log", timeout_s=5, env={}, tree=tmp_path, out=tmp_path)
    assert pool.alive == []


def test_a_run_ends_with_its_signal_as_a_process_of_its_own_would(tmp_path):
    pool = WorkerPool(
        lambda tree, out: [sys.executable, "-m", "hostio.serve"],
        lambda tree: dict(os.environ),
        tmp_path / "workers",
        start_timeout_s=30,
    )
    try:
        script = "import os, signal; print('bye', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
        outcome = pool.run(
            [sys.executable, "-c", script], tmp_path / "run.log", timeout_s=10,
            env=dict(os.environ), tree=tmp_path, out=tmp_path,
        )  # fmt: skip
        assert (outcome.exit_code, outcome.outer_timeout) == (-signal.SIGSEGV, False)
        assert (tmp_path / "run.log").read_text() == "bye\n"
    finally:
        pool.close()


HOOKS = """import os, pathlib
def start():
    with open(os.environ["STARTS"], "a") as starts:
        starts.write("started\\n")
def healthy():
    return not pathlib.Path(os.environ["STARTS"] + ".unfit").exists()
"""

PROBE = """import io, os, sys
import ledger
ledger.RUNS.append(1)
print(os.getpid(), os.getcwd() == os.environ["PYTHONPATH"], os.environ.get("LEFT"),
      repr(sys.stdin.read()), len(ledger.RUNS), __file__, flush=True)
os.environ["LEFT"] = "by-an-earlier-run"
sys.stdout = io.StringIO()  # the run's own stream, never the next run's
if len(sys.argv) > 1:
    if sys.argv[1] == "exit":
        sys.stdout.flush()
        os._exit(3)
    if sys.argv[1] == "hang":
        import time
        time.sleep(120)
    if sys.argv[1] == "unfit":
        open(os.environ["STARTS"] + ".unfit", "w").close()
"""


def in_process_pool(tmp_path: Path) -> tuple[WorkerPool, Path]:
    starts = tmp_path / "starts"
    tree = tree_with(tmp_path, "warm", "")
    (tree / "warmhooks.py").write_text(HOOKS)
    (tree / "probe.py").write_text(PROBE)
    (tree / "ledger.py").write_text("RUNS = []\n")  # a module each run imports afresh
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1", "STARTS": str(starts)}
    pool = WorkerPool(
        lambda tree, out: [sys.executable, "-m", "hostio.serve", "--in-process", "warmhooks"],
        lambda tree: env,
        tmp_path / "workers",
        start_timeout_s=30,
    )
    return pool, tree


def test_in_process_runs_share_one_warm_worker_each_as_a_process_of_its_own(tmp_path):
    pool, tree = in_process_pool(tmp_path)
    env = pool.env(tree)

    def probe(name: str, *words: str, timeout_s: float = 30):
        log = tmp_path / f"{name}.log"
        argv = [sys.executable, "-m", "probe", *words]
        outcome = pool.run(argv, log, timeout_s=timeout_s, env=env, tree=tree, out=tmp_path)
        return outcome, log.read_text().split()

    try:
        first, said_first = probe("first")
        second, said_second = probe("second")
        assert (first.exit_code, second.exit_code) == (0, 0)
        # One process made both, started once; each saw its own cwd, env and an empty stdin.
        assert said_first[0] == said_second[0]
        assert said_first[1:] == said_second[1:] == [
            "True", "None", "''", "1", str(tree / "probe.py")
        ]  # fmt: skip
        assert (tmp_path / "starts").read_text() == "started\n"
        assert (pool.started, pool.replaced) == (1, 0)
        # A run that ends the process is that exit, and the next run gets a fresh worker.
        ended, _ = probe("ended", "exit")
        assert (ended.exit_code, ended.outer_timeout, pool.replaced) == (3, False, 1)
        # Its replacement starts at once, before any run asks for it.
        wait_for(lambda: pool.started == 2 and len(pool.alive) == 1, 30, "a spare worker")
        after, said_after = probe("after")
        assert after.exit_code == 0 and said_after[0] != said_first[0]
        assert pool.started == 2
        # A worker its hooks find unfit after a run retires with it.
        unfit, _ = probe("unfit", "unfit")
        assert (unfit.exit_code, pool.replaced) == (0, 2)
        (tmp_path / "starts.unfit").unlink()
        # A hung run is killed at its timeout, its worker with it.
        hung, _ = probe("hung", "hang", timeout_s=2)
        assert (hung.exit_code, hung.outer_timeout, pool.replaced) == (None, True, 3)
        last, _ = probe("last")
        assert last.exit_code == 0
        assert (tmp_path / "starts").read_text() == "started\n" * 4
    finally:
        pool.close()
    assert pool.alive == []
