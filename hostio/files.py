"""Atomic writes (a report is whole or not there), the folder a command
works in, removed or kept by one rule, and where a command may write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from hostio.machine import RESULTS_DIR
from hostio.usage import UsageError


def write_bytes(path: Path, data: bytes) -> None:
    """Written to a temporary file (`.<name>.*.tmp`) and renamed: no reader
    sees half a file, and a failed write leaves the old one and no temporary
    file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        # mkstemp makes it 0600; a report is for others to read too (0644 less the umask).
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:  # nothing half-written stays behind
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """This process's umask, read from /proc (setting it to read it would
    race with the threads writing files); 0o022 where /proc does not say."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def cache_home() -> Path:
    """Where caches go: `$XDG_CACHE_HOME`, else `~/.cache`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def write_text(path: Path, text: str) -> None:
    """A report written whole or not at all (write_bytes)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, document: dict) -> None:
    write_text(path, json.dumps(document, indent=1) + "\n")


class KeptFolder:
    """Where a command's scratch trees or run logs go: one rule for every
    command (docs/architecture.md, "Layout"). A folder the user named is
    theirs and stays. A temporary one is removed at the end unless `keep`,
    a run missed its expectation (`failed`), or the command was interrupted
    or broke; then its path is said in one line, `<what> kept (<why>): PATH`.
    Bad input (a UsageError, or one of the library errors `bad_input` names)
    removes it: no work was done in it.

        with KeptFolder(args.logs_dir, "afdep-validate-", "logs", keep=args.keep) as logs:
            ...  # runs logging under logs.path
            logs.failed = not every_run_met
    """

    def __init__(
        self, named: Path | None, prefix: str, what: str, *, keep: bool = False, bad_input=()
    ):
        self.named, self.prefix, self.what, self.keep = named, prefix, what, keep
        self.bad_input = (UsageError, *bad_input)
        self.failed = False

    def __enter__(self) -> KeptFolder:
        if self.named is None:
            self.path = Path(tempfile.mkdtemp(prefix=self.prefix))
        else:
            self.path = Path(self.named)
            self.path.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, kind, error, trace) -> None:
        if self.named is not None:
            return
        why = "--keep" if self.keep else "a run failed" if self.failed else ""
        if kind is not None and not why and not issubclass(kind, self.bad_input):
            why = "interrupted" if issubclass(kind, KeyboardInterrupt) else "an error"
        if why:
            print(f"{self.what} kept ({why}): {self.path}", flush=True)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def output_problem(path: Path, sources: Iterable[Path] = ()) -> str | None:
    """Why a command may not write `path`, or None: the one rule of every
    path a command writes. Never inside a target's `sources` (what it writes
    there would change the tree it judges, and the engine's digest guard
    would find that only after the work), never over a file its checkout
    tracks (but the results record, RESULTS_DIR, is written over when a
    command measures again)."""
    where = Path(path).resolve()
    for folder in sources:
        folder = Path(folder).resolve()
        if where == folder or folder in where.parents:
            return (
                f"inside the target's sources ({_shown(folder)}); "
                "the command's files would change the tree it judges"
            )
    tracked = tracked_name(where)
    if tracked is not None and not Path(tracked).is_relative_to(RESULTS_DIR):
        return f"a file the checkout tracks ({tracked}); write it elsewhere"
    return None


def refuse_output(path: Path, argument: str, sources: Iterable[Path] = ()) -> None:
    """A UsageError naming `argument` when output_problem refuses `path`."""
    problem = output_problem(path, sources)
    if problem is not None:
        raise UsageError(f"{argument} {path}: {problem}")


def tracked_name(path: Path) -> str | None:
    """`path` as its git checkout names it (from the top) when the checkout
    tracks that file, else None (a folder, untracked, or no checkout)."""
    path = Path(path)
    if path.is_dir() or not path.parent.is_dir():
        return None
    try:
        listed = subprocess.run(
            ["git", "-C", str(path.parent), "ls-files", "--full-name", "-z", "--", path.name],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git here: nothing is tracked
        return None
    names = [n.decode(errors="replace") for n in listed.stdout.split(b"\0") if n]
    # The pathspec also matches a folder's files: only the file itself counts.
    return next((n for n in names if n == path.name or n.endswith("/" + path.name)), None)


def _shown(folder: Path) -> str:
    """`folder` from the working directory when it lies under it (as the user
    typed it, most likely), else in full."""
    try:
        return folder.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(folder)
