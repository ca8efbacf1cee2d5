"""Child processes that die with their parent (docs/catalog.md,
"Pipeline of the fault engine", item 5): run_logged starts every command
through the guard (hostio/guard.py, run as a script), which leads the child's
process group and ends its whole tree when the parent dies or signals it; the
parent keeps a registry of live guards and stops them on Ctrl-C, SIGTERM and
exit; entry_point makes a CLI's main end in one line on either signal."""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Run as a script file: isolated (-I -S) it imports no site and no hostio,
# only what it needs, and its start is on every run's clock.
GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")
# A guard ends its tree at once, but a process holding a GPU can take seconds
# to die; past this the guard is taken for stuck and its group is killed.
GUARD_GRACE_S = 30.0
# How long an interrupted command waits for its children's trees to end.
STOP_WAIT_S = 10.0
# How often a command that may be stopped early looks at its stop event.
STOP_POLL_S = 0.02
CLI_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A stop signal that lands inside an import is sent again this much later,
# for at most this long (an import that hangs must not make it lost).
IMPORT_RETRY_S = 0.05
IMPORT_WAIT_MAX_S = 5.0


@dataclass
class ProcessOutcome:
    command: list[str]
    exit_code: int | None  # None when the outer timeout killed it
    wall_s: float
    outer_timeout: bool
    log_path: str
    log_sha256: str


class ChildrenStopped(KeyboardInterrupt):
    """run_logged in a process that is stopping its children (Ctrl-C,
    SIGTERM, exit): no child is started, and a stopped one has no outcome."""


def run_logged(
    command: list[str],
    log_path: Path,
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stop: threading.Event | None = None,
) -> ProcessOutcome:
    """Run `command` with stdout and stderr to `log_path`, through a guard
    that leads its process group; past `timeout_s`, on Ctrl-C in this
    thread, or once another thread sets `stop`, the guard ends the whole
    tree. The exit code is the command's (-N when a signal N killed it;
    -SIGTERM when `stop` ended it)."""
    if not command:
        raise ValueError("run_logged: an empty command")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        guard = _start_guarded(list(command), log, env, cwd)
        try:
            exit_code, outer_timeout = _wait(guard, timeout_s, stop), False
        except subprocess.TimeoutExpired:
            _end(guard)
            exit_code, outer_timeout = None, True
        except BaseException:  # Ctrl-C in this thread: the tree goes too
            _end(guard)
            raise
        finally:
            _forget(guard)
    if _stopping:
        raise ChildrenStopped(f"stopped with the other children: {command[0]}")
    wall = round(time.perf_counter() - started, 3)
    digest = hashlib.sha256(log_path.read_bytes()).hexdigest()
    return ProcessOutcome(list(command), exit_code, wall, outer_timeout, str(log_path), digest)


def _wait(guard: subprocess.Popen, timeout_s: float, stop: threading.Event | None) -> int:
    """The guard's exit code, its tree ended first if `stop` is set before it
    exits (-SIGTERM then). subprocess.TimeoutExpired past `timeout_s`."""
    if stop is None:
        return guard.wait(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(guard.args, timeout_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return guard.wait(timeout=min(left, STOP_POLL_S))
    _end(guard)
    return guard.returncode


def die_with_parent() -> None:
    """For a worker this process did not start through the guard (a process
    pool's `initializer`): Linux's parent-death signal ends it when its parent
    dies, even by SIGKILL; a parent already gone ends it now."""
    import multiprocessing

    from hostio.guard import PR_SET_PDEATHSIG, _prctl

    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os._exit(1)  # it died before the line above


# ------------------------------------------------------- the parent's registry
_live: set[subprocess.Popen] = set()  # guards still running
_signalled: set[int] = set()  # guards stop_children signalled, for its report
_registry = threading.RLock()  # reentrant: the signal handler runs in any frame
_stopping = False  # set once: this process is on its way out


def start_worker(
    command: list[str], log_path: Path, *, env: dict[str, str] | None, cwd: Path | None
) -> subprocess.Popen:
    """A long-lived child through the guard (it dies with this process, and
    stop_children ends it), talking over its stdin and stdout pipes, its
    stderr to `log_path`. End it with end_worker."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def start() -> subprocess.Popen:
        with open(log_path, "ab") as log:
            return _start_guarded(list(command), log, env, cwd, talk=True)

    return _spawner().submit(start).result()


@functools.cache
def _spawner():
    """The one thread that starts workers, living as long as this process:
    Linux sends the parent-death signal when the *thread* that forked a child
    ends, so a worker started from a pool's short-lived thread would die with
    that thread."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-spawner")


def end_worker(guard: subprocess.Popen) -> None:
    """End a worker start_worker began, with its whole tree."""
    try:
        if guard.poll() is None:
            _end(guard)
    finally:
        _forget(guard)
        for pipe in (guard.stdin, guard.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _start_guarded(command: list[str], log, env, cwd, talk: bool = False) -> subprocess.Popen:
    """The guard, registered, once its command is exec'd; an exec failure is
    raised here as subprocess.Popen would have raised it. `talk`: stdin and
    stdout are pipes, stderr goes to `log`."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as status:
        try:
            with _registry:
                if _stopping:
                    raise ChildrenStopped(f"not started, children are being stopped: {command[0]}")
                guard = subprocess.Popen(
                    [sys.executable, "-I", "-S", GUARD_SCRIPT, "--guard"]
                    + [str(os.getpid()), str(write_end), "--", *command],
                    stdin=subprocess.PIPE if talk else None,
                    stdout=subprocess.PIPE if talk else log,
                    stderr=log if talk else subprocess.STDOUT,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                    pass_fds=(write_end,),
                )
                _live.add(guard)
        finally:
            os.close(write_end)
        try:
            failure = status.read()  # EOF: the command is exec'd (close-on-exec)
        except BaseException:
            _end(guard)
            _forget(guard)
            raise
    if failure:
        guard.wait()
        _forget(guard)
        code = int(failure)
        raise OSError(code, os.strerror(code), command[0])
    return guard


def stopping_children() -> bool:
    """Whether this process is stopping its children (Ctrl-C, SIGTERM, exit)."""
    return _stopping


def _forget(guard: subprocess.Popen) -> None:
    with _registry:
        _live.discard(guard)


def _end(guard: subprocess.Popen) -> None:
    """SIGTERM the guard (it kills its tree, then itself); if it is stuck,
    SIGKILL its process group."""
    guard.send_signal(signal.SIGTERM)
    try:
        guard.wait(timeout=GUARD_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(guard.pid, signal.SIGKILL)
        guard.wait()


def _signal_children() -> None:
    """SIGTERM every live guard, at once (a signal handler calls this), and
    start no more children."""
    global _stopping
    with _registry:
        _stopping = True
        for guard in _live:
            if guard.poll() is None and guard.pid not in _signalled:
                guard.send_signal(signal.SIGTERM)
                _signalled.add(guard.pid)


def stop_children(timeout_s: float = STOP_WAIT_S) -> tuple[int, int]:
    """Stop every live child tree and start no more: (trees stopped, trees
    still ending after `timeout_s`). Runs at exit too."""
    _signal_children()
    with _registry:
        guards = list(_live)
    deadline = time.monotonic() + timeout_s
    for guard in guards:
        with contextlib.suppress(subprocess.TimeoutExpired):
            guard.wait(timeout=max(0.0, deadline - time.monotonic()))
    return len(_signalled), sum(guard.poll() is None for guard in guards)


atexit.register(stop_children)


# ------------------------------------------------------------ CLI entry points
_received: list[int] = []  # the stop signals a command got, first first
_reported: list[int] = []  # its one line is out


def entry_point(main: Callable[..., int]) -> Callable[..., int]:
    """Decorate a CLI's `main(argv) -> int`: SIGTERM is handled as Ctrl-C is;
    on either, every child tree is stopped, ONE line goes to stderr, and
    main returns 130 (Ctrl-C) or 143 (SIGTERM), no traceback. A second
    signal while it unwinds leaves at once (the guards end the trees)."""

    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        if threading.current_thread() is not threading.main_thread():
            return main(*args, **kwargs)  # signal handlers belong to the main thread
        previous = {signum: signal.signal(signum, _on_stop_signal) for signum in CLI_STOP_SIGNALS}
        try:
            exit_code = main(*args, **kwargs)
        except KeyboardInterrupt:
            return _interrupted(*stop_children())
        finally:
            deferred = _cancel_deferred()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if deferred is not None and not _received:  # it came in an import; main ended first
            _received.append(deferred)
            return _interrupted(*stop_children())
        return exit_code

    return run


# A stop signal that came inside an import, and the timer sending it again;
# when the first such signal came.
_deferred: list[tuple[int, threading.Timer]] = []
_deferred_since: list[float] = []


def _on_stop_signal(signum: int, frame) -> None:
    if not _received and _importing(frame) and _may_defer():
        # A KeyboardInterrupt raised inside an import can be swallowed by the
        # module being imported (torch's import does): the module is left half
        # made and the process runs on. The signal is sent again until it
        # lands outside any import.
        _cancel_deferred()
        timer = threading.Timer(IMPORT_RETRY_S, os.kill, (os.getpid(), signum))
        timer.daemon = True
        _deferred.append((signum, timer))
        timer.start()
        return
    _cancel_deferred()
    _received.append(signum)
    _signal_children()
    if len(_received) == 1:
        raise KeyboardInterrupt
    if not _reported:  # a second signal while it unwinds: leave now
        _interrupted(len(_signalled), None)
    os._exit(128 + _received[0])


def _importing(frame) -> bool:
    """Whether the interrupted frame runs inside an import (the import
    machinery's frozen modules are among its callers)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _may_defer() -> bool:
    """Whether a signal may still wait for an import to end."""
    if not _deferred_since:
        _deferred_since.append(time.monotonic())
    return time.monotonic() - _deferred_since[0] < IMPORT_WAIT_MAX_S


def _cancel_deferred() -> int | None:
    """The deferred stop signal, if any, its timer cancelled."""
    if not _deferred:
        return None
    signum, timer = _deferred.pop()
    timer.cancel()
    return signum


def _interrupted(stopped: int, still_ending: int | None) -> int:
    """Say in one line what was stopped (`still_ending` None: not waited
    for); the exit status, 128 + the first signal."""
    signum = _received[0] if _received else signal.SIGINT
    if not stopped:
        done = "no child was running"
    elif stopped == 1:
        done = "1 child stopped with its processes"
    else:
        done = f"{stopped} children stopped with their processes"
    if stopped and still_ending is None:
        done += ", leaving without waiting for them"
    elif still_ending:
        done += f", {still_ending} still ending after {STOP_WAIT_S:g} s"
    _reported.append(signum)
    print(f"interrupted by {signal.Signals(signum).name}: {done}", file=sys.stderr, flush=True)
    return 128 + signum
