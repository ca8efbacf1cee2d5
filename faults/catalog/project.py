"""A project's fault catalogs, listed once in its pyproject.toml:

    [tool.faults]
    catalogs = ["catalogs/target.toml", "tests/fixtures/other/catalog.toml"]

The first is the CLIs' default catalog; the pytest plugin parametrizes over
every one that exists (docs/catalog.md, "The catalog format"). A folder's
catalog is the one whose target's sources hold it."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.errors import FaultsError, read_toml
from faults.catalog.load import load_catalog
from faults.catalog.model import Catalog
from invariants.sync.sites import Anchor

KEY = "[tool.faults] catalogs"
EXAMPLE = f'{KEY} = ["<catalog>.toml", ...]'


class ProjectError(FaultsError):
    """pyproject.toml does not list the project's catalogs as it should."""


class NoCatalogsTable(ProjectError):
    """pyproject.toml, or its [tool.faults] table, is absent: a project without
    catalogs (the plugin stays quiet in it until a catalog case is asked for)."""


def project_catalogs(root: Path) -> list[Path]:
    """The catalogs `root`'s pyproject.toml lists, as paths under `root`."""
    path = Path(root) / "pyproject.toml"

    def unreadable(error: Exception) -> ProjectError:
        if isinstance(error, FileNotFoundError):
            return NoCatalogsTable(f"{path}: not found; it must list {EXAMPLE}")
        return ProjectError(f"{path}: cannot read {KEY}: {error}")

    tool = read_toml(path, unreadable).get("tool")
    table = tool.get("faults") if isinstance(tool, dict) else None
    if table is None:
        raise NoCatalogsTable(f"{path}: no [tool.faults] table; it must list {EXAMPLE}")
    catalogs = table.get("catalogs") if isinstance(table, dict) else table
    if not (
        isinstance(catalogs, list) and catalogs and all(isinstance(c, str) and c for c in catalogs)
    ):
        shown = "nothing" if catalogs is None else repr(catalogs)
        raise ProjectError(f"{path}: {KEY} must be a non-empty list of paths, got {shown}")
    return [Path(root) / catalog for catalog in catalogs]


def default_catalog(root: Path) -> Path:
    """The catalog a CLI uses when none is named: the first one listed."""
    return project_catalogs(root)[0]


def folder_catalog(root: Path, folder: Path) -> Catalog | None:
    """The project's catalog whose target's sources hold `folder` (None: no
    catalog names them, or the project lists none)."""
    try:
        paths = project_catalogs(root)
    except ProjectError:
        return None
    where = Path(folder).resolve()
    for path in paths:
        catalog = load_catalog(path, tree_root=root)
        sources = (root / catalog.target.sources).resolve()
        if where == sources or sources in where.parents:
            return catalog
    return None


def folder_anchors(catalog: Catalog | None, root: Path, folder: Path) -> tuple[Anchor, ...]:
    """The sites `catalog` declares by anchors, when `folder` is its sources."""
    if catalog is None:
        return ()
    sources = (root / catalog.target.sources).resolve()
    return catalog.target.anchors if Path(folder).resolve() == sources else ()
