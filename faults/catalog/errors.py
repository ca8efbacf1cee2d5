"""The one catalog error, and its one form: file, where in it, what is wrong."""

from __future__ import annotations

from pathlib import Path


class CatalogError(ValueError):
    """A catalog that cannot be used as written."""


def catalog_error(path: Path, where: str, message: str) -> CatalogError:
    """The one form of a catalog error: file, where in it, what is wrong."""
    return CatalogError(f"{path}: {where}: {message}")
