"""[target.log]: how the target's log says what happened, each key a regular
expression searched line by line (docs/log-lines.md, "Log lines")."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.fields import expect_type, fail, regex
from faults.catalog.model import (
    LOG_KEYS,
    LogPatterns,
)


def log_table(path: Path, raw) -> LogPatterns:
    """[target.log]: every key a regular expression that cannot match an
    empty line (it would count every line); `digest` captures one group."""
    where = "target.log"
    if not isinstance(raw, dict):
        raise fail(path, where, f"a table of regular expressions {list(LOG_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(LOG_KEYS))
    if unknown:
        raise fail(path, where, f"unknown keys {unknown}")
    patterns = {}
    for key in LOG_KEYS:
        if key not in raw:
            raise fail(path, where, f"{key}: required")
        text = expect_type(path, where, key, raw[key], str, "a regular expression")
        patterns[key] = regex(path, where, key, text, empty="an empty line")
    if patterns["digest"].groups != 1:
        raise fail(
            path,
            where,
            f"digest: {raw['digest']!r} has {patterns['digest'].groups} groups; "
            "exactly one must capture the tree digest",
        )
    return LogPatterns(**patterns)
