"""One run of a target's PTX command, and its failure said in one line: the
compiler's first error with its file from the tree, else the log's last
line (docs/synchronization.md, "The publish contract"). The whole-tree
command (invariants/sync/ptx_check.py) and each translation unit's
(invariants/sync/ptx_units.py) run through it."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from hostio import run_logged
from invariants.sync.ptx_read import PtxError

# A compiler's error line: `path(line): error: message` (NVRTC, nvcc) or
# `path:line:col: error: message` (gcc, clang).
COMPILER_ERROR = re.compile(
    r"(?P<file>[^\s:()]+)(?:\((?P<line>\d+)\)|:(?P<gline>\d+)(?::\d+)?):\s*(?:fatal )?error:?\s*"
    r"(?P<message>.*)"
)


def compiler_error(lines: list[str], tree_root: Path) -> str | None:
    """The first error a compiler said in a log's `lines`, as `file:line:
    message` with the file from `tree_root` (a scratch tree's path is gone
    once its review ends); None when no line says one."""
    for line in lines:
        found = COMPILER_ERROR.search(line)
        if found is None:
            continue
        file = found["file"]
        try:
            file = Path(file).resolve().relative_to(Path(tree_root).resolve()).as_posix()
        except ValueError:
            pass
        return f"{file}:{found['line'] or found['gline']}: {found['message'].strip()}"
    return None


def run_ptx(
    words: list[str],
    log: Path,
    tree_root: Path,
    *,
    env: dict[str, str],
    timeout_s: float,
    wrote: list[Path],
    what: str = "the ptx command",
    stop: threading.Event | None = None,
) -> None:
    """`words` run in `tree_root`, what they say into `log` (removed when all
    went well); PtxError in one line when they cannot start, fail, or leave
    a file of `wrote` unwritten."""
    try:
        outcome = run_logged(words, log, timeout_s=timeout_s, env=env, cwd=tree_root, stop=stop)
    except OSError as error:
        raise PtxError(f"{what} could not start {words[0]!r}: {error}") from None
    missing = [path.name for path in wrote if not path.is_file()]
    if outcome.exit_code != 0 or missing:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        how = "timed out" if outcome.outer_timeout else f"exit {outcome.exit_code}"
        if outcome.exit_code == 0:
            how = f"wrote no {missing[0]}"
        said = compiler_error(lines, Path(tree_root)) or (lines or ["-"])[-1]
        raise PtxError(f"{what} failed ({how}): {said} (log: {log})")
    log.unlink(missing_ok=True)
