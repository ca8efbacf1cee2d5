"""The catalog's [exposure] table: the real-size config every config gets in the
sweep (docs/catalog.md, "Exposure at real sizes")."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog.errors import catalog_error
from faults.catalog.model import Exposure

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def exposure_table(path: Path, raw) -> Exposure | None:
    """[exposure] name, args = [...], env = {...}: None when the catalog has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise catalog_error(path, "exposure", f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {"name", "args", "env"})
    if unknown:
        raise catalog_error(path, "exposure", f"unknown keys {unknown}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise catalog_error(
            path,
            "exposure",
            f"name: letters, digits, '-' or '_' (the real-size config is <config>@<name>), got {name!r}",
        )
    args = raw.get("args")
    if not isinstance(args, list) or not args or not all(isinstance(a, str) and a for a in args):
        raise catalog_error(path, "exposure", f"args: a non-empty list of strings, got {args!r}")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise catalog_error(path, "exposure", f"env: a table of strings, got {env!r}")
    return Exposure(name, tuple(args), env)
