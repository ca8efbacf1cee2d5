"""Site-generated faults and the review's coverage rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from faults.catalog import CatalogError, GenerateSettings, load_catalog
from faults.generate.site_faults import generated_faults, is_generated, with_generated
from faults.review.coverage import coverage
from invariants.sync.sites import parse_tree

REPO = Path(__file__).parents[4]


def test_every_site_gets_its_generated_faults():
    sites, _ = parse_tree(REPO / "afdep/csrc")
    faults = generated_faults(sites, GenerateSettings(ns=5, marker="m"))
    waits = [s for s in sites if s.kind == "wait"]
    releases = [s for s in sites if s.kind == "release"]
    assert len(faults) == len(sites) + len(releases)
    row_wait = faults["gen.skip.cf.ffn_stream_expand.row_wait"]
    assert row_wait.expect == "fail"
    assert [(p.action, p.site, p.ns) for p in row_wait.patches] == [
        ("delay", "cf.attention_dispatch.row_store", 5),
        ("skip", "cf.ffn_stream_expand.row_wait", 0),
    ]
    assert faults["gen.delay.cf.attention_dispatch.row_store"].expect == "pass"
    assert faults["gen.skip.cf.attention_dispatch.row_release"].expect == "fail"
    assert all(f"gen.skip.{w.name}" in faults for w in waits)
    assert all(is_generated(f) for f in faults) and not is_generated("N2")


def test_catalog_settings_reach_the_generated_faults():
    catalog = with_generated(load_catalog(REPO / "catalogs/afdep.toml"), REPO)
    patch = catalog.faults["gen.delay.cf.ffn_stream_expand.expand"].patches[0]
    assert (patch.ns, patch.marker) == (20_000, "threadIdx.x % 32 == 0 && blockIdx.x == 0")
    window, skip = catalog.faults["gen.skip.cf.ffn_stream_expand.row_wait"].patches
    assert (window.site, window.action, window.ns) == (
        "cf.attention_dispatch.row_store",
        "delay",
        200_000,
    )
    assert (skip.site, skip.action) == ("cf.ffn_stream_expand.row_wait", "skip")
    assert catalog.faults["N2"].configs == (
        "bf16-eager",
        "bf16-graph",
        "fp8-eager",
        "4gpu-f1",
        "4gpu-f2",
        "4gpu-f3",
    )
    runs_under = {
        fault_id: [c.name for c in catalog.configs_for(fault_id)]
        for fault_id in catalog.faults
        if is_generated(fault_id)
    }
    # Each generated fault runs once, under the config where its site fires.
    assert runs_under["gen.skip.cf.attention_dispatch.prefix_wait"] == ["bf16-eager-arm-attention"]
    assert runs_under["gen.skip.pf.ffn_expand.done_wait"] == ["bf16-eager-payload-first"]
    assert runs_under["gen.delay.pf.attention_dispatch.row_store"] == ["bf16-eager-payload-first"]
    assert runs_under["gen.skip.cf.ffn_stream_expand.row_wait"] == ["bf16-graph"]
    assert runs_under["gen.skip.cf.ffn_stream_expand.gate_wait"] == ["bf16-graph"]
    assert catalog.faults["gen.skip.cf.ffn_stream_expand.gate_wait"].survivor_ok.startswith(
        "the warp that expands a gated row already waited for that row's own flag"
    )
    assert catalog.faults["gen.skip.cf.ffn_stream_expand.row_wait"].survivor_ok is None
    assert runs_under["gen.delay.cb.attention_combine.reduce"] == ["bf16-graph"]
    assert all(len(names) == 1 for names in runs_under.values())


def test_a_survivor_reason_for_a_fault_never_generated_is_refused():
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    reasons = (*catalog.generate.survivor_ok, ("gen.epoch-off-by-one.cf.no_such_wait", "x"))
    stale = dataclasses.replace(
        catalog, generate=dataclasses.replace(catalog.generate, survivor_ok=reasons)
    )
    with pytest.raises(
        CatalogError,
        match=r"generate: survivor_ok: 'gen\.epoch-off-by-one\.cf\.no_such_wait' "
        r"is not a generated fault$",
    ):
        with_generated(stale, REPO)


def test_the_longest_site_prefix_picks_the_configs():
    settings = GenerateSettings(
        configs=("all",),
        site_configs=(("cf.", ("cf",)), ("cf.attention_dispatch.prefix", ("source",))),
    )
    assert settings.configs_for_site("cf.attention_dispatch.prefix_wait") == ("source",)
    assert settings.configs_for_site("cf.attention_dispatch.row_store") == ("cf",)
    assert settings.configs_for_site("pf.attention_dispatch.row_store") == ("all",)


def test_coverage_of_the_afdep_sites():
    catalog = with_generated(load_catalog(REPO / "catalogs/afdep.toml"), REPO)
    covers = coverage(catalog, parse_tree(REPO / "afdep/csrc")[0])
    assert all(not c.missing for c in covers.values()), {
        n: c.missing for n, c in covers.items() if c.missing
    }
    row_store = covers["cf.attention_dispatch.row_store"]
    assert "P1" in row_store.passing and "N2" in row_store.failing
    assert covers["cf.ffn_stream_expand.prefix_wait"].failing[:2] == ["N3", "N3b"]
    assert not covers["cf.ffn_stream_expand.expand"].needs_failing  # no wait guards it
