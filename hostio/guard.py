"""The guard every child of hostio.run_logged starts through, run as a
script: `python -I -S hostio/guard.py --guard PARENT_PID STATUS_FD --
COMMAND...` (docs/catalog.md, "Pipeline of the fault engine", item 5).
It leads the child's process group, is the subreaper of everything below it,
and kills that whole tree when its parent dies (Linux's parent-death signal)
or when it is signalled. Linux only: prctl and /proc.

Its start is on every run's clock, so it imports nothing but os, signal and
sys (resource and ctypes where they are used) and no other module of hostio:
isolated (-I) it could not, its own folder is not on sys.path."""

from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False  # typing alone would double the guard's imports
if TYPE_CHECKING:
    from typing import NoReturn

GUARD_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
USAGE = "usage: python hostio/guard.py --guard PARENT_PID STATUS_FD -- COMMAND..."


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


def guard(parent: int, status_fd: int, command: list[str]) -> NoReturn:
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
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended on its own meanwhile
                pass
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


if __name__ == "__main__":
    if sys.argv[1:2] != ["--guard"] or sys.argv[4:5] != ["--"] or not sys.argv[5:]:
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    guard(int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:])
