"""Mutation operators (faults/generate/mutate.py): the catalog's [[target.mutation]]
entries, checked; the mutants they make from the sites, exactly; publish-early;
and the generated faults' families."""

from __future__ import annotations

import dataclasses
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from faults.catalog import GenerateSettings, load_catalog
from faults.catalog.errors import CatalogError
from faults.generate.mutate import mutants, user_line
from faults.generate.site_faults import generated_faults, is_generated, with_generated
from faults.operators import OPERATORS, REWRITE_FAMILIES, Family
from invariants.sync.sites import parse_tree
from tests.unit.faults.catalog.test_load import TARGET, error_of, load

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"
SETTINGS = GenerateSettings(marker="m", configs=("c",))


def rule(**fields) -> str:
    """A [[target.mutation]] entry, each value a TOML literal string."""
    entry = {"family": "remove-barrier", "kind": "release", "pattern": "x", "replacement": ""}
    entry.update(fields)
    return "[[target.mutation]]\n" + "".join(f"{k} = '{v}'\n" for k, v in entry.items())


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            rule(family="skip-wait"),
            "target.mutation #0: family: 'skip-wait' is not one of "
            + ", ".join(f.value for f in REWRITE_FAMILIES),
        ),
        (
            rule(kind="publish"),
            "target.mutation #0 (remove-barrier): kind: 'publish' is not a site kind "
            "(store, release, wait, compute)",
        ),
        (
            rule(pattern="a(b"),
            "target.mutation #0 (remove-barrier): pattern: 'a(b' is not a regular expression: "
            "missing ), unterminated subpattern at position 1",
        ),
        (
            rule(pattern="x*"),
            "target.mutation #0 (remove-barrier): pattern: 'x*' matches empty text",
        ),
        (
            rule(pattern="(a)", replacement="\\2"),
            "target.mutation #0 (remove-barrier): replacement: '\\\\2' refers to group 2 that "
            "the pattern does not have",
        ),
        (
            rule(pattern="(?P<a>x)", replacement="\\g<b>"),
            "target.mutation #0 (remove-barrier): replacement: '\\\\g<b>' refers to group b "
            "that the pattern does not have",
        ),
        (rule(scope="sys"), "target.mutation #0: unknown keys ['scope']"),
        (
            rule(pattern="(a)", expose="(\\2 & 1) == 0"),
            "target.mutation #0 (remove-barrier): expose: '(\\\\2 & 1) == 0' refers to group 2 "
            "that the pattern does not have",
        ),
        (
            rule(kind="store", expose="true"),
            "target.mutation #0 (remove-barrier): expose: only a release or wait rule holds "
            "producers back, this one is kind=store",
        ),
        (
            rule(expose=" "),
            "target.mutation #0 (remove-barrier): expose: a condition string, got ' '",
        ),
        (
            "[[target.mutation]]\nfamily = 'remove-barrier'\nkind = 'release'\npattern = 'x'\n",
            "target.mutation #0: replacement: required string, got None",
        ),
    ],
)
def test_a_bad_mutation_entry_is_a_catalog_error_naming_it(tmp_path, entry, message):
    path, loader = load(tmp_path, "\n" + entry)
    assert error_of(loader) == f"{path}: {message}"


def test_mutation_must_be_an_array_of_tables(tmp_path):
    path, loader = load(tmp_path, "", target=TARGET + "mutation = 1\n")
    assert error_of(loader) == f"{path}: target: mutation must be an array of tables, got 1"


def test_the_afdep_catalog_mutants_by_family():
    catalog = with_generated(load_catalog(AFDEP), REPO)
    families = Counter(
        f.family.value for f in catalog.faults.values() if f.family and is_generated(f.id)
    )
    # publish-early: one per release in its store's block (cf.attention_dispatch.count_release,
    # cf.ffn_place.prefix_release, cb.ffn_combine.row_release; the done releases lie
    # outside their stores' loop, and so does cf.attention_dispatch.row_release, which
    # publishes a batch of tokens after their loop: corpus bug b21 is its move by hand).
    # remove-barrier: 9, the cf.ffn_place.prefix_release region holding its __syncthreads.
    assert dict(families) == {
        "publish-early": 3,
        "uneven-delay": 6,
        "forced-order": 6,
        "skip-wait": 7,
        "skip-release": 6,
        "delay": 16,
        "remove-barrier": 9,
        "remove-warp-sync": 4,
        "weaken-release": 6,
        "weaken-acquire": 7,
        "remove-fence": 4,
        "narrow-scope": 17,
        "epoch-off-by-one": 9,
        "wrong-slot": 5,
    }
    assert all(f.family is None for f in catalog.faults.values() if not is_generated(f.id))
    mutant = catalog.faults["gen.wrong-slot.cf.attention_dispatch.row_release"]
    assert (mutant.expect, mutant.configs, mutant.family) == (
        "fail",
        ("bf16-graph",),
        Family.WRONG_SLOT,
    )
    patch, delay = mutant.patches
    # Its window held open: even slots' producers delayed before the store it publishes.
    assert (delay.site, delay.action, delay.ns, delay.when, delay.marker) == (
        "cf.attention_dispatch.row_store",
        "delay",
        20_000,
        "(slot & 1) == 0",
        "false",
    )
    assert (patch.file, patch.marker_site, patch.marker) == (
        "impls/attention_dispatch.cuh",
        "cf.attention_dispatch.row_release",
        "threadIdx.x % 32 == 0 && blockIdx.x == 0",
    )
    assert patch.old == (
        "        ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, "
        "epoch);\n      // @end cf.attention_dispatch.row_release\n"
    )
    assert patch.new == patch.old.replace("+ slot,", "+ (slot ^ 1),")
    source = (REPO / "afdep/csrc/impls/attention_dispatch.cuh").read_text().splitlines()
    [line] = [n for n, text in enumerate(source, 1) if "p.off_slot_flags) + slot," in text]
    assert mutant.title == (
        f"wrong-slot in cf.attention_dispatch.row_release (attention_dispatch.cuh:{line}): "
        "'+ slot,' -> '+ (slot ^ 1),'; producers with (slot & 1) == 0 delayed before the "
        "store it publishes"
    )


def test_a_site_mutated_twice_by_one_family_numbers_its_mutants():
    catalog = with_generated(load_catalog(AFDEP), REPO)
    scoped = [
        f
        for f in catalog.faults
        if f.startswith("gen.narrow-scope.cf.attention_dispatch.count_release")
    ]
    assert scoped == [
        "gen.narrow-scope.cf.attention_dispatch.count_release.1",
        "gen.narrow-scope.cf.attention_dispatch.count_release.2",
    ]
    first, second = (catalog.faults[f].patches[0] for f in scoped)
    assert first.new.startswith("        ptx::fence_acq_rel_gpu();\n")
    assert "ptx::st_release_gpu(peer_ptr<u64>" in second.new
    counter, held = catalog.faults["gen.epoch-off-by-one.pf.ffn_expand.done_wait.1"].patches
    assert "wait_until(done + source, epoch * p.source_ctas - 1, " in counter.new
    # One source CTA held back before the rows the wait guards: one add short
    # then passes while that CTA's rows are unwritten.
    assert (held.site, held.action, held.ns, held.when, held.marker) == (
        "pf.attention_dispatch.row_store",
        "delay",
        20_000,
        "blockIdx.x == 0",
        "false",
    )
    # Held open it was killed (083bed34, 1xH200): no survivor entry excuses it.
    assert catalog.faults["gen.epoch-off-by-one.pf.ffn_expand.done_wait.1"].survivor_ok is None
    [short] = catalog.faults["gen.epoch-off-by-one.pf.ffn_expand.done_wait.2"].patches
    assert "epoch * p.source_ctas + 1, " in short.new  # waits forever: nothing to hold open


SOURCE = """\
void f(int* flags, int slot, int epoch) {
  // @site k.store kind=store
  data[slot] = 1;
  // @end k.store
  // @site k.release kind=release guards=k.store
  __syncthreads();
  release(flags + slot, epoch);
  __syncthreads();
  // @end k.release
  if (slot) {
    // @site k.late kind=release guards=k.store
    release(flags + slot, epoch);
    // @end k.late
  }
}
"""


def sites_of(sources: Path, text: str = SOURCE):
    sources.mkdir()
    (sources / "k.cuh").write_text(textwrap.dedent(text))
    sites, _ = parse_tree(sources)  # a release's guards: the contract's attribute
    return sites


def catalog_rules(tmp_path: Path, entries: str):
    path, loader = load(tmp_path, "\n" + entries)
    return loader().target.mutations


def test_each_match_is_one_mutant_and_equal_rewrites_are_one(tmp_path):
    rules = catalog_rules(
        tmp_path,
        rule(pattern="__syncthreads\\(\\);")
        + rule(pattern="__sync(threads)\\(\\);")  # the same two rewrites: no new mutant
        + rule(family="wrong-slot", pattern="\\+ (slot),", replacement="+ (\\1 ^ 1),"),
    )
    found = mutants(sites_of(tmp_path / "src"), rules, SETTINGS, tmp_path / "src")
    assert sorted(found) == [
        "gen.publish-early.k.release",
        "gen.remove-barrier.k.release.1",
        "gen.remove-barrier.k.release.2",
        "gen.wrong-slot.k.late",
        "gen.wrong-slot.k.release",
    ]
    one, two = (found[f"gen.remove-barrier.k.release.{n}"].patches[0] for n in (1, 2))
    assert (one.old, one.new) == (
        "  __syncthreads();\n  release(flags + slot, epoch);\n  __syncthreads();\n"
        "  // @end k.release\n",
        "  \n  release(flags + slot, epoch);\n  __syncthreads();\n  // @end k.release\n",
    )
    assert (two.old, two.new) == (
        "  __syncthreads();\n  // @end k.release\n",
        "  \n  // @end k.release\n",
    )
    slot = found["gen.wrong-slot.k.late"]
    assert slot.patches[0].new == "    release(flags + (slot ^ 1), epoch);\n    // @end k.late\n"
    assert (slot.configs, slot.family, slot.patches[0].marker) == (("c",), Family.WRONG_SLOT, "m")


def test_an_exposing_rule_delays_the_producers_it_names_before_the_published_store(tmp_path):
    rules = catalog_rules(
        tmp_path,
        rule(
            family="wrong-slot",
            pattern="\\+ (slot),",
            replacement="+ (\\1 ^ 1),",
            expose="(\\1 & 1) == 0",
        ),
    )
    settings = GenerateSettings(marker="m", configs=("c",), ns=7_000, when="w")
    found = mutants(sites_of(tmp_path / "src"), rules, settings, tmp_path / "src")
    fault = found["gen.wrong-slot.k.late"]
    rewrite, delay = fault.patches
    assert rewrite.new == "    release(flags + (slot ^ 1), epoch);\n    // @end k.late\n"
    assert (delay.owner, delay.site, delay.action, delay.ns, delay.when, delay.marker) == (
        "gen.wrong-slot.k.late",
        "k.store",  # k.late guards it
        "delay",
        7_000,
        "((slot & 1) == 0) && (w)",
        "false",  # the rewrite's marker says the mutant fired
    )
    assert fault.title.endswith(
        "'+ slot,' -> '+ (slot ^ 1),'; producers with (slot & 1) == 0 delayed before the "
        "store it publishes"
    )


WAITS = """\
void g(const int* flags, int epoch) {
  // @site k.fill kind=store
  data[0] = 1;
  // @end k.fill
  // @site k.wait kind=wait guards=k.store
  wait(flags, epoch, "k.wait");
  // @end k.wait
  // @site k.loose kind=wait
  wait(flags, epoch, "k.loose");
  // @end k.loose
}
"""


def test_an_exposing_wait_rule_delays_every_producer_of_the_store_it_guards(tmp_path):
    rules = catalog_rules(
        tmp_path,
        rule(
            family="epoch-off-by-one",
            kind="wait",
            pattern='\\bepoch(?=, ")',
            replacement="epoch - 1",
            expose="true",
        ),
    )
    sources = tmp_path / "src"
    sites = sites_of(sources, SOURCE + WAITS)
    with pytest.raises(CatalogError) as error:
        mutants(sites, rules, SETTINGS, sources)
    # k.loose guards nothing: the store above it (k.fill) is not what it waits for.
    assert str(error.value) == (
        f"fault gen.epoch-off-by-one.k.loose: its rule exposes, but site k.loose "
        f"({sources / 'k.cuh'}:23) guards no store site to delay: name it with guards="
    )
    found = mutants([s for s in sites if s.name != "k.loose"], rules, SETTINGS, sources)
    fault = found["gen.epoch-off-by-one.k.wait"]
    rewrite, delay = fault.patches
    assert rewrite.new == '  wait(flags, epoch - 1, "k.wait");\n  // @end k.wait\n'
    assert (delay.site, delay.action, delay.when, delay.marker) == (
        "k.store",
        "delay",
        "true",
        "false",
    )
    assert fault.title.endswith(
        "'epoch' -> 'epoch - 1'; every producer delayed before the store it guards"
    )


def test_an_exposing_rule_on_a_release_that_publishes_no_store_is_an_error(tmp_path):
    text = "// @site k.release kind=release\nrelease(flags + slot, epoch);\n// @end k.release\n"
    rules = catalog_rules(
        tmp_path,
        rule(family="wrong-slot", pattern="\\+ (slot),", replacement="+ (\\1 ^ 1),", expose="true"),
    )
    with pytest.raises(CatalogError) as error:
        mutants(sites_of(tmp_path / "src", text), rules, SETTINGS, tmp_path / "src")
    assert str(error.value) == (
        f"fault gen.wrong-slot.k.release: its rule exposes, but site k.release "
        f"({tmp_path / 'src/k.cuh'}:1) publishes no store site to delay: name it with guards="
    )


def test_publish_early_moves_the_release_above_its_store_in_one_block(tmp_path):
    found = mutants(sites_of(tmp_path / "src"), (), SETTINGS, tmp_path / "src")
    # k.late lies in a block k.store is not in: moving it would change what runs.
    assert list(found) == ["gen.publish-early.k.release"]
    fault = found["gen.publish-early.k.release"]
    [patch] = fault.patches
    store = "  // @site k.store kind=store\n  data[slot] = 1;\n  // @end k.store\n"
    release = (
        "  // @site k.release kind=release guards=k.store\n  __syncthreads();\n"
        "  release(flags + slot, epoch);\n  __syncthreads();\n  // @end k.release\n"
    )
    assert (patch.old, patch.new, patch.marker_site) == (
        store + release,
        release + store,
        "k.release",
    )
    assert fault.title == (
        "publish-early: k.release moved above k.store, the store it guards (k.cuh:3)"
    )
    assert (fault.expect, fault.family) == ("fail", Family.PUBLISH_EARLY)


def test_a_release_that_guards_nothing_is_not_moved(tmp_path):
    text = SOURCE.replace(" guards=k.store", "")
    assert mutants(sites_of(tmp_path / "src", text), (), SETTINGS, tmp_path / "src") == {}


def test_the_site_actions_carry_their_families():
    sites, _ = parse_tree(REPO / "afdep/csrc")
    faults = generated_faults(sites, GenerateSettings(ns=5, marker="m"))
    assert faults["gen.skip.cf.ffn_stream_expand.row_wait"].family is Family.SKIP_WAIT
    assert faults["gen.skip.cf.attention_dispatch.row_release"].family is Family.SKIP_RELEASE
    assert faults["gen.delay.cf.attention_dispatch.row_store"].family is Family.DELAY


def test_mutants_are_generated_faults_and_no_generated_drops_them(capsys):
    from tools.faults_cli.main import main

    assert is_generated("gen.weaken-acquire.cf.ffn_stream_expand.row_wait")
    assert not is_generated("gen.other.x") and not is_generated("N2")
    assert main(["--catalog", str(AFDEP), "--root", str(REPO), "list"]) == 0
    assert "gen.remove-warp-sync.cf.attention_dispatch.row_release" in capsys.readouterr().out
    assert main(["--catalog", str(AFDEP), "--root", str(REPO), "--no-generated", "list"]) == 0
    assert "gen." not in capsys.readouterr().out


def test_every_family_is_named_in_the_interface():
    """Family is the operators' words in their rank order (one module each,
    faults/operators/), and every stage names that one enum."""
    ranked = sorted(OPERATORS.values(), key=lambda op: op.rank)
    assert [f.value for f in Family] == [op.word for op in ranked]
    assert {"skip-wait", "weaken-release", "narrow-scope"} <= {f.value for f in Family}
    from faults.generate import mutate

    assert mutate.Family is Family


def test_a_covered_waits_reason_reaches_its_wrong_value_mutants_not_its_order_mutants():
    catalog = with_generated(load_catalog(AFDEP), REPO)
    reason = dict(catalog.generate.survivor_ok)["cf.ffn_stream_expand.gate_wait"]
    assert (
        catalog.fault("gen.epoch-off-by-one.cf.ffn_stream_expand.gate_wait.1").survivor_ok == reason
    )
    assert catalog.fault("gen.weaken-acquire.cf.ffn_stream_expand.gate_wait").survivor_ok is None
    assert catalog.fault("gen.narrow-scope.cf.ffn_stream_expand.gate_wait").survivor_ok is None


def test_a_reason_keyed_by_a_generated_fault_reaches_that_fault_only():
    """A survivor said by its own id (an epoch mutant no delay reaches): the
    skipped wait of the same site must still fail."""
    own = "gen.epoch-off-by-one.cf.ffn_stream_expand.prefix_wait"
    catalog = load_catalog(AFDEP)
    reasons = (*catalog.generate.survivor_ok, (own, "no delay reaches it"))
    catalog = with_generated(
        dataclasses.replace(
            catalog, generate=dataclasses.replace(catalog.generate, survivor_ok=reasons)
        ),
        REPO,
    )
    assert catalog.fault(own).survivor_ok == "no delay reaches it"
    assert catalog.fault("gen.skip.cf.ffn_stream_expand.prefix_wait").survivor_ok is None
    assert catalog.fault("gen.remove-barrier.cf.ffn_stream_expand.prefix_wait").survivor_ok is None
    assert catalog.fault("gen.epoch-off-by-one.pf.ffn_expand.done_wait.2").survivor_ok is None


def test_a_title_names_the_users_line_not_the_annotated_copys(tmp_path):
    """An anchored site is written into the scratch copy as comment lines
    (faults/generate/annotate.py): a line below them is the user's less
    those, so a title points at the line the user's file holds."""
    text = "void f() {\n  // @site k.a kind=store\n  x = 1;\n  // @end k.a\n  y = 2;\n}\n"
    sites = sites_of(tmp_path / "src", text)
    path = sites[0].path
    assert [user_line(sites, path, line, frozenset({"k.a"})) for line in (3, 5)] == [2, 3]
    assert [user_line(sites, path, line, frozenset()) for line in (3, 5)] == [3, 5]
