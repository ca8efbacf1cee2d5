"""A warm worker: imports once, then runs each job (docs/catalog.md, "Warm
workers"). Started by the fault engine (faults/pipeline/serve.py) through
hostio's guard, so it dies with its parent:

    python -m hostio.serve [--preload MODULE ...] [--in-process HOOKS]

It imports each `--preload` module once (the slow imports a run would make:
torch, say), writes one ready line, then reads one job a line on stdin and
answers one end-of-run line on stdout, both JSON:

    ready: {"ready": true, "pid": P, "loaded": [every module file it imported],
            "in_process": BOOL}
    job:   {"argv": [...], "env": {...}, "cwd": DIR, "log": FILE}
    end:   {"exit": CODE}                  CODE < 0: the run was killed by signal -CODE
           {"exit": 127, "errno": N}       its command could not start (nothing ran)
           {"exit": CODE, "retire": true}  the run is over, and so is this worker

A job whose argv is `<this interpreter> -m MODULE ARGS...` runs that module
after imports that point at the job's PYTHONPATH (so a scratch tree's own
Python is what runs, whatever tree the worker started in); any other argv is
exec'd in a forked child. Its output goes to `log`, its environment is `env`
exactly, its folder `cwd`.

By default each run is a child forked before anything starts a device: a run
that traps, hangs or crashes ends only its child, and the next run starts
from the worker's clean state. With `--in-process HOOKS`, a Python module's
runs are made in this process, one after another, so what the worker holds
(a GPU's context) stays warm across runs: HOOKS is a module whose `start()`
runs once before the ready line and whose `healthy()` says after each run
whether the worker may take another (False, or an exception: it answers
`retire` and exits). A run that ends the process (os._exit, a signal) ends
the worker; its engine reads the worker's exit as the run's. Stdin's end
(the engine gone) ends the worker.

Stdlib only; the preloads and the hooks are the only other imports."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback


def loaded_files() -> list[str]:
    """Every module file this process has imported (absolute paths)."""
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            files.add(os.path.abspath(path))
    return sorted(files)


def python_module(argv: list[str]) -> tuple[str, list[str]] | None:
    """(module, its arguments) when `argv` is this interpreter's `-m MODULE ...`
    (options before `-m` make it a command to exec)."""
    if len(argv) >= 3 and argv[1] == "-m" and os.path.realpath(argv[0]) == os.path.realpath(
        sys.executable
    ):
        return argv[2], argv[3:]
    return None


def _own_paths() -> list[str]:
    """The PYTHONPATH entries this worker started with: the tree it imports from."""
    return [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _point_imports_at(job_paths: list[str], stale_roots: list[str]) -> None:
    """sys.path as the job's own process would have it (its PYTHONPATH first),
    and every module imported from a tree in `stale_roots` (the worker's own,
    and in process the earlier jobs') forgotten, so the run imports its tree's
    files, not theirs."""
    stale = {os.path.abspath(p) for p in stale_roots} | set(job_paths)
    sys.path[:] = job_paths + [p for p in sys.path if os.path.abspath(p) not in stale]
    roots = tuple(os.path.join(p, "") for p in stale)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        places = [path] if isinstance(path, str) else list(getattr(module, "__path__", None) or [])
        if any(isinstance(p, str) and os.path.abspath(p).startswith(roots) for p in places):
            del sys.modules[name]


def _job_fds(job: dict) -> None:
    """fd 0 on nothing (never the engine's pipe), fds 1 and 2 on the job's log."""
    nothing = os.open(os.devnull, os.O_RDONLY)
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, opened in ((0, nothing), (1, log), (2, log)):
        os.dup2(opened, fd)
    os.close(nothing)
    os.close(log)


def _job_paths(job: dict) -> list[str]:
    return [os.path.abspath(p) for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]


def _run_module(name: str, arguments: list[str]) -> int:
    """`python -m name arguments` here: its exit code."""
    sys.argv = [name, *arguments]
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exit_:
        if isinstance(exit_.code, int) or exit_.code is None:
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _child(job: dict, worker_paths: list[str], exec_errors: int) -> int:
    """In the forked child: the run, its exit code. A command that cannot be
    exec'd writes its errno to `exec_errors` (closed on a good exec)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    _job_fds(job)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    argv = job["argv"]
    module = python_module(argv)
    if module is None:
        try:
            os.execvpe(argv[0], argv, job["env"])
        except OSError as error:  # the worker answers it: nothing ran
            os.write(exec_errors, str(error.errno).encode())
            return 127
    name, arguments = module
    _point_imports_at(_job_paths(job), worker_paths)
    return _run_module(name, arguments)


def run_job(job: dict, worker_paths: list[str]) -> dict:
    """Fork, run the job in the child, wait: the end-of-run line's fields,
    its exit code (-N: signal N), or the errno of a command that could not start."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()  # both close on exec
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            code = _child(job, worker_paths, write_end)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code & 0xFF)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as exec_errors:
        failed = exec_errors.read()  # EOF at the exec, or at the child's end
    _, status = os.waitpid(pid, 0)
    if failed:
        return {"exit": 127, "errno": int(failed)}
    return {"exit": os.waitstatus_to_exitcode(status)}


class InProcess:
    """The jobs run in this process, one after another (--in-process): what
    `hooks.start()` made stays warm across them. Each job gets the process as
    its own would be (fds 1 and 2 on its log, its env, cwd, argv, sys.path,
    signal handlers, sys.stdout and sys.stderr) and gives it back; the
    modules imported from the worker's tree are forgotten before the first
    job, and each job's own when it ends, so the next imports its tree's."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGALRM)

    def __init__(self, hooks: str, worker_paths: list[str]):
        self.hooks = importlib.import_module(hooks)
        self.worker_paths = list(worker_paths)
        self.hooks.start()

    def run(self, job: dict) -> dict:
        module = python_module(job["argv"])
        if module is None:  # a program, not Python: its own child as by default
            return run_job(job, self.worker_paths)
        code = self._run(job, *module)
        try:
            healthy = bool(self.hooks.healthy())
        except Exception:
            traceback.print_exc()
            healthy = False
        return {"exit": code} if healthy else {"exit": code, "retire": True}

    def _run(self, job: dict, name: str, arguments: list[str]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        saved_fds = os.dup(0), os.dup(1), os.dup(2)  # fd 0 is the engine's pipe: not the run's
        # The folder by descriptor: the tree the worker started in may be gone by now.
        saved = (os.open(".", os.O_RDONLY), dict(os.environ), list(sys.argv), list(sys.path))
        streams = sys.stdout, sys.stderr
        handlers = {signum: signal.getsignal(signum) for signum in self.SIGNALS}
        _job_fds(job)
        job_paths = _job_paths(job)
        try:
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            _point_imports_at(job_paths, self.worker_paths)
            return _run_module(name, arguments)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = streams
            _point_imports_at([], job_paths)  # the job's modules forgotten: the next imports its own
            for fd, saved_fd in enumerate(saved_fds):
                os.dup2(saved_fd, fd)
                os.close(saved_fd)
            cwd, environ, sys.argv[:], sys.path[:] = saved
            os.fchdir(cwd)
            os.close(cwd)
            os.environ.clear()
            os.environ.update(environ)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            gc.collect()  # what the run held (a GPU's buffers) is let go before the next


def serve(preload: list[str], in_process: str | None = None) -> int:
    # The protocol has its own descriptor: whatever a preload prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine ends a worker, not a Ctrl-C
    started = time.perf_counter()
    for name in preload:
        importlib.import_module(name)
    worker_paths = _own_paths()
    runner = InProcess(in_process, worker_paths) if in_process else None
    ready = {
        "ready": True,
        "pid": os.getpid(),
        "import_s": round(time.perf_counter() - started, 3),
        "loaded": loaded_files(),
        "in_process": runner is not None,
    }
    answers.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        answer = runner.run(job) if runner else run_job(job, worker_paths)
        answers.write(json.dumps(answer) + "\n")
        if answer.get("retire"):
            return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hostio.serve", description=__doc__)
    parser.add_argument("--preload", nargs="*", default=[], help="modules imported once")
    parser.add_argument(
        "--in-process",
        metavar="HOOKS",
        default=None,
        help="run Python jobs in this process; HOOKS: a module with start() and healthy()",
    )
    args = parser.parse_args(argv)
    return serve(args.preload, args.in_process)


if __name__ == "__main__":
    sys.exit(main())
