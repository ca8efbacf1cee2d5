"""Steps every `afdep-faults` command shares: the catalog as the command
sees it (generated faults, rank mode) and its working folder."""

from __future__ import annotations

import argparse

from faults.catalog import Catalog, load_catalog
from faults.catalog_types import RankMode
from faults.generate import with_generated
from hostio import KeptFolder, gpu_count


def load(args: argparse.Namespace) -> Catalog:
    catalog = load_catalog(args.catalog, tree_root=args.root)
    catalog = catalog.in_rank_mode(chosen_rank_mode(args, catalog))
    return catalog if args.no_generated else with_generated(catalog, args.root)


def chosen_rank_mode(args: argparse.Namespace, catalog: Catalog) -> RankMode:
    """--rank-mode, or by the GPUs here (Catalog.auto_rank_mode)."""
    if args.rank_mode != "auto":
        return RankMode(args.rank_mode)
    return catalog.auto_rank_mode(gpu_count())


def workdir(args: argparse.Namespace, command: str) -> KeptFolder:
    """--workdir as given, else a temporary folder kept by hostio's one rule."""
    return KeptFolder(args.workdir, f"faults-{command}-", "scratch trees and logs", keep=args.keep)
