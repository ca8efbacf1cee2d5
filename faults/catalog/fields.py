"""The catalog's field checkers, shared by its table checks: each error names
the file, where in it, and the field at fault."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from string import Formatter

from faults.catalog.errors import CatalogError, catalog_error
from faults.catalog.model import PLACEHOLDERS


def fail(path: Path, where: str, message: str) -> CatalogError:
    return catalog_error(path, where, message)


def fail_in(path: Path) -> Callable[[str, str], CatalogError]:
    """`fail` for the file at `path`: what a table checked below the catalog
    (a concept's own, e.g. faults/schedules/table.py) raises its errors with."""
    return lambda where, message: fail(path, where, message)


def expect_type(path, where, key, value, kind, name):
    if not isinstance(value, kind):
        raise fail(path, where, f"{key} must be {name}, got {value!r}")
    return value


def strings(path: Path, where: str, key: str, value, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail(path, where, f"{key} must be {name}, got {value!r}")
    return tuple(value)


def tables(path: Path, where: str, key: str, value) -> list[dict]:
    """An array of tables, each element checked (`key #<index>` names one)."""
    expect_type(path, where, key, value, list, "an array of tables")
    for index, item in enumerate(value):
        expect_type(path, where, f"{key} #{index}", item, dict, "a table")
    return value


def env_table(path: Path, where: str, value) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise fail(path, where, f"env must be a table of strings, got {value!r}")
    return dict(value)


def command(path: Path, where: str, key: str, value, known=PLACEHOLDERS) -> tuple[str, ...]:
    """Command words: strings whose every `{name}` is one faults/pipeline/run.py (or,
    for `known` ones, its caller) fills in: an unknown one would fail late."""
    words = strings(path, where, key, value, "a list of strings")
    for word in words:
        try:
            unknown = [name for name in placeholders(word) if name not in known]
            if not unknown:  # a stray brace, a bad conversion or format spec
                word.format(**dict.fromkeys(known, ""))
        except ValueError as error:
            raise fail(path, where, f"{key}: cannot fill in {word!r}: {error}") from None
        if unknown:
            names = ", ".join(f"{{{name}}}" for name in known)
            message = f"unknown placeholder {{{unknown[0]}}} in {word!r}; known: {names}"
            raise fail(path, where, f"{key}: {message}")
    return words


def placeholders(word: str) -> list[str]:
    """The field names of `word` as str.format reads them, those nested in a
    format spec too (`{}` is the name "")."""
    names = []
    for _, name, spec, _ in Formatter().parse(word):
        if name is not None:
            names.append(name)
        if spec:
            names += placeholders(spec)
    return names


def regex(path: Path, where: str, key: str, text: str, empty: str = "empty text") -> re.Pattern:
    """`text` compiled: a regular expression that matches something (a pattern
    that matches `empty` would match everywhere)."""
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise fail(path, where, f"{key}: {text!r} is not a regular expression: {error}") from None
    if pattern.search(""):
        raise fail(path, where, f"{key}: {text!r} matches {empty}")
    return pattern
