"""[target.contract]: the target's spellings of what the publish contract looks
for, and the command that writes its PTX (docs/synchronization.md, "The publish contract")."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from faults.catalog.errors import catalog_error
from faults.catalog.fields import command
from faults.catalog.model import PTX_PLACEHOLDERS, PTX_UNIT_PLACEHOLDERS
from invariants.sync.spellings import (
    CONTRACT_PATTERNS,
    CONTRACT_TABLES,
    ContractSpellings,
    call_pattern,
)


def contract_table(path: Path, raw):
    """[target.contract]: its `ptx` command, `ptx_inputs` and `ptx_units`
    here, the spellings in contract_spellings."""
    table = raw if isinstance(raw, dict) else {}
    units = tree_paths(path, "ptx_units", table.get("ptx_units", []))
    known = PTX_UNIT_PLACEHOLDERS if units else PTX_PLACEHOLDERS
    words = command(path, "target.contract", "ptx", table.get("ptx", []), known=known)
    unfilled = [
        name for name in ("unit", "ptx", "deps")
        if units and not any(f"{{{name}}}" in word for word in words)
    ]  # fmt: skip
    if unfilled:
        raise catalog_error(path, "target.contract", f"ptx: with ptx_units, a word {{{unfilled[0]}}}"
                            " (one unit's compile: its source, its PTX, its dependencies)")  # fmt: skip
    inputs = tree_paths(path, "ptx_inputs", table.get("ptx_inputs", []))
    return replace(contract_spellings(path, raw, words), ptx_inputs=inputs, ptx_units=units)


def tree_paths(path: Path, key: str, raw) -> tuple[str, ...]:
    """`ptx_inputs` or `ptx_units`: paths relative to the tree's root, inside it."""
    where = "target.contract"
    if not isinstance(raw, list) or not all(isinstance(p, str) and p.strip() for p in raw):
        raise catalog_error(path, where, f"{key}: a list of paths, got {raw!r}")
    for text in raw:
        if Path(text).is_absolute() or ".." in Path(text).parts:
            raise catalog_error(path, where, f"{key}: {text!r} is not inside the tree")
    return tuple(raw)


def contract_pattern(path: Path, key: str, text) -> re.Pattern[str]:
    """A [target.contract] spelling compiled, or the catalog error naming its key."""
    try:
        return call_pattern(text)
    except ValueError as error:
        raise catalog_error(path, "target.contract", f"{key}: {error}") from None


def contract_spellings(path: Path, raw, ptx: tuple[str, ...]) -> ContractSpellings:
    """[target.contract] checked key by key (`ptx`, its command, checked by the caller)."""
    if not isinstance(raw, dict):
        raise catalog_error(path, "target.contract", f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {"ptx", "ptx_inputs", "ptx_units", *CONTRACT_TABLES, *CONTRACT_PATTERNS})
    if unknown:
        raise catalog_error(path, "target.contract", f"unknown keys {unknown}")
    tables = {}
    for key, names in CONTRACT_TABLES.items():
        table = raw.get(key, {})
        if not isinstance(table, dict):
            raise catalog_error(
                path, "target.contract", f"{key}: a table keyed by {', '.join(names)}"
            )
        strays = sorted(set(table) - set(names))
        if strays:
            raise catalog_error(
                path, "target.contract", f"{key}.{strays[0]}: not one of {', '.join(names)}"
            )
        tables[key] = {
            name: contract_pattern(path, f"{key}.{name}", v) for name, v in table.items()
        }
    singles = {
        key: contract_pattern(path, key, raw[key]) if key in raw else None
        for key in CONTRACT_PATTERNS
    }
    return ContractSpellings(ptx, **tables, **singles)
