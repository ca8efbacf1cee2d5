"""The engine's errors: FaultsError, the base of every error of bad input the
engine raises (one line naming the culprit, before any work; only tools/
turns one into exit 2), and the catalog's, in its one form: file, where in
it, what is wrong; and a TOML file read, what stops it turned into one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import tomllib


class FaultsError(ValueError):
    """Bad input to the engine: a catalog, a ref, a report, an option's value."""


class CatalogError(FaultsError):
    """A catalog that cannot be used as written."""


def catalog_error(path: Path, where: str, message: str) -> CatalogError:
    """The one form of a catalog error: file, where in it, what is wrong."""
    return CatalogError(f"{path}: {where}: {message}")


def read_toml(path: Path, unreadable: Callable[[Exception], FaultsError]) -> dict:
    """The tables of the TOML file at `path`; `unreadable(error)` raised in
    their place when it cannot be read (OSError, not UTF-8) or is no TOML."""
    try:
        return tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise unreadable(error) from None
