"""Catalog loading: each error names the file, the fault and the field."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog

REPO = Path(__file__).parents[3]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
TARGET = """\
[target]
name = "t"
sources = "tests/fixtures/flag_payload"
language = "cpp"
run = ["true"]
"""


def load(tmp_path: Path, faults: str, *, target: str = TARGET, sites: bool = False):
    path = tmp_path / "catalog.toml"
    path.write_text(target + textwrap.dedent(faults))
    return path, (lambda: load_catalog(path, tree_root=REPO if sites else None))


def test_fixture_catalog_loads():
    catalog = load_catalog(FIXTURE, tree_root=REPO)
    assert list(catalog.faults) == ["D1", "S1", "S2", "N1"]
    assert [p.owner for p in catalog.all_patches("S1")] == ["D1", "S1"]
    assert catalog.all_patches("S1")[0].ns == 200_000_000
    assert catalog.faults["S2"].survivor_ok.startswith("the consumer's 50 ms")
    assert catalog.control[0].file == "main.cpp"
    assert [c.name for c in catalog.configs] == ["default"]


@pytest.mark.parametrize(
    "faults, message",
    [
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.nope.x", action = "skip" }]\n',
            "fault A patch #0: site: unknown site 'fx.nope.x'",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "poke" }]\n',
            "fault A patch #0: action: 'poke' is not one of ['delay', 'skip']",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "fail"\nincludes = ["B"]\n'
            'patches = [{ site = "fx.consumer.check", action = "skip" }]\n'
            '[[fault]]\nid = "B"\nexpect = "fail"\nincludes = ["A"]\n'
            'patches = [{ site = "fx.consumer.check", action = "skip" }]\n',
            "fault A: includes: cycle A -> B -> A",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "fail"\nincludes = ["Z"]\n',
            "fault A: includes: unknown fault id 'Z'",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "skip" }]\n'
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "skip" }]\n',
            "fault A: id: duplicate fault id",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "fail"\n'
            'patches = [{ site = "fx.consumer.flag_wait", action = "skip", when = "x > 1" }]\n',
            "fault A patch #0: when: the skip action takes none",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "fail"\n'
            'patches = [{ file = "main.cpp", old = "a", new = "b", marker = "true" }]\n',
            "fault A patch #0: marker: a text patch takes only file, old, new",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "delay" }]\n',
            "fault A patch #0: ns: a delay needs a positive int of nanoseconds, got None",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "delay", ns = 5, at = "middle" }]\n',
            "fault A patch #0: at: 'middle' is not 'start' or 'end'",
        ),
        ('[[fault]]\nid = "A"\nexpect = "maybe"\n', "fault A: expect: 'maybe' is not"),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\nsurvivor_ok = "x"\n'
            'patches = [{ site = "fx.consumer.check", action = "skip" }]\n',
            "fault A: survivor_ok: only a must-fail fault",
        ),
        ('[[fault]]\nid = "A"\nexpect = "pass"\n', "fault A: patches: a fault needs patches"),
        ('[[fault]]\nid = "1x"\nexpect = "pass"\n', "fault 1x: id: '1x' is not a valid fault id"),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\ncolour = "red"\n',
            "fault A: unknown keys ['colour']",
        ),
        (
            '[[config]]\nname = "c"\n[generate]\nconfigs = ["nope"]\n',
            "generate: configs: unknown config 'nope'",
        ),
        (
            '[[config]]\nname = "c"\n[generate.site_configs]\n"fx." = ["c", "nope"]\n',
            "generate: site_configs.'fx.': unknown config 'nope'",
        ),
        ('[generate]\nconfigs = "c"\n', "generate: configs: a list of config names, got 'c'"),
        (
            "[generate]\nwindow_ns = 0\n",
            "generate: window_ns: a positive int of nanoseconds, got 0",
        ),
        ("[generate]\nspeed = 1\n", "generate: unknown keys ['speed']"),
    ],
)
def test_catalog_errors_name_file_fault_and_field(tmp_path, faults, message):
    path, loader = load(tmp_path, faults, sites=True)
    with pytest.raises(CatalogError) as error:
        loader()
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "target, message",
    [
        ("", "target: a [target] table is required"),
        (
            '[target]\nname = "t"\nsources = "s"\nlanguage = "rust"\nrun = []\n',
            "target: language: 'rust' is not one of ('cuda', 'cpp')",
        ),
        ('[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\n', "target: run: required"),
        (
            '[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\nrun = "x"\n',
            "target: run must be a list of strings",
        ),
        (
            '[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\nrun = []\ngpus = true\n',
            "target: gpus: an int >= 0, got True",
        ),
        (
            '[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\nrun = []\ngpus = -1\n',
            "target: gpus: an int >= 0, got -1",
        ),
        (
            '[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\nrun = []\ntimeout_s = "9"\n',
            "target: timeout_s: a positive number of seconds, got '9'",
        ),
    ],
)
def test_target_errors(tmp_path, target, message):
    _, loader = load(tmp_path, "", target=target)
    with pytest.raises(CatalogError) as error:
        loader()
    assert message in str(error.value)


def test_unreadable_catalog_is_named(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[target\n")
    with pytest.raises(CatalogError, match=f"{path}: cannot read"):
        load_catalog(path)


def test_a_config_may_need_more_gpus_than_the_target(tmp_path):
    path, loader = load(
        tmp_path,
        '[[config]]\nname = "two"\n[[config]]\nname = "four"\ngpus = 4\n',
        target=TARGET + "gpus = 2\n",
    )
    catalog = loader()
    assert [catalog.gpus_for(c) for c in catalog.configs] == [2, 4]


@pytest.mark.parametrize(
    "config, message",
    [
        ('[[config]]\nname = "c"\ngpus = 0\n', "config c: gpus: a positive int, got 0"),
        ('[[config]]\nname = "c"\ngpus = "4"\n', "config c: gpus: a positive int, got '4'"),
        ('[[config]]\nname = "c"\nnodes = 2\n', "config c: unknown keys ['nodes']"),
    ],
)
def test_config_errors(tmp_path, config, message):
    _, loader = load(tmp_path, config)
    with pytest.raises(CatalogError, match=re.escape(message)):
        loader()


def test_the_afdep_catalog_runs_each_config_on_its_gpus():
    from faults.run import substitute

    catalog = load_catalog(REPO / "catalogs/afdep.toml", tree_root=REPO)
    for name, gpus in (("bf16-eager", 2), ("4gpu-f1", 4), ("4gpu-f2", 4)):
        config = catalog.config(name)
        words = substitute(
            catalog.target.run + config.args,
            tree="t",
            out="o",
            python="py",
            digest="d",
            gpus=str(catalog.gpus_for(config)),
        )
        assert f"--nproc-per-node={gpus}" in words
    assert "--ffn-ranks" in catalog.config("4gpu-f2").args


def test_the_cli_says_which_configs_do_not_fit(monkeypatch, capsys):
    import faults.cli as cli

    catalog = load_catalog(REPO / "catalogs/afdep.toml", tree_root=REPO)
    monkeypatch.setattr(cli, "gpu_count", lambda: 2)
    assert cli.fitting_configs(catalog, ["bf16-eager", "4gpu-f1"]) == ["bf16-eager"]
    assert "not run here: config 4gpu-f1 needs 4 GPUs" in capsys.readouterr().out
    monkeypatch.setattr(cli, "gpu_count", lambda: 0)
    with pytest.raises(cli.UsageError, match="no chosen config fits this machine's 0 GPUs: "):
        cli.fitting_configs(catalog, ["bf16-eager"])


@pytest.mark.parametrize(
    "generate, message",
    [
        (
            '[generate.survivor_ok]\n"fx.producer.payload_store" = "x"\n',
            "survivor_ok: 'fx.producer.payload_store' is not a wait site",
        ),
        ('[generate.site_configs]\n"zz." = ["c"]\n', "site_configs: no site in "),
        ('[generate.site_configs]\n"fx." = []\n', "an empty list would run those faults nowhere"),
    ],
)
def test_generate_names_real_sites(tmp_path, generate, message):
    _, loader = load(tmp_path, '[[config]]\nname = "c"\n' + generate, sites=True)
    with pytest.raises(CatalogError, match=re.escape(message)):
        loader()


def test_an_empty_list_of_config_names_selects_none():
    catalog = load_catalog(FIXTURE, tree_root=REPO)
    assert catalog.configs_for("D1", []) == []
    assert [c.name for c in catalog.configs_for("D1")] == ["default"]
