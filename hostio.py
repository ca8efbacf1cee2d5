"""Host-side helpers the kernel package's tools and the fault engine share,
with no dependency on either (docs/architecture.md, "Layout"): child
processes that die with their parent, atomic writes, the machine's GPUs.

Every child of run_logged starts through a guard: this file run as a script
(`python hostio.py --guard PARENT_PID STATUS_FD -- COMMAND...`). The guard
leads the child's process group, is the subreaper of everything below it,
and kills that whole tree when its parent dies (Linux's parent-death signal)
or when it is signalled; the parent keeps a registry of live guards and
stops them on Ctrl-C, SIGTERM and exit (docs/architecture.md, "Pipeline of
the fault engine", item 5). Linux only: prctl and /proc."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

# Imported where they are used (hashlib, json, tempfile): every
# guard runs this file as a script, and its start is on every run's clock.

GUARD_SCRIPT = os.path.abspath(__file__)
GUARD_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# A guard ends its tree at once, but a process holding a GPU can take seconds
# to die; past this the guard is taken for stuck and its group is killed.
GUARD_GRACE_S = 30.0
# How long an interrupted command waits for its children's trees to end.
STOP_WAIT_S = 10.0
CLI_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
) -> ProcessOutcome:
    """Run `command` with stdout and stderr to `log_path`, through a guard
    that leads its process group; past `timeout_s`, or on Ctrl-C in this
    thread, the guard ends the whole tree. The exit code is the command's
    (-N when a signal N killed it)."""
    import hashlib

    if not command:
        raise ValueError("run_logged: an empty command")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        guard = _start_guarded(list(command), log, env, cwd)
        try:
            exit_code, outer_timeout = guard.wait(timeout=timeout_s), False
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


# ------------------------------------------------------- the parent's registry
_live: set[subprocess.Popen] = set()  # guards still running
_signalled: set[int] = set()  # guards stop_children signalled, for its report
_registry = threading.RLock()  # reentrant: the signal handler runs in any frame
_stopping = False  # set once: this process is on its way out


def _start_guarded(command: list[str], log, env, cwd) -> subprocess.Popen:
    """The guard, registered, once its command is exec'd; an exec failure is
    raised here as subprocess.Popen would have raised it."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as status:
        try:
            with _registry:
                if _stopping:
                    raise ChildrenStopped(f"not started, children are being stopped: {command[0]}")
                guard = subprocess.Popen(
                    [sys.executable, "-I", "-S", GUARD_SCRIPT, "--guard"]
                    + [str(os.getpid()), str(write_end), "--", *command],
                    stdout=log,
                    stderr=subprocess.STDOUT,
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
            return main(*args, **kwargs)
        except KeyboardInterrupt:
            return _interrupted(*stop_children())
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    return run


def _on_stop_signal(signum: int, frame) -> None:
    _received.append(signum)
    _signal_children()
    if len(_received) == 1:
        raise KeyboardInterrupt
    if not _reported:  # a second signal while it unwinds: leave now
        _interrupted(len(_signalled), None)
    os._exit(128 + _received[0])


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


# ------------------------------------------------------------------ the guard
class _GuardStop(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_guard_stop(signum: int, frame) -> None:
    for each in GUARD_STOP_SIGNALS:  # one stop is enough: the cleanup runs once
        signal.signal(each, signal.SIG_IGN)
    raise _GuardStop(signum)


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl: not Linux
        return False


def _guard(parent: int, status_fd: int, command: list[str]) -> NoReturn:
    """Lead the group, run `command` in it, exit as it exited; when signalled
    or orphaned (the parent-death signal is SIGTERM), kill the tree first."""
    os.set_inheritable(status_fd, False)  # the command closes it on exec
    for signum in GUARD_STOP_SIGNALS:
        signal.signal(signum, _raise_guard_stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    try:
        if os.getppid() != parent:  # it died before the line above
            raise _GuardStop(signal.SIGTERM)
        child = _spawn(command, status_fd)
        while (reaped := os.waitpid(-1, 0))[0] != child:
            pass  # an orphan this subreaper inherited
        for signum in GUARD_STOP_SIGNALS:  # the command ended: what is left goes anyway
            signal.signal(signum, signal.SIG_IGN)
    except _GuardStop as stop:
        _end_descendants()
        _die_by(stop.signum)
    _end_descendants()  # what the command left running
    if os.WIFSIGNALED(reaped[1]):
        _die_by(os.WTERMSIG(reaped[1]))
    os._exit(os.waitstatus_to_exitcode(reaped[1]))


def _spawn(command: list[str], status_fd: int) -> int:
    """fork + exec; an exec failure's errno goes to `status_fd`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, GUARD_STOP_SIGNALS)  # none between fork and exec
    pid = os.fork()
    if pid == 0:
        try:  # the dispositions subprocess.Popen gives a child
            for signum in (*GUARD_STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, GUARD_STOP_SIGNALS)
            os.execvp(command[0], command)
        except OSError as error:
            os.write(status_fd, str(error.errno).encode())
        finally:
            os._exit(127)
    os.close(status_fd)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, GUARD_STOP_SIGNALS)
    return pid


def _descendants(root: int) -> list[int]:
    """Every process below `root`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    parent = int(stat.read().rpartition(b")")[2].split()[1])
            except (OSError, IndexError, ValueError):  # it ended while we looked
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def _end_descendants() -> None:
    """SIGKILL every descendant and reap until no child is left. The group
    kill is not enough: torchrun starts each worker in its own session."""
    while True:
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:  # none left
            return
        time.sleep(0.005)


def _die_by(signum: int) -> NoReturn:
    """Exit killed by `signum`, as the command was, leaving no core file."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # a signal whose default is not to end the process


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # no torch with CUDA: a CPU machine
        return 0


def gpu_group(index: int, size: int, visible: str | None, count: int) -> list[str]:
    """The devices of group `index`: the index-th run of `size` devices of
    those visible (an outer CUDA_VISIBLE_DEVICES, else 0..count-1)."""
    devices = [d for d in visible.split(",") if d] if visible else [str(i) for i in range(count)]
    group = devices[index * size : (index + 1) * size]
    if len(group) < size:
        raise LookupError(
            f"GPU group {index} needs devices {index * size}..{(index + 1) * size - 1} "
            f"of {devices}: run fewer workers"
        )
    return group


def machine_name() -> str:
    """`2xH200`, or `cpu`: the name results are filed under."""
    count = gpu_count()
    if not count:
        return "cpu"
    import torch

    return f"{count}x{torch.cuda.get_device_name(0).replace('NVIDIA ', '').split()[0]}"


def write_text(path: Path, text: str) -> None:
    """Written to a temporary file and renamed: no reader sees half a report,
    and a failed write leaves the old report and no temporary file."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:  # nothing half-written stays behind
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, document: dict) -> None:
    import json

    write_text(path, json.dumps(document, indent=1) + "\n")


def at_least_one(text: str) -> int:
    """argparse type for runs at a time (--slots, --jobs, --repeat): an int >= 1."""

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, got {value}")
    return value


class UsageError(ValueError):
    """Bad input: said in one line naming the argument, knob or file at fault
    (exit 2), before any work starts."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `prog: error: ...`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--guard"] or sys.argv[4:5] != ["--"] or not sys.argv[5:]:
        print("usage: python hostio.py --guard PARENT_PID STATUS_FD -- COMMAND...", file=sys.stderr)
        sys.exit(2)
    _guard(int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:])
