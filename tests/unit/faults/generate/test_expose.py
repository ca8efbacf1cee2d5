"""The delays that expose a missing barrier (faults/generate/expose.py) and the
catalog's [target.publisher] they are made from."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from faults.catalog import CatalogError, Patch, load_catalog
from faults.catalog.model import Holding
from faults.generate.expose import covering_faults, expose_faults, is_exposing
from faults.generate.site_faults import with_generated
from invariants.sync.sites import Site, SourceTree, parse_tree, published_store

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"
# The producers= of afdep's releases (docs/synchronization.md, "Synchronization"),
# for a tree whose site headers do not declare them yet.
PRODUCERS = {
    "cf.attention_dispatch.count_release": "block",
    "cf.attention_dispatch.row_release": "warp",
    "cf.attention_dispatch.done_release": "block",
    "pf.attention_dispatch.done_release": "block",
    "cf.ffn_place.prefix_release": "block",
    "cb.ffn_combine.row_release": "warp",
}
WARP = Holding(
    "threadIdx.x % 32 == 0",
    "threadIdx.x % 32 != 0",
    "threadIdx.x % 32 == 1 && blockIdx.x == 0",
    "threadIdx.x / 32",
)


@dataclass(frozen=True)
class Declared(Site):
    producers: str | None = None


def declared(sites: list[Site], producers: dict[str, str]) -> list[Site]:
    """`sites` with their producers= (the parsed one where the tree declares it)."""
    return [
        Declared(
            **{f.name: getattr(s, f.name) for f in fields(Site) if f.name != "producers"},
            producers=getattr(s, "producers", None) or producers.get(s.name),
        )
        for s in sites
    ]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(AFDEP, tree_root=REPO)


@pytest.fixture(scope="module")
def sites():
    return declared(parse_tree(REPO / "afdep/csrc")[0], PRODUCERS)


def test_the_afdep_catalog_names_who_publishes(catalog):
    publisher = catalog.target.publisher
    assert publisher.hold_ns == 20_000
    assert publisher.holding("warp") == WARP
    assert publisher.holding("block") == Holding(
        "threadIdx.x == 0", "threadIdx.x / 32 != 0", "threadIdx.x == 32 && blockIdx.x == 0", "0"
    )
    assert publisher.holding("grid").cell is None  # CTAs share no memory to wait on
    assert publisher.holding("thread") is None


def test_every_release_gets_both_faults(catalog, sites):
    faults = expose_faults(sites, catalog)
    assert sorted(faults) == sorted(
        f"gen.{family}.{release}"
        for release in PRODUCERS
        for family in ("uneven-delay", "forced-order")
    )
    assert all(f.expect == "pass" and is_exposing(f.id) for f in faults.values())
    assert not is_exposing("gen.delay.cf.attention_dispatch.row_release")


def test_a_warp_release_holds_the_other_lanes_of_its_warp(catalog, sites):
    faults = expose_faults(sites, catalog)
    uneven = faults["gen.uneven-delay.cf.attention_dispatch.row_release"]
    assert uneven.patches == (
        Patch(
            uneven.id,
            site="cf.attention_dispatch.row_store",
            action="delay",
            ns=20_000,
            when="threadIdx.x % 32 != 0",
            marker="threadIdx.x % 32 == 1 && blockIdx.x == 0",
        ),
    )
    assert uneven.configs == ("bf16-graph",)
    forced = faults["gen.forced-order.cf.attention_dispatch.row_release"]
    assert forced.patches == (
        Patch(
            forced.id,
            site="cf.attention_dispatch.row_store",
            action="hold",
            ns=20_000,
            when="threadIdx.x % 32 != 0",
            marker="threadIdx.x % 32 == 1 && blockIdx.x == 0",
            cell="threadIdx.x / 32",
        ),
        Patch(
            forced.id,
            site="cf.attention_dispatch.row_release",
            action="signal",
            when="threadIdx.x % 32 == 0",
            cell="threadIdx.x / 32",
        ),
    )
    assert forced.title == (
        "the warp's producers other than the publisher of cf.attention_dispatch.row_release "
        "wait at cf.attention_dispatch.row_store (at most 20000 ns) until it has released: "
        "a missing warp barrier lets the flag out before their data every time"
    )


def test_a_block_release_holds_the_other_warps_and_runs_where_it_fires(catalog, sites):
    faults = expose_faults(sites, catalog)
    hold, signal = faults["gen.forced-order.pf.attention_dispatch.done_release"].patches
    assert (hold.site, hold.action, hold.when, hold.cell) == (
        "pf.attention_dispatch.row_store",
        "hold",
        "threadIdx.x / 32 != 0",
        "0",
    )
    assert (signal.site, signal.action, signal.when) == (
        "pf.attention_dispatch.done_release",
        "signal",
        "threadIdx.x == 0",
    )
    assert faults["gen.forced-order.pf.attention_dispatch.done_release"].configs == (
        "bf16-eager-payload-first",
    )


def test_the_published_store_is_guards_else_the_nearest_of_its_stage(sites):
    by_name = {s.name: s for s in sites}
    # pf.attention_dispatch.row_store lies between cf.attention_dispatch.done_release and
    # its own rows
    assert (
        published_store(by_name["cf.attention_dispatch.done_release"], sites).name
        == "cf.attention_dispatch.row_store"
    )
    assert (
        published_store(by_name["pf.attention_dispatch.done_release"], sites).name
        == "pf.attention_dispatch.row_store"
    )
    assert (
        published_store(by_name["cf.attention_dispatch.count_release"], sites).name
        == "cf.attention_dispatch.count_put"
    )
    # no store above it in its file: the compute site that builds the table
    assert (
        published_store(by_name["cf.ffn_place.prefix_release"], sites).name
        == "cf.ffn_place.prefix_compute"
    )
    release = by_name["cf.attention_dispatch.done_release"]
    guarded = Declared(**{**_fields(release), "guards": "cf.attention_dispatch.count_put"})
    assert published_store(guarded, sites).name == "cf.attention_dispatch.count_put"


def _fields(site: Site) -> dict:
    return {f.name: getattr(site, f.name) for f in fields(site)}


def test_thread_releases_and_undeclared_ones_get_none(catalog, sites):
    for producers in (None, "thread"):  # none declared, or no one to hold back
        releases = [Declared(**{**_fields(s), "producers": producers}) for s in sites]
        assert expose_faults(releases, catalog) == {}


def test_a_grid_release_gets_an_uneven_delay_only(catalog, sites):
    grid = [
        Declared(**{**_fields(s), "producers": "grid" if s.kind == "release" else None})
        for s in sites
    ]
    faults = expose_faults(grid, catalog)
    assert not [f for f in faults if f.startswith("gen.forced-order.")]
    [patch] = faults["gen.uneven-delay.cf.attention_dispatch.count_release"].patches
    assert (patch.site, patch.when, patch.marker) == (
        "cf.attention_dispatch.count_put",
        "blockIdx.x != 0",
        "blockIdx.x == 1 && threadIdx.x == 0",
    )


def test_a_group_the_catalog_does_not_name_is_an_error(sites, tmp_path):
    text = AFDEP.read_text()
    start = text.index("[target.publisher.block]")
    path = tmp_path / "afdep.toml"
    path.write_text(text[:start] + text[text.index("[target.publisher.grid]") :])
    catalog = load_catalog(path)
    release = next(s for s in sites if s.producers == "block")  # the first, in file order
    with pytest.raises(CatalogError) as error:
        expose_faults(sites, catalog)
    assert str(error.value) == (
        f"{path}: site {release.name} ({release.where()}) has producers=block, "
        "but the catalog names no [target.publisher.block]: who publishes, who is held"
    )


def test_a_release_with_nothing_above_it_is_an_error(catalog, tmp_path):
    source = tmp_path / "k.cuh"
    source.write_text("// @site k.flag kind=release\nflag = 1;\n// @end k.flag\n")
    [release] = declared(parse_tree(tmp_path)[0], {"k.flag": "warp"})
    with pytest.raises(CatalogError) as error:
        expose_faults([release], catalog)
    assert str(error.value) == (
        f"{AFDEP}: site k.flag ({source}:1): no store site above it to hold back; "
        "name the one it publishes with guards="
    )
    misnamed = Declared(**{**_fields(release), "guards": "k.gone"})
    with pytest.raises(CatalogError) as error:
        expose_faults([misnamed], catalog)
    assert str(error.value) == f"{AFDEP}: site k.flag ({source}:1): guards=k.gone names no site"


def test_covering_faults_of_a_release_are_both():
    site = Site("cb.ffn_combine.row_release", "release", None, Path("x.cuh"), 1, 3)
    assert covering_faults(site) == [
        "gen.uneven-delay.cb.ffn_combine.row_release",
        "gen.forced-order.cb.ffn_combine.row_release",
    ]
    assert (
        covering_faults(Site("cb.ffn_combine.row_store", "store", None, Path("x.cuh"), 1, 3)) == []
    )


def test_with_generated_adds_them(catalog, sites, monkeypatch):
    monkeypatch.setattr(SourceTree, "sites", property(lambda tree: sites))
    generated = with_generated(catalog, REPO).faults
    assert set(expose_faults(sites, catalog)) < set(generated)
    assert "gen.delay.cf.attention_dispatch.row_release" in generated  # the old ones stay


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("hold_ns = 0\n", "hold_ns: a positive int of nanoseconds, got 0"),
        (
            "hold_ns = 300_000_000_000\n",
            "hold_ns: 300000000000 ns must fit a signed 64-bit count and be shorter than "
            "the target's timeout_s (90 s)",
        ),
        (
            "hold_ns = 5\n",
            "names no producers group; give one of ('thread', 'warp', 'block', 'grid')",
        ),
        (
            "lanes = 1\n",
            "unknown keys ['lanes']; known: hold_ns, ('thread', 'warp', 'block', 'grid')",
        ),
        (
            "[target.publisher.warp]\npublisher = 'a'\nheld = 'b'\n",
            "target.publisher.warp: marker: a non-empty C condition, got None",
        ),
        (
            "[target.publisher.warp]\npublisher = 'a'\nheld = 'a'\nmarker = 'm'\n",
            "target.publisher.warp: held: must never hold the publisher back",
        ),
        (
            "[target.publisher.warp]\npublisher = 'a'\nheld = 'b'\nmarker = 'm'\ncell = ''\n",
            "target.publisher.warp: cell: an index expression, got ''",
        ),
        (
            "[target.publisher.warp]\npublisher = 'a'\nheld = 'b'\nmarker = 'm'\nrank = 'r'\n",
            "target.publisher.warp: unknown keys ['rank']",
        ),
    ],
)
def test_a_bad_publisher_table_is_named(tmp_path, table, message):
    text = AFDEP.read_text()
    start = text.index("[target.publisher]")
    end = text.index("[[config]]")
    path = tmp_path / "afdep.toml"
    path.write_text(text[:start] + "[target.publisher]\n" + table + "\n" + text[end:])
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    where = "" if message.startswith("target.publisher.") else "target.publisher: "
    assert str(error.value) == f"{path}: {where}{message}"
