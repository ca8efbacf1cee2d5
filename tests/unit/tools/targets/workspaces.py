"""What the foreign targets' tests share: a workspace fetched from the
registry once a session (skipped, with the reason, where the registry cannot
be reached), nvcc or a skip, and the contract's findings on a generated
fault's tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.generate.site_faults import with_generated
from faults.pipeline.apply import apply_patches
from faults.pipeline.scratch import target_scratch
from invariants.sync.contract import check_contracts
from invariants.sync.sites import Site
from tools.targets.fetch import FetchError, make_workspace, read_release


def fetched(target: str, into: Path) -> Path:
    """`target`'s workspace made in `into` (tools/targets/<target>/release.toml)."""
    try:
        make_workspace(read_release(target), into)
    except FetchError as error:
        if "cannot be reached" in str(error):
            pytest.skip(f"registry unreachable: {error}")
        raise
    return into


def needs_nvcc() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the harness cannot be compiled here")


def fault_contract(catalog_path: Path, workspace: Path, tree: Path, fault: str, cache: Path):
    """The contract's report on `fault`'s scratch tree (made at `tree`), and
    the sites of that tree by name (its anchored sites written in)."""
    return faults_contract(generated(catalog_path, workspace), workspace, tree, (fault,), cache)


def generated(catalog_path: Path, workspace: Path):
    """The catalog at `catalog_path` on `workspace`, its generated faults with it."""
    return with_generated(load_catalog(catalog_path, tree_root=workspace), workspace)


def faults_contract(catalog, workspace: Path, tree: Path, faults, cache: Path, edits=()):
    """fault_contract of one tree holding every fault of `faults` (of
    `catalog`, generated's), their patches applied in order and the waits
    bounded once: faults in headers no translation unit shares, whose
    findings part by site, checked on one PTX compile. `edits`: (file from
    the tree's root, old, new) made first, each `old` found once."""
    sources = target_scratch(workspace, tree, catalog.target)
    for file, old, new in edits:
        text = (tree / file).read_text()
        assert text.count(old) == 1, (file, old)
        sources.write(tree / file, text.replace(old, new))
    apply_patches(sources, catalog, [patch for f in faults for patch in catalog.all_patches(f)])
    report = check_contracts(tree, catalog.target.annotated(), cache=cache)
    sites: dict[str, Site] = {s.name: s for s in sources.sites}
    return report, sites
