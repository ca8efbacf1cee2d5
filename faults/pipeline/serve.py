"""Warm workers: a target's runs made by long-lived workers that import once
and fork a child per run ([target.serve], docs/catalog.md, "Warm workers"),
instead of a process started per run. The log, its parse and the verdict are
the process-per-run path's: a worker's child writes the same log.

A worker is started in the tree of the first run that needs one, through
hostio's guard (it dies with this process, SIGKILL included). It says which
files it imported; a run whose tree holds other contents at any of those
paths (a change to the worker's own Python) gets a worker of its own. A run
past its timeout ends its worker, child and all, and the next run gets a
fresh one; a worker that died is never reused.

A worker that makes its runs in its own process (it says `in_process`: what
it holds, a GPU's context, stays warm) ends with a run that ends the process:
that exit is the run's, as a process of its own would have ended, and the
next run gets a fresh worker. One that says `retire` after a run (its own
check found what the run left unfit to run another) is ended with it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hostio import ProcessOutcome, end_worker, start_worker, stopping_children

# The longest one wait on a worker's pipe blocks before the deadline is looked at again.
POLL_S = 0.05
# How long a worker whose run ended its process may take to be gone (its guard reaps it).
EXIT_WAIT_S = 10.0


class WorkerError(RuntimeError):
    """A worker could not start, broke its protocol or died while no run of
    its own could explain it: nothing was judged."""


def _file_sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:  # absent in this tree: differs from any worker's file
        return None


@dataclass(eq=False)
class Worker:
    process: subprocess.Popen
    command: tuple[str, ...]
    tree: Path
    own_files: dict[str, str | None] = field(default_factory=dict)  # tree path -> sha256
    import_s: float = 0.0
    in_process: bool = False  # its runs are made in its own process (hostio/serve.py)
    runs: int = 0
    _buffer: bytes = b""

    def read_line(self, deadline: float) -> dict | None:
        """The worker's next JSON line; None past `deadline` (monotonic);
        EOFError when it closed its end (it died)."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, POLL_S))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            raise WorkerError(f"worker {self.process.pid} wrote {line[:200]!r}") from None

    def serves(self, command: tuple[str, ...], tree: Path, shas) -> bool:
        """Whether this worker runs `tree`'s runs as that tree's own process would."""
        return command == self.command and all(
            shas(tree / name) == sha for name, sha in self.own_files.items()
        )


class WorkerPool:
    """The warm workers of one engine: `command(tree, out)` the worker's words
    for a tree, `env(tree)` its environment (a run's own goes with its job)."""

    def __init__(self, command, env, logs: Path, start_timeout_s: float):
        self.command, self.env = command, env
        self.logs = Path(logs)
        self.start_timeout_s = start_timeout_s
        self._idle: list[Worker] = []
        self._all: list[Worker] = []
        self._lock = threading.Condition()
        self._spares = 0  # in-process workers starting in the background for the next runs
        self._closed = False
        self._shas: dict[Path, str | None] = {}  # a scratch tree's files never change once built
        self.started = 0  # workers started, for the report and the tests
        self.replaced = 0  # workers ended by a run's timeout or death

    def _sha(self, path: Path) -> str | None:
        if path not in self._shas:
            self._shas[path] = _file_sha(path)
        return self._shas[path]

    def run(
        self,
        argv: list[str],
        log_path: Path,
        *,
        timeout_s: float,
        env: dict[str, str],
        tree: Path,
        out: Path,
    ) -> ProcessOutcome:
        """One run of `argv` with `env` in `tree`, its output in `log_path`,
        as hostio.run_logged would make it."""
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        worker = self._take(tuple(self.command(tree, out)), Path(tree))
        started = time.perf_counter()
        job = {"argv": list(argv), "env": env, "cwd": str(tree), "log": str(log_path)}
        try:
            worker.process.stdin.write((json.dumps(job) + "\n").encode())
            worker.process.stdin.flush()
            answer = worker.read_line(time.monotonic() + timeout_s)
        except (EOFError, BrokenPipeError, OSError) as error:
            if worker.in_process and not stopping_children():
                # The run ended the worker's process: its exit is the run's.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.process.wait(timeout=EXIT_WAIT_S)
                exit_code = worker.process.poll()
                self._drop(worker)
                return self._outcome(argv, log_path, exit_code, started, exit_code is None)
            self._drop(worker)
            if stopping_children():
                raise KeyboardInterrupt("stopped with the other children") from None
            raise WorkerError(
                f"worker {worker.process.pid} died during a run of {tree} "
                f"(exit {worker.process.returncode}; its log: {self._log(worker)}): "
                f"{type(error).__name__}"
            ) from None
        except BaseException:
            self._drop(worker)
            raise
        if answer is None:  # past the timeout: the worker goes with its child
            self._drop(worker)
            return self._outcome(argv, log_path, None, started, True)
        exit_code = answer.get("exit")
        if not isinstance(exit_code, int):
            self._drop(worker)
            raise WorkerError(f"worker {worker.process.pid} answered {answer!r}")
        worker.runs += 1
        if answer.get("retire"):
            self._drop(worker)
        else:
            with self._lock:
                self._idle.append(worker)
        if "errno" in answer:  # as the process-per-run path says it: nothing ran
            raise OSError(answer["errno"], os.strerror(answer["errno"]), argv[0])
        return self._outcome(argv, log_path, exit_code, started, False)

    @staticmethod
    def _outcome(argv, log_path: Path, exit_code, started: float, outer_timeout: bool):
        wall = round(time.perf_counter() - started, 3)
        data = log_path.read_bytes() if log_path.exists() else b""
        return ProcessOutcome(
            list(argv), exit_code, wall, outer_timeout, str(log_path),
            hashlib.sha256(data).hexdigest(),
        )  # fmt: skip

    def _take(self, command: tuple[str, ...], tree: Path) -> Worker:
        """An idle worker that serves `tree` (one a spare's start will give,
        if none is idle yet), else a new one started there."""
        with self._lock:
            while True:
                for worker in self._idle:
                    if worker.process.poll() is None and worker.serves(command, tree, self._sha):
                        self._idle.remove(worker)
                        return worker
                if not self._spares:
                    break
                self._lock.wait(self.start_timeout_s)
        return self._start(command, tree)

    def _start_spare(self, worker: Worker) -> None:
        """A worker like `worker` (in process, ended by its run) started in the
        background, so the next run finds a warm one instead of paying the start."""
        if not worker.in_process or not worker.tree.is_dir():
            return
        with self._lock:
            if self._closed:
                return
            self._spares += 1

        def start() -> None:
            try:
                spare = self._start(worker.command, worker.tree)
            except Exception:  # its own run starts one, and says why if that fails too
                spare = None
            with self._lock:
                self._spares -= 1
                if spare is not None:
                    self._idle.append(spare)
                self._lock.notify_all()

        threading.Thread(target=start, name="worker-spare", daemon=True).start()

    def _log(self, worker: Worker) -> Path:
        return self.logs / f"worker-{worker.process.pid}.log"

    def _start(self, command: tuple[str, ...], tree: Path) -> Worker:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"worker-start-{os.getpid()}-{threading.get_ident()}.log"
        try:
            process = start_worker(list(command), log, env=self.env(tree), cwd=tree)
        except OSError as error:
            raise WorkerError(f"worker {command[0]!r} could not start: {error}") from None
        worker = Worker(process, command, tree)
        with self._lock:
            closed = self._closed
            if not closed:
                self._all.append(worker)
                self.started += 1
        if closed:  # a spare that lost the race with close()
            end_worker(process)
            raise WorkerError("the pool is closed")
        try:
            ready = worker.read_line(time.monotonic() + self.start_timeout_s)
        except EOFError:
            process.wait()
            self._drop(worker, replaced=False)
            said = log.read_text(errors="replace").strip().splitlines()[-1:] or ["its log is empty"]
            raise WorkerError(
                f"worker {' '.join(command)} ended before it was ready "
                f"(exit {process.returncode}): {said[0]}"
            ) from None
        except BaseException:
            self._drop(worker, replaced=False)
            raise
        if not ready or ready.get("ready") is not True:
            self._drop(worker, replaced=False)
            raise WorkerError(f"worker {' '.join(command)} not ready after "
                              f"{self.start_timeout_s:g} s: {ready!r}")  # fmt: skip
        log.rename(self._log(worker))
        root = tree.resolve()
        for path in ready.get("loaded", []):
            path = Path(path)
            if path.is_relative_to(root):
                name = path.relative_to(root).as_posix()
                worker.own_files[name] = self._sha(tree / name)
        worker.import_s = float(ready.get("import_s", 0.0))
        worker.in_process = ready.get("in_process") is True
        return worker

    def _drop(self, worker: Worker, replaced: bool = True) -> None:
        """End `worker` with its tree; `replaced`: a run ended it (the next gets
        a new one, started now in the background when it ran in process)."""
        end_worker(worker.process)
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
            if worker in self._all:
                self._all.remove(worker)
            self.replaced += replaced
        if replaced:
            self._start_spare(worker)

    def close(self) -> None:
        """End every worker (none outlives its engine's work)."""
        with self._lock:
            self._closed = True
            workers, self._all, self._idle = list(self._all), [], []
        for worker in workers:
            end_worker(worker.process)

    @property
    def alive(self) -> list[int]:
        """The pids of this pool's workers still running."""
        with self._lock:
            return [w.process.pid for w in self._all if w.process.poll() is None]
