"""Catalog loading: each error names the file, the fault and the field."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
TARGET = """\
[target]
name = "t"
sources = "tests/fixtures/flag_payload"
language = "cpp"
run = ["true"]
"""
LOG = """\
[target.log]
mismatch = '^Mismatched '
timeout = '^timeout: site='
assertion = '^assertion failed'
device_error = '^terminate called'
digest = '^digest ([0-9a-f]{64})$'
"""
FAULT = """\
[[fault]]
id = "F"
expect = "fail"
patches = [{ site = "fx.consumer.check", action = "skip" }]
"""


def load(tmp_path: Path, faults: str, *, target: str = TARGET, sites: bool = False):
    """A catalog of `target` (with LOG, unless empty) and `faults` (with FAULT
    when it has none)."""
    path = tmp_path / "catalog.toml"
    faults = textwrap.dedent(faults)
    path.write_text(
        target + (LOG if target else "") + faults + ("" if "[[fault]]" in faults else "\n" + FAULT)
    )
    return path, (lambda: load_catalog(path, tree_root=REPO if sites else None))


def error_of(loader) -> str:
    with pytest.raises(CatalogError) as error:
        loader()
    return str(error.value)


def test_fixture_catalog_loads():
    catalog = load_catalog(FIXTURE, tree_root=REPO)
    assert list(catalog.faults) == ["D1", "S1", "S2", "N1"]
    assert [p.owner for p in catalog.all_patches("S1")] == ["D1", "S1"]
    assert catalog.all_patches("S1")[0].ns == 200_000_000
    assert catalog.faults["S2"].survivor_ok.startswith("the consumer's 50 ms")
    assert catalog.control[0].file == "main.cpp"
    assert [c.name for c in catalog.configs] == ["default"]
    log = catalog.target.log
    assert log.mismatch.search("Mismatched payload round=1 word=3 expected=1004 got=0")
    assert log.timeout.search("afdep timeout: site=fx.consumer.flag_wait rank=1 expected=1 seen=0")
    assert log.digest.search(f'"native_source_sha256": "{"ab" * 32}"')[1] == "ab" * 32
    assert not log.mismatch.search("fixture rounds=4 failed=0")


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
            "fault A patch #0: action: 'poke' is not one of ['delay', 'hold', 'signal', 'skip']",
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
            'patches = [{ file = "main.cpp", old = "a", new = "b", at = "start" }]\n',
            "fault A patch #0: at: a text patch takes only file, old, new, marker, marker_site",
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
    from faults.pipeline.run import substitute

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
    import tools.faults_cli.steps as cli

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
        ('[generate.not_run]\n"zz." = "why"\n', "not_run: no site in "),
        ('[generate.not_run]\n"fx." = " "\n', "not_run.'fx.': say why no config runs that code"),
        ('[generate.not_run]\n"fx." = 1\n', "not_run.'fx.'"),
        (
            '[generate.site_configs]\n"fx." = ["c"]\n[generate.not_run]\n"fx." = "why"\n',
            "not_run.'fx.': site_configs runs it too",
        ),
    ],
)
def test_generate_names_real_sites(tmp_path, generate, message):
    _, loader = load(tmp_path, '[[config]]\nname = "c"\n' + generate, sites=True)
    with pytest.raises(CatalogError, match=re.escape(message)):
        loader()


def test_no_fault_is_generated_from_a_site_no_config_runs(tmp_path):
    """[generate.not_run]: the sites under a prefix make no fault; the others do."""
    from faults.generate.site_faults import with_generated

    generate = '[generate.not_run]\n"fx.producer." = "no harness runs the producer"\n'
    _, loader = load(tmp_path, '[[config]]\nname = "c"\n' + generate, sites=True)
    catalog = loader()
    assert catalog.generate.not_run_why("fx.consumer.wait") is None
    assert catalog.generate.not_run_why("fx.producer.payload_store") == "no harness runs the producer"
    made = [f for f in with_generated(catalog, REPO).faults if f.startswith("gen.")]
    assert "gen.skip.fx.consumer.flag_wait" in made  # its patch still delays the producer
    assert [f for f in made if ".fx.producer." in f] == []
    whole = with_generated(load(tmp_path, '[[config]]\nname = "c"\n', sites=True)[1](), REPO)
    assert any(f.startswith("gen.delay.fx.producer.") for f in whole.faults)


def test_an_empty_list_of_config_names_selects_none():
    catalog = load_catalog(FIXTURE, tree_root=REPO)
    assert catalog.configs_for("D1", []) == []
    assert [c.name for c in catalog.configs_for("D1")] == ["default"]


def test_a_catalog_without_faults_is_refused(tmp_path):
    path = tmp_path / "catalog.toml"
    path.write_text(TARGET + LOG + "[generate]\nns = 5\n")
    assert error_of(lambda: load_catalog(path)) == (
        f"{path}: top level: no [[fault]]: a catalog needs at least one fault"
    )


CPP = '[target]\nname = "t"\nsources = "s"\nlanguage = "cpp"\nrun = []\n'
CUDA = '[target]\nname = "t"\nsources = "s"\nlanguage = "cuda"\nrun = []\n'


@pytest.mark.parametrize(
    "target, log, message",
    [
        (CPP, "", "target: log: required"),
        (CPP, "[target.log]\nmismatch = 'M'\n", "target.log: timeout: required"),
        (
            CPP,
            LOG.replace("'^Mismatched '", "'(M'"),
            "target.log: mismatch: '(M' is not a "
            "regular expression: missing ), unterminated subpattern at position 0",
        ),
        (
            CPP,
            LOG.replace("'^assertion failed'", "3"),
            "target.log: assertion must be a regular expression, got 3",
        ),
        (
            CPP,
            LOG.replace("'^timeout: site='", "'x*'"),
            "target.log: timeout: 'x*' matches an empty line",
        ),
        (
            CPP,
            LOG.replace("'^digest ([0-9a-f]{64})$'", "'^digest [0-9a-f]{64}$'"),
            "target.log: digest: '^digest [0-9a-f]{64}$' has 0 groups; exactly one must capture "
            "the tree digest",
        ),
        (
            CPP,
            LOG.replace("'^digest ([0-9a-f]{64})$'", "'^(digest) ([0-9a-f]{64})$'"),
            "target.log: digest: '^(digest) ([0-9a-f]{64})$' has 2 groups; "
            "exactly one must capture the tree digest",
        ),
        (CPP, LOG + "crash = 'x'\n", "target.log: unknown keys ['crash']"),
        (
            CPP.replace("[target]", "[target]\nlog = 'x'"),
            "",
            "target.log: a table of regular expressions ['mismatch', 'timeout', 'assertion', "
            "'device_error', 'digest'], got 'x'",
        ),
        (
            CUDA,
            LOG,
            "target: clock: an expression giving nanoseconds (a cuda target's delays "
            "need it), got ''",
        ),
        (
            CUDA + 'clock = " "\n',
            LOG,
            "target: clock: an expression giving nanoseconds (a cuda "
            "target's delays need it), got ' '",
        ),
    ],
)
def test_target_log_and_clock_errors_name_file_table_and_key(tmp_path, target, log, message):
    path = tmp_path / "catalog.toml"
    path.write_text(target + log + FAULT)
    assert error_of(lambda: load_catalog(path)) == f"{path}: {message}"


@pytest.mark.parametrize(
    "faults, message",
    [
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\npatches = [{ site = "fx.consumer.check", '
            'action = "delay", ns = 9223372036854775808 }]\n',
            "fault A patch #0: ns: 9223372036854775808 ns does not fit a signed 64-bit count "
            "(at most 2**63 - 1)",
        ),
        (
            '[[fault]]\nid = "A"\nexpect = "pass"\n'
            'patches = [{ site = "fx.consumer.check", action = "delay", ns = 300_000_000_000 }]\n',
            "fault A patch #0: ns: 300000000000 ns is not shorter than the target's timeout_s "
            "(300 s)",
        ),
        (
            '[control]\npatches = [{ site = "fx.consumer.check", action = "delay", '
            "ns = 18446744073709551616 }]\n",
            "control patch #0: ns: 18446744073709551616 ns does not fit a signed 64-bit count "
            "(at most 2**63 - 1)",
        ),
        (
            "[generate]\nwindow_ns = 300_000_000_000\n",
            "generate: window_ns: 300000000000 ns is not shorter than the target's timeout_s "
            "(300 s)",
        ),
        (
            "[generate]\nns = 9223372036854775808\n",
            "generate: ns: 9223372036854775808 ns does not fit a signed 64-bit count "
            "(at most 2**63 - 1)",
        ),
    ],
)
def test_a_delay_must_fit_64_bits_and_end_before_the_timeout(tmp_path, faults, message):
    path, loader = load(tmp_path, faults)
    assert error_of(loader) == f"{path}: {message}"


def test_the_longest_delay_that_fits_loads(tmp_path):
    path, loader = load(
        tmp_path,
        '[[fault]]\nid = "A"\nexpect = "pass"\n'
        'patches = [{ site = "fx.consumer.check", action = "delay", ns = 9223372036854775807 }]\n',
        target=TARGET + "timeout_s = 1e12\n",
    )
    assert loader().fault("A").patches[0].ns == 2**63 - 1


def test_every_caller_imports_the_catalog_from_one_module():
    """faults.catalog is the catalog's one face: its types and checks live in
    faults.catalog.model, faults.catalog.load and faults.catalog.refs, and
    are the same objects."""
    import inspect

    import faults.catalog as catalog
    import faults.catalog.load as load
    import faults.catalog.model as types
    import faults.catalog.refs as refs

    exported = {
        name
        for name, value in vars(catalog).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert sorted(catalog.__all__) == sorted(exported)  # the face lists all it holds
    faces = {"CatalogError", "load_catalog", "check_sites_exist"}  # of errors, load, refs
    model = {"LOG_KEYS", "Catalog", "Config", "Fault", "GenerateSettings", "LogPatterns"}
    model |= {"Patch", "Target"}  # of faults.catalog.model
    assert exported == faces | model
    assert all(getattr(catalog, name) is getattr(types, name) for name in exported - faces)
    assert catalog.load_catalog is load.load_catalog
    assert catalog.check_sites_exist is refs.check_sites_exist


def test_an_older_tree_leaves_out_what_names_a_site_it_lacks(tmp_path):
    """without_missing_sites (review --older-trees): the [generate] entries
    and faults naming a site the tree lacks go, with the faults including
    them; a control naming one cannot go."""
    from dataclasses import replace

    from faults.catalog.model import Patch
    from faults.catalog.refs import without_missing_sites

    sources = tmp_path / "src"
    shutil.copytree(FIXTURE.parent, sources)
    main_cpp = sources / "main.cpp"
    main_cpp.write_text(
        main_cpp.read_text().replace("fx.producer.payload_store", "fx.producer.payload_put")
    )
    catalog = load_catalog(FIXTURE)
    settings = replace(
        catalog.generate,
        survivor_ok=(("fx.consumer.flag_wait", "x"), ("gen.skip.fx.producer.payload_store", "y")),
        site_configs=(("fx.producer.payload_store", ("c",)), ("fx.consumer.", ("c",))),
    )
    older, left_out = without_missing_sites(replace(catalog, generate=settings), sources)
    assert left_out == [
        "gen.skip.fx.producer.payload_store",
        "fx.producer.payload_store",
        "D1",
        "S1",
    ]
    assert set(older.faults) == set(catalog.faults) - {"D1", "S1"}  # S1 includes D1
    assert older.generate.survivor_ok == (("fx.consumer.flag_wait", "x"),)
    assert older.generate.site_configs == (("fx.consumer.", ("c",)),)
    control = (Patch(owner="control", site="fx.producer.payload_store", action="delay", ns=1),)
    with pytest.raises(
        CatalogError, match=r"control patch #0: unknown site 'fx\.producer\.payload_store'"
    ):
        without_missing_sites(replace(catalog, control=control), sources)
