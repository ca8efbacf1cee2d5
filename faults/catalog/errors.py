"""The engine's errors: FaultsError, the base of every error of bad input the
engine raises (one line naming the culprit, before any work; only tools/
turns one into exit 2), and the catalog's, in its one form: file, where in
it, what is wrong."""

from __future__ import annotations

from pathlib import Path


class FaultsError(ValueError):
    """Bad input to the engine: a catalog, a ref, a report, an option's value."""


class CatalogError(FaultsError):
    """A catalog that cannot be used as written."""


def catalog_error(path: Path, where: str, message: str) -> CatalogError:
    """The one form of a catalog error: file, where in it, what is wrong."""
    return CatalogError(f"{path}: {where}: {message}")
