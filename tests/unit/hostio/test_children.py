"""No child outlives its parent (docs/catalog.md, "Pipeline of the fault
engine", item 5): a `python -m faults run` whose fixture binary spins is
interrupted (Ctrl-C, SIGTERM, SIGKILL) and no process of it is left; Ctrl-C
and SIGTERM end with one line on stderr. The run's processes are found by a
variable in their environment, which every child inherits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from hostio import GUARD_SCRIPT, run_logged
from hostio.children import IMPORT_WAIT_MAX_S

REPO = Path(__file__).parents[3]
PYTHONPATH = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this tree first
FIXTURE = "tests/fixtures/flag_payload"
SPIN_CATALOG = REPO / FIXTURE / "spin.toml"
MARK = "LIFETIME_TEST_RUN"  # not AFDEP_*: afdep refuses the AFDEP_ variables it does not know


def marked(token: str) -> dict[int, str]:
    """pid -> name of every live process whose environment holds MARK=token
    (a zombie is dead: its environment reads empty)."""
    needle = f"{MARK}={token}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            found[int(entry.name)] = (entry / "comm").read_text().strip()
        except OSError:  # it ended while we looked
            continue
    return found


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s: {what}")


@pytest.fixture
def token():
    """A fresh mark; whatever carries it at the end is killed, so a failing
    test leaves no spinning fixture behind."""
    value = uuid.uuid4().hex
    yield value
    for pid in marked(value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_spinning_run(tmp_path: Path, token: str, *command: str) -> subprocess.Popen:
    """`python -m faults COMMAND` (run SPIN, or a sweep) on a copy of the
    fixture alone (a small scratch tree), returned once the fixture binary
    spins."""
    root = tmp_path / "root"
    shutil.copytree(REPO / FIXTURE, root / FIXTURE)
    parent = subprocess.Popen(
        [sys.executable, "-m", "faults", "--catalog", str(SPIN_CATALOG), "--root", str(root)]
        + ["--workdir", str(tmp_path / "work"), *(command or ("run", "SPIN"))],
        cwd=root,
        env={**os.environ, "PYTHONPATH": PYTHONPATH, MARK: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def spinning() -> bool:
        if parent.poll() is not None:
            raise AssertionError(f"the run ended first: {parent.communicate()}")
        return "flag_payload" in marked(token).values()

    wait_for(spinning, 120, "the fixture binary runs")
    return parent


@pytest.mark.parametrize(
    ("signum", "exit_code", "stderr"),
    [
        (signal.SIGINT, 130, "interrupted by SIGINT: 1 child stopped with its processes\n"),
        (signal.SIGTERM, 143, "interrupted by SIGTERM: 1 child stopped with its processes\n"),
        (signal.SIGKILL, -signal.SIGKILL, ""),  # the guard's parent-death signal
    ],
    ids=["ctrl-c", "sigterm", "sigkill"],
)
def test_an_interrupted_run_leaves_no_process(tmp_path, token, signum, exit_code, stderr):
    parent = start_spinning_run(tmp_path, token)
    parent.send_signal(signum)
    try:
        _, err = parent.communicate(timeout=30)
    finally:  # as a harness would: an interrupt that does not end it, SIGKILL does
        parent.kill()
    assert (parent.returncode, err) == (exit_code, stderr)
    assert "Traceback" not in err
    # A survivor would spin on for minutes; none is left within 5 s.
    deadline = time.monotonic() + 5
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(token) == {}


def test_a_sweep_interrupted_then_killed_leaves_no_process(tmp_path, token):
    """Ctrl-C, and before it has unwound, SIGKILL of the parent: the guards end
    their trees on their own."""
    results = tmp_path / "results"
    parent = start_spinning_run(tmp_path, token, "sweep", "--results-dir", str(results))
    parent.send_signal(signal.SIGINT)
    time.sleep(0.1)
    parent.kill()
    parent.communicate(timeout=30)
    deadline = time.monotonic() + 5
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(token) == {}


def test_outer_timeout_ends_a_grandchild_in_its_own_session(tmp_path, token):
    """torchrun starts each worker in a session of its own, out of reach of a
    process-group kill: the guard, their subreaper, ends them anyway."""
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "print('grandchild started', flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "timeout.log"
    started = time.perf_counter()
    outcome = run_logged(
        [sys.executable, "-c", script], log, timeout_s=5, env={**os.environ, MARK: token}
    )
    assert (outcome.exit_code, outcome.outer_timeout) == (None, True)
    assert log.read_text() == "grandchild started\n"
    assert time.perf_counter() - started < 15
    assert marked(token) == {}


def test_what_a_command_leaves_running_ends_with_it(tmp_path, token):
    script = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "print('left one behind', flush=True)\n"
    )
    log = tmp_path / "left.log"
    outcome = run_logged(
        [sys.executable, "-c", script], log, timeout_s=30, env={**os.environ, MARK: token}
    )
    assert (outcome.exit_code, outcome.outer_timeout) == (0, False)
    assert log.read_text() == "left one behind\n"
    assert marked(token) == {}


def test_a_stop_set_by_another_thread_ends_the_command_and_what_it_started(tmp_path, token):
    """The erasure check stops its cubin command at the first cubin that
    differs: the whole tree ends, promptly, and the outcome says it was stopped."""
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "print('working', flush=True)\n"
        "time.sleep(60)\n"
    )
    log, stop = tmp_path / "stopped.log", threading.Event()
    threading.Timer(1.0, stop.set).start()
    started = time.perf_counter()
    outcome = run_logged(
        [sys.executable, "-c", script],
        log,
        timeout_s=30,
        env={**os.environ, MARK: token},
        stop=stop,
    )
    assert (outcome.exit_code, outcome.outer_timeout) == (-signal.SIGTERM, False)
    assert log.read_text() == "working\n"
    assert time.perf_counter() - started < 15
    assert marked(token) == {}
    finished = run_logged(
        [sys.executable, "-c", "pass"], tmp_path / "f.log", timeout_s=30, stop=threading.Event()
    )
    assert (finished.exit_code, finished.outer_timeout) == (0, False)


def test_the_guard_passes_on_the_commands_own_ending(tmp_path):
    """The exit code a caller sees is the command's, as without the guard."""
    killed = run_logged(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"],
        tmp_path / "abort.log",
        timeout_s=30,
    )
    assert (killed.exit_code, killed.outer_timeout) == (-signal.SIGABRT, False)
    with pytest.raises(FileNotFoundError, match=r"No such file or directory: 'no-such-command'"):
        run_logged(["no-such-command"], tmp_path / "missing.log", timeout_s=30)
    with pytest.raises(PermissionError, match=r"Permission denied: '/'"):
        run_logged(["/"], tmp_path / "directory.log", timeout_s=30)


def test_the_guard_starts_on_the_standard_library_alone():
    """The guard's start is on every run's clock: run as run_logged runs it,
    it imports no hostio module and none of the heavy ones its parent uses;
    wrongly called, it says how to call it in one line, exit 2."""
    started = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", GUARD_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = started.stderr.splitlines()
    imported = {
        line.rpartition("|")[2].strip() for line in lines if line.startswith("import time:")
    }
    heavy = {"argparse", "dataclasses", "hostio", "pathlib", "subprocess", "threading", "typing"}
    assert (started.returncode, imported & heavy) == (2, set())
    assert lines[-1] == "usage: python hostio/guard.py --guard PARENT_PID STATUS_FD -- COMMAND..."


POOL = """
import sys, time
from concurrent.futures import ProcessPoolExecutor
from hostio import die_with_parent

def nap(_):
    time.sleep(60)

if __name__ == "__main__":
    with ProcessPoolExecutor(2, initializer=die_with_parent) as pool:
        print("started", flush=True)
        list(pool.map(nap, range(2)))
"""


def test_a_pool_worker_ends_with_its_killed_parent(tmp_path, token):
    # afdep build --ptx compiles in a process pool; SIGKILL gives its parent no
    # chance to stop the workers, so they end by the parent-death signal.
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    env = {**os.environ, MARK: token, "PYTHONPATH": PYTHONPATH}
    parent = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE)
    assert parent.stdout.readline() == b"started\n"
    wait_for(lambda: len(marked(token)) == 3, 10, "the parent and its two workers")
    parent.kill()
    parent.wait()
    wait_for(lambda: not marked(token), 10, "no worker left after SIGKILL of the parent")


SWALLOWING_MODULE = """\
import pathlib, time
pathlib.Path(__file__).with_suffix(".started").touch()
try:
    time.sleep(1.0)
except BaseException:  # as some libraries' imports treat every error
    pass
"""
IMPORTING_COMMAND = """\
import sys, time
from hostio import entry_point

@entry_point
def main():
    import swallowing
    time.sleep(float(sys.argv[1]))
    return 0

sys.exit(main())
"""


def start_importing(tmp_path: Path, module: str, work_after_s: float) -> subprocess.Popen:
    """IMPORTING_COMMAND with `module` as `swallowing`, returned once its
    import has begun."""
    (tmp_path / "swallowing.py").write_text(module)
    command = subprocess.Popen(
        [sys.executable, "-c", IMPORTING_COMMAND, str(work_after_s)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), PYTHONPATH])},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for((tmp_path / "swallowing.started").exists, 30, "the import starts")
    except BaseException:
        command.kill()  # a hung import must not outlive the test
        raise
    return command


@pytest.mark.parametrize("work_after_s", [10.0, 0.0], ids=["work-follows", "main-ends"])
def test_a_stop_signal_inside_an_import_is_not_lost(tmp_path, work_after_s):
    """SIGTERM while a module that swallows every error is being imported
    (torch's import is one): before, the KeyboardInterrupt died in the import
    and the command ran on to exit 0; now it comes once the import is done, or
    as main returns."""
    command = start_importing(tmp_path, SWALLOWING_MODULE, work_after_s)
    try:
        command.send_signal(signal.SIGTERM)
        out, err = command.communicate(timeout=30)
    finally:
        command.kill()
    assert (command.returncode, out, err) == (
        143,
        "",
        "interrupted by SIGTERM: no child was running\n",
    )


def test_a_stop_signal_waits_for_a_hung_import_only_so_long(tmp_path):
    """An import that never ends: the signal is acted on after
    IMPORT_WAIT_MAX_S (the module swallows that KeyboardInterrupt too), and a
    second signal leaves at once, with the one line."""
    hung = "import pathlib, time\npathlib.Path(__file__).with_suffix('.started').touch()\n"
    hung += (
        "while True:\n    try:\n        time.sleep(600)\n    except BaseException:\n        pass\n"
    )
    command = start_importing(tmp_path, hung, 0)
    try:
        started = time.monotonic()
        command.send_signal(signal.SIGTERM)
        time.sleep(IMPORT_WAIT_MAX_S + 1)
        assert command.poll() is None  # the swallowed KeyboardInterrupt: it runs on
        command.send_signal(signal.SIGTERM)
        out, err = command.communicate(timeout=30)
    finally:
        command.kill()
    assert time.monotonic() - started < IMPORT_WAIT_MAX_S + 10
    assert (command.returncode, out, err) == (
        143,
        "",
        "interrupted by SIGTERM: no child was running\n",
    )
