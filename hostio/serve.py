"""A warm worker: imports once, then forks a fresh child per run (docs/catalog.md,
"Warm workers"). Started by the fault engine (faults/pipeline/serve.py)
through hostio's guard, so it dies with its parent:

    python -m hostio.serve [--preload MODULE ...]

It imports each `--preload` module once (the slow imports a run would make:
torch, say), writes one ready line, then reads one job a line on stdin and
answers one end-of-run line on stdout, both JSON:

    ready: {"ready": true, "pid": P, "loaded": [every module file it imported]}
    job:   {"argv": [...], "env": {...}, "cwd": DIR, "log": FILE}
    end:   {"exit": CODE}                  CODE < 0: the run was killed by signal -CODE
           {"exit": 127, "errno": N}       its command could not start (nothing ran)

Each run is a child forked before anything starts a device: its output goes to
`log`, its environment is `env` exactly, its folder `cwd`. A run whose argv is
`<this interpreter> -m MODULE ARGS...` runs that module in the child, after
imports that point at the job's PYTHONPATH (so a scratch tree's own Python is
what runs, whatever tree the worker started in); any other argv is exec'd. A
run that traps, hangs or crashes ends only its child: the next run starts from
the worker's clean state. Stdin's end (the engine gone) ends the worker.

Stdlib only; the preloads are the only other imports."""

from __future__ import annotations

import argparse
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


def _point_imports_at(job_paths: list[str], worker_paths: list[str]) -> None:
    """sys.path as the job's own process would have it (its PYTHONPATH first),
    and every module imported from the worker's tree forgotten, so the run
    imports its tree's files, not the worker's."""
    sys.path[:] = job_paths + [p for p in sys.path if os.path.abspath(p) not in worker_paths]
    roots = tuple(os.path.join(p, "") for p in worker_paths)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.abspath(path).startswith(roots):
            del sys.modules[name]


def _child(job: dict, worker_paths: list[str], exec_errors: int) -> int:
    """In the forked child: the run, its exit code. A command that cannot be
    exec'd writes its errno to `exec_errors` (closed on a good exec)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
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
    job_paths = [os.path.abspath(p) for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    _point_imports_at(job_paths, worker_paths)
    sys.argv = [name, *arguments]
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


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


def serve(preload: list[str]) -> int:
    # The protocol has its own descriptor: whatever a preload prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine ends a worker, not a Ctrl-C
    started = time.perf_counter()
    for name in preload:
        importlib.import_module(name)
    worker_paths = _own_paths()
    ready = {
        "ready": True,
        "pid": os.getpid(),
        "import_s": round(time.perf_counter() - started, 3),
        "loaded": loaded_files(),
    }
    answers.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        answers.write(json.dumps(run_job(job, worker_paths)) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hostio.serve", description=__doc__)
    parser.add_argument("--preload", nargs="*", default=[], help="modules imported once")
    args = parser.parse_args(argv)
    return serve(args.preload)


if __name__ == "__main__":
    sys.exit(main())
