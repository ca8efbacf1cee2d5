"""Rank modes: a catalog's runs placed a GPU per rank, or every rank as a
logical rank on one GPU ([target.logical]); chosen by the GPUs here or forced."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.pipeline.run import substitute
from hostio import RankMode
from tools.faults_cli.main import main as faults_main

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"


def test_the_logical_mode_runs_every_rank_on_one_gpu():
    catalog = load_catalog(AFDEP)
    logical = catalog.in_rank_mode(RankMode.LOGICAL)
    assert logical.rank_mode is RankMode.LOGICAL and catalog.rank_mode is RankMode.PER_GPU
    sizes = {
        c.name: (catalog.gpus_for(c), logical.gpus_for(c), logical.ranks_for(c))
        for c in catalog.configs
    }
    assert sizes["bf16-graph"] == (2, 1, 2)
    assert sizes["4gpu-f2"] == (4, 1, 4)
    assert (catalog.gpus_needed, logical.gpus_needed) == (2, 1)
    words = substitute(
        logical.target.run, tree="t", out="o", python="py", digest="d", gpus="1", ranks="4"
    )
    assert words[:7] == ["py", "-m", "tools.driver", "--mode", "logical", "--ranks", "4"]
    assert logical.target.run[7:] == catalog.target.run[catalog.target.run.index("--capacity") :]


@pytest.mark.parametrize(
    ("gpus", "mode"),
    [(0, RankMode.PER_GPU), (1, RankMode.LOGICAL), (2, RankMode.PER_GPU), (8, RankMode.PER_GPU)],
)
def test_auto_picks_logical_ranks_only_short_of_gpus(gpus, mode):
    assert load_catalog(AFDEP).auto_rank_mode(gpus) is mode


def test_a_catalog_without_a_logical_command_has_one_mode():
    catalog = load_catalog(FIXTURE)
    assert catalog.auto_rank_mode(1) is RankMode.PER_GPU
    with pytest.raises(CatalogError) as error:
        catalog.in_rank_mode(RankMode.LOGICAL)
    assert str(error.value) == (
        f"{FIXTURE}: rank mode logical: the catalog has no [target.logical] run command"
    )


def test_a_malformed_logical_table_is_named(tmp_path):
    text = AFDEP.read_text().replace(
        '[target.logical]\nrun = ["{python}"', '[target.logical]\nrunn = ["{python}"'
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    with pytest.raises(CatalogError, match=r"target\.logical.*a table with one key, run"):
        load_catalog(path)


def test_forcing_logical_without_the_command_is_one_line(capsys):
    status = faults_main(["--catalog", str(FIXTURE), "--rank-mode", "logical", "list"])
    assert status == 2
    assert capsys.readouterr().err.endswith(
        "rank mode logical: the catalog has no [target.logical] run command\n"
    )
