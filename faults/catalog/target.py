"""The [target] table: how a tree is built and run, and the words of the
target (its clock, rank, timeout, environment, knobs, GPUs), with its sub-tables
checked by their own modules."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.anchors import site_tables
from faults.catalog.bound import bound_table
from faults.catalog.contract import contract_table
from faults.catalog.fields import command, env_table, expect_type, fail, fail_in
from faults.catalog.identity import identity_table
from faults.catalog.knobs import knobs_table
from faults.catalog.log import log_table
from faults.catalog.model import (
    PTX_PLACEHOLDERS,
    SERVE_PLACEHOLDERS,
    Target,
)
from faults.catalog.publisher import publisher_table
from faults.schedules.table import schedule_spelling

LANGUAGES = ("cuda", "cpp")


TARGET_KEYS = frozenset(
    (
        "name sources language run log build clock rank timeout_s env gpus"
        " contract mutation publisher logical sass schedule site bound serve knobs identity"
    ).split()
)


def logical_table(path: Path, raw) -> tuple[str, ...]:
    """[target.logical] run: the command that runs every rank on one GPU."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"run"}:
        raise fail(path, "target.logical", f"a table with one key, run; got {raw!r}")
    return command(path, "target.logical", "run", raw["run"])


def target_table(path: Path, raw) -> Target:
    if not isinstance(raw, dict):
        raise fail(path, "target", "a [target] table is required")
    where = "target"
    for key in ("name", "sources", "language", "run", "log"):
        if key not in raw:
            raise fail(path, where, f"{key}: required")
    unknown = sorted(set(raw) - TARGET_KEYS)
    if unknown:
        raise fail(path, where, f"unknown keys {unknown}")
    for key in ("name", "sources", "rank"):
        if key in raw:
            expect_type(path, where, key, raw[key], str, "a string")
    if raw["language"] not in LANGUAGES:
        raise fail(path, where, f"language: {raw['language']!r} is not one of {LANGUAGES}")
    clock = raw.get("clock", "")
    if not isinstance(clock, str) or (raw["language"] == "cuda" and not clock.strip()):
        raise fail(
            path,
            where,
            f"clock: an expression giving nanoseconds (a cuda target's delays need it), "
            f"got {clock!r}",
        )
    gpus = raw.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise fail(path, where, f"gpus: an int >= 0, got {gpus!r}")
    timeout_s = raw.get("timeout_s", 300)
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise fail(path, where, f"timeout_s: a positive number of seconds, got {timeout_s!r}")
    return Target(
        name=raw["name"],
        sources=raw["sources"],
        language=raw["language"],
        run=command(path, where, "run", raw["run"]),
        log=log_table(path, raw["log"]),
        build=command(path, where, "build", raw.get("build", [])),
        clock=clock,
        rank=raw.get("rank", "0"),
        timeout_s=float(timeout_s),
        env=env_table(path, where, raw.get("env", {})),
        gpus=gpus,
        contract=contract_table(path, raw["contract"]) if "contract" in raw else None,
        publisher=publisher_table(path, raw.get("publisher"), float(timeout_s)),
        logical_run=logical_table(path, raw.get("logical")),
        schedule=schedule_spelling(raw.get("schedule"), fail_in(path)),
        sass=sass_table(path, raw.get("sass")),
        anchors=site_tables(path, raw.get("site")),
        bound=bound_table(path, raw.get("bound"), raw["language"], clock),
        serve=serve_table(path, raw.get("serve")),
        knobs=knobs_table(path, raw.get("knobs")),
        identity=identity_table(path, raw.get("identity")),
    )


def serve_table(path: Path, raw) -> tuple[str, ...]:
    """[target.serve] command: the warm worker that takes a tree's runs
    (hostio/serve.py's protocol; docs/catalog.md, "Warm workers")."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"command"}:
        raise fail(path, "target.serve", f"a table with one key, command; got {raw!r}")
    words = command(path, "target.serve", "command", raw["command"], known=SERVE_PLACEHOLDERS)
    if not words:
        raise fail(path, "target.serve", "command: at least the program to start")
    return words


def sass_table(path: Path, raw) -> tuple[str, ...]:
    """[target.sass] cubin: the command that writes every kernel variant's cubin."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"cubin"}:
        raise fail(path, "target.sass", f"a table with one key, cubin; got {raw!r}")
    return command(path, "target.sass", "cubin", raw["cubin"], known=PTX_PLACEHOLDERS)
