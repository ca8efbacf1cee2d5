"""The [[config]] tables: how a run of the target differs from its plain run
command (arguments, environment, GPUs), each checked into a Config."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.fields import command, env_table, expect_type, fail, tables
from faults.catalog.model import Config


def config_tables(path: Path, raw) -> tuple[Config, ...]:
    configs, names = [], set()
    for index, entry in enumerate(tables(path, "top level", "config", raw)):
        where = f"config #{index}"
        if "name" not in entry:
            raise fail(path, where, "name: required")
        expect_type(path, where, "name", entry["name"], str, "a string")
        if entry["name"] in names:
            raise fail(path, f"config {entry['name']}", "name: duplicate config name")
        names.add(entry["name"])
        where = f"config {entry['name']}"
        unknown = sorted(set(entry) - {"name", "args", "env", "gpus"})
        if unknown:
            raise fail(path, where, f"unknown keys {unknown}")
        args = command(path, where, "args", entry.get("args", []))
        gpus = entry.get("gpus", 0)
        if "gpus" in entry and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise fail(path, where, f"gpus: a positive int, got {gpus!r}")
        env = env_table(path, where, entry.get("env", {}))
        configs.append(Config(entry["name"], args, env, gpus))
    if not configs:
        configs.append(Config("default"))
    return tuple(configs)
