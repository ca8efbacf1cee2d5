"""[target.knobs]: the environment variables a target reads, by their
prefix, and the target's own command that checks them. Every command of the
engine asks it before any work when such a variable is set, so a misspelt
or bad knob is refused in one line, not found by the runs (docs/catalog.md,
"Knobs")."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from faults.catalog.fields import command, fail
from faults.catalog.model import KNOB_PLACEHOLDERS, Knobs
from hostio import run_logged

# A check reads the environment and exits: a minute is a check that hangs.
KNOB_CHECK_S = 60.0


def knobs_table(path: Path, raw) -> Knobs | None:
    """[target.knobs] prefix, check: the variables' common start and the
    command that exits 0 when they are good, else says why in a line on stderr."""
    if raw is None:
        return None
    where = "target.knobs"
    if not isinstance(raw, dict) or set(raw) != {"prefix", "check"}:
        raise fail(path, where, f"a table with two keys, prefix and check; got {raw!r}")
    prefix = raw["prefix"]
    if not isinstance(prefix, str) or not prefix.strip():
        raise fail(path, where, f"prefix: the start of every knob's name, got {prefix!r}")
    check = command(path, where, "check", raw["check"], known=KNOB_PLACEHOLDERS)
    if not check:
        raise fail(path, where, "check: at least the program to start")
    return Knobs(prefix, check)


def knob_problem(knobs: Knobs, tree: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """The check's line saying which knob of `environ` is bad, or None: when
    they are good, and at no cost when none is set (nothing to check). The
    check runs in `tree`, that tree first on PYTHONPATH, as its builds do."""
    environ = os.environ if environ is None else environ
    if not any(name.startswith(knobs.prefix) for name in environ):
        return None
    words = [word.format(python=sys.executable, tree=tree) for word in knobs.check]
    paths = [str(tree), *filter(None, [environ.get("PYTHONPATH")])]
    env = {**environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONSAFEPATH": "1"}
    # Through hostio's guard, as every child of the engine: it ends with this process.
    with tempfile.TemporaryDirectory(prefix="knob-check-") as folder:
        log = Path(folder) / "check.log"
        try:
            checked = run_logged(words, log, timeout_s=KNOB_CHECK_S, env=env, cwd=tree)
        except OSError as error:
            return f"[target.knobs] check: cannot start {words[0]!r}: {error.strerror}"
        said = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    if checked.outer_timeout:
        return f"[target.knobs] check: no answer in {KNOB_CHECK_S:.0f} s"
    if checked.exit_code == 0:
        return None
    return said[-1] if said else f"[target.knobs] check: exit {checked.exit_code}, no reason said"
