"""A mutation rule's twin (faults/catalog/mutation.py, faults/generate/mutate.py):
the copy of a function its rewritten site calls, checked on load and against
the sources, made in the mutant's scratch tree only, exactly; a stale one
does not apply. On the CPU fixture (tests/fixtures/flag_payload), whose
wait_until is afdep's in miniature."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.catalog.errors import CatalogError
from faults.catalog.model import MutationRule
from faults.catalog.mutation import twin_copy
from faults.catalog.refs import without_missing_sites
from faults.generate.site_faults import with_generated
from faults.pipeline.apply import ApplyError, apply_fault
from faults.pipeline.run import BuildError, build_tree
from faults.pipeline.scratch import tree_digest
from invariants.sync.functions import definitions
from invariants.sync.finding import Finding
from invariants.sync.sites import SourceTree, parse_tree
from invariants.sync.statements import code_only
from tests.unit.faults.catalog.test_load import error_of, load

REPO = Path(__file__).parents[4]
FIXTURE = "tests/fixtures/flag_payload"
WAIT_H = REPO / FIXTURE / "common/wait.h"
FAULT_ID = "gen.weaken-acquire.fx.consumer.flag_wait"
TWIN = (
    "{ of = 'wait_until', name = 'wait_until_relaxed', pattern = 'memory_order_acquire', "
    "replacement = 'memory_order_relaxed' }"
)


def twin_rule(twin: str = TWIN, **fields: str) -> str:
    """The fixture's weaken-acquire entry, each field a TOML literal string,
    with `twin` (TOML, as written)."""
    entry = {
        "family": "weaken-acquire",
        "kind": "wait",
        "pattern": "\\bwait_until\\(",
        "replacement": "wait_until_relaxed(",
    }
    entry.update(fields)
    return (
        "[[target.mutation]]\n"
        + "".join(f"{k} = '{v}'\n" for k, v in entry.items())
        + (f"twin = {twin}\n")
    )


def fixture_catalog(tmp_path: Path, entry: str) -> Path:
    """The fixture's own catalog (it builds) with `entry` after its target."""
    text = (REPO / FIXTURE / "catalog.toml").read_text()
    path = tmp_path / "catalog.toml"
    path.write_text(text.replace("\n[[config]]", f"\n{entry}\n[[config]]", 1))
    return path


def fixture_tree(root: Path, **files: str) -> Path:
    """A copy of the fixture under `root`, with `files` (path -> text) added."""
    sources = root / FIXTURE
    shutil.copytree(REPO / FIXTURE, sources)
    for name, text in files.items():
        (sources / name).write_text(text)
    return root


# ---------------------------------------------------------------- on load
PREFIX = "target.mutation #0 (weaken-acquire): "


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            twin_rule("1"),
            "twin: a table { of, name, pattern, replacement } or an array of them, got 1",
        ),
        (
            twin_rule("[]"),
            "twin: a table { of, name, pattern, replacement } or an array of them, got []",
        ),
        (
            twin_rule("{ of = 'wait_until', pattern = 'a', replacement = 'b' }"),
            "twin.name: required string, got None",
        ),
        (
            twin_rule(TWIN.replace(" }", ", scope = 'sys' }")),
            "twin: unknown keys ['scope']",
        ),
        (twin_rule(TWIN.replace("of = 'wait_until'", "of = 3")), "twin.of: required string, got 3"),
        (
            twin_rule(TWIN.replace("'memory_order_relaxed'", "[]")),
            "twin.replacement: required string, got []",
        ),
        (
            twin_rule(TWIN.replace("'memory_order_acquire'", "'a(b'")),
            "twin.pattern: 'a(b' is not a regular expression: missing ), unterminated "
            "subpattern at position 1",
        ),
        (
            twin_rule(TWIN.replace("'memory_order_acquire'", "'x*'")),
            "twin.pattern: 'x*' matches empty text",
        ),
        (
            twin_rule(TWIN.replace("'memory_order_relaxed'", "'\\2'")),
            "twin.replacement: '\\\\2' refers to group 2 that the pattern does not have",
        ),
        (
            twin_rule(TWIN.replace("of = 'wait_until'", "of = 'fixture::wait_until'")),
            "twin.of: 'fixture::wait_until' is not a function name",
        ),
        (
            twin_rule(TWIN.replace("'wait_until_relaxed'", "'wait_until'")),
            "twin.name: 'wait_until' is the name of the function it copies",
        ),
        (
            twin_rule(replacement="wait_until_gpu("),
            "twin.name: the replacement 'wait_until_gpu(' does not call 'wait_until_relaxed': "
            "no site would call the twin",
        ),
        # `of` and `name` may name the rule pattern's groups, and only those
        (
            twin_rule(TWIN.replace("of = 'wait_until'", "of = '\\2_until'")),
            "twin.of: '\\\\2_until' refers to group 2 that the rule's pattern does not have",
        ),
        (
            twin_rule(
                TWIN.replace("'wait_until_relaxed'", "'\\1-relaxed'"),
                pattern="\\b(wait_until)\\(",
                replacement="\\1-relaxed(",
            ),
            "twin.name: '\\\\1-relaxed' is not a function name",
        ),
        # an array of twins: each key named by its index
        (
            twin_rule(f"[ {TWIN}, {TWIN.replace(' }', ', scope = 1 }')} ]"),
            "twin #1: unknown keys ['scope']",
        ),
        (
            twin_rule(f"[ {TWIN}, {TWIN.replace('wait_until_relaxed', 'spin')} ]"),
            "twin #1.name: neither the replacement 'wait_until_relaxed(' nor another twin's "
            "calls 'spin': no site would call the twin",
        ),
    ],
)
def test_a_bad_twin_is_one_line_naming_its_key(tmp_path, entry, message):
    path, loader = load(tmp_path, "\n" + entry)
    assert error_of(loader) == f"{path}: {PREFIX}{message}"


def test_a_twin_loads_into_its_rule(tmp_path):
    path, loader = load(tmp_path, "\n" + twin_rule(), sites=True)
    [rule] = loader().target.mutations
    [twin] = rule.twins
    assert (twin.of, twin.name, twin.pattern.pattern, twin.replacement) == (
        "wait_until",
        "wait_until_relaxed",
        "memory_order_acquire",
        "memory_order_relaxed",
    )


# ---------------------------------------------------------------- against the sources
MORE = "inline bool {name}(int x) {{ return x != 0; }}\n"


@pytest.mark.parametrize(
    "entry, files, message",
    [
        (
            twin_rule(TWIN.replace("of = 'wait_until'", "of = 'wait_for'")),
            {},
            "twin.of: function 'wait_for' is not defined in {sources}",
        ),
        (
            twin_rule(),
            {"common/more.h": MORE.format(name="wait_until")},
            "twin.of: function 'wait_until' is defined 2 times in {sources} "
            "(common/more.h:1, common/wait.h:12)",
        ),
        (
            twin_rule(TWIN.replace("'memory_order_acquire'", "'memory_order_seq_cst'")),
            {},
            "twin.pattern: 'memory_order_seq_cst' matches nothing in the body of wait_until "
            "(common/wait.h:12)",
        ),
        (
            twin_rule(),
            {"common/more.h": MORE.format(name="wait_until_relaxed")},
            "twin.name: function 'wait_until_relaxed' is defined already in {sources} "
            "(common/more.h:1), not as the twin's copy: the twin would define it again",
        ),
    ],
)
def test_a_twin_its_sources_cannot_make_is_refused_naming_the_function(
    tmp_path, entry, files, message
):
    root = fixture_tree(tmp_path / "tree", **files)
    path = fixture_catalog(tmp_path, entry)
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=root)
    sources = root / FIXTURE
    assert str(raised.value) == f"{path}: {PREFIX}{message.format(sources=sources)}"


def test_a_twin_not_found_when_generating_is_an_error_naming_the_fault(tmp_path):
    path = fixture_catalog(tmp_path, twin_rule(TWIN.replace("of = 'wait_until'", "of = 'wait'")))
    with pytest.raises(CatalogError) as raised:
        with_generated(load_catalog(path), REPO)
    assert str(raised.value) == (
        f"fault {FAULT_ID}: twin.of: function 'wait' is not defined in {REPO / FIXTURE}"
    )


def test_an_older_tree_that_ships_the_twin_leaves_out_its_rule(tmp_path):
    """without_missing_sites (review --older-trees): a tree that defines the
    twin itself cannot take it again; the rule goes, and is said, the others stay."""
    plain = "[[target.mutation]]\nfamily = 'remove-fence'\nkind = 'release'\npattern = 'x'\n"
    catalog = load_catalog(fixture_catalog(tmp_path, f"{plain}replacement = ''\n\n{twin_rule()}"))
    fence, weaken = catalog.target.mutations
    shipped = {"common/more.h": MORE.format(name="wait_until_relaxed")}
    root = fixture_tree(tmp_path / "tree", **shipped)
    older, left_out = without_missing_sites(catalog, root / FIXTURE)
    assert (older.target.mutations, left_out) == ((fence,), ["target.mutation #1 (weaken-acquire)"])
    assert FAULT_ID not in with_generated(older, root).faults
    kept, left_out = without_missing_sites(catalog, REPO / FIXTURE)
    assert (kept.target.mutations, left_out) == ((fence, weaken), [])


def relaxed_copy() -> str:
    """The fixture's wait_until as the twin copies it: renamed, its loads relaxed."""
    text = WAIT_H.read_text()
    start = text.index("inline bool wait_until(")
    definition = text[start : text.index("\n}\n", start) + 3]
    return definition.replace("wait_until(", "wait_until_relaxed(").replace(
        "memory_order_acquire", "memory_order_relaxed"
    )


def test_a_function_of_the_twins_name_exactly_its_copy_is_the_twin(tmp_path):
    """A tree that defines the twin's name as the very copy the twin would
    make keeps the rule: the mutant calls that function, and adds none."""
    root = fixture_tree(tmp_path / "tree", **{"common/more.h": relaxed_copy()})
    catalog = with_generated(
        load_catalog(fixture_catalog(tmp_path, twin_rule()), tree_root=root), root
    )
    [rewrite] = catalog.fault(FAULT_ID).patches
    assert "fixture::wait_until_relaxed(" in rewrite.new
    assert without_missing_sites(catalog, root / FIXTURE)[1] == []
    # One character off, it is another function: refused, naming the rule.
    other = relaxed_copy().replace("return true;", "return 1;")
    root = fixture_tree(tmp_path / "other", **{"common/more.h": other})
    path = fixture_catalog(tmp_path, twin_rule())
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=root)
    assert str(raised.value) == (
        f"{path}: {PREFIX}twin.name: function 'wait_until_relaxed' is defined already in "
        f"{root / FIXTURE} (common/more.h:1), not as the twin's copy: the twin would define "
        "it again"
    )


# The fixture's wait rule spelt with a group its twin's names take.
GROUPED = twin_rule(
    "{ of = '\\1_until', name = '\\1_until_relaxed', pattern = 'memory_order_acquire', "
    "replacement = 'memory_order_relaxed' }",
    pattern="\\b(wait)_until\\(",
    replacement="\\1_until_relaxed(",
)


def test_a_twin_named_by_the_rules_groups_expands_per_match(tmp_path):
    catalog = load_catalog(fixture_catalog(tmp_path, GROUPED), tree_root=REPO)
    [rule] = catalog.target.mutations
    [twin] = rule.twins
    assert (twin.of, twin.name) == ("\\1_until", "\\1_until_relaxed")
    [made] = with_generated(catalog, REPO).fault(FAULT_ID).patches[1:]
    # the same copy, to the letter, as the twin written out by name makes
    tag = f"  // AFDFAULT {FAULT_ID} twin wait_until_relaxed of wait_until"
    assert made.new == made.old + "".join(line + tag + "\n" for line in relaxed_copy().splitlines())
    # expanded, a name the sources lack is refused, naming the rule and the function
    missing = GROUPED.replace("'\\1_until'", "'\\1_for'")
    path = fixture_catalog(tmp_path, missing)
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=REPO)
    assert str(raised.value) == (
        f"{path}: {PREFIX}twin.of: function 'wait_for' is not defined in {REPO / FIXTURE}"
    )


# ---------------------------------------------------------------- in the scratch tree
def twin_of_fixture(fault_id: str) -> str:
    """What common/wait.h's wait_until becomes in the mutant's tree: itself,
    then its copy, renamed and relaxed, each line tagged for `fault_id`."""
    text = WAIT_H.read_text()
    start = text.index("inline bool wait_until(")
    end = text.index("\n}\n", start) + 3
    definition = text[start:end]
    copy = definition.replace("wait_until(", "wait_until_relaxed(").replace(
        "memory_order_acquire", "memory_order_relaxed"
    )
    tag = f"  // AFDFAULT {fault_id} twin wait_until_relaxed of wait_until"
    return text[:end] + "".join(line + tag + "\n" for line in copy.splitlines()) + text[end:]


def test_the_twin_is_made_in_the_scratch_tree_and_the_site_calls_it(tmp_path):
    catalog = with_generated(
        load_catalog(fixture_catalog(tmp_path, twin_rule()), tree_root=REPO), REPO
    )
    fault = catalog.fault(FAULT_ID)
    rewrite, twin = fault.patches
    assert (twin.file, twin.marker, twin.marker_site) == ("common/wait.h", "false", None)
    tree = fixture_tree(tmp_path / "tree")
    sources = tree / FIXTURE
    changed = apply_fault(SourceTree(sources), catalog, FAULT_ID)
    assert changed == [sources / "common/wait.h", sources / "main.cpp"]
    assert (sources / "common/wait.h").read_text() == twin_of_fixture(FAULT_ID)
    main = (sources / "main.cpp").read_text()
    assert main == (REPO / FIXTURE / "main.cpp").read_text().replace(
        "  // @site fx.consumer.flag_wait kind=wait consumers=thread scope=sys "
        "guards=fx.producer.payload_store\n"
        "  if (!fixture::wait_until(",
        "  // @site fx.consumer.flag_wait kind=wait consumers=thread scope=sys "
        "guards=fx.producer.payload_store\n"
        '  if (true) std::printf("AFDFAULT gen.weaken-acquire.fx.consumer.flag_wait rank=%d\\n",'
        " static_cast<int>(rank_idx));  // AFDFAULT gen.weaken-acquire.fx.consumer.flag_wait "
        "marker of a text patch in fx.consumer.flag_wait\n"
        "  if (!fixture::wait_until_relaxed(",
    )
    # The product tree holds no twin, before and after.
    assert definitions(REPO / FIXTURE, "wait_until_relaxed") == []
    assert "wait_until_relaxed" not in WAIT_H.read_text()
    digest = tree_digest(sources)
    try:
        build_tree(catalog.target, tree, tmp_path / "out", digest, gpus=0)
    except BuildError as error:
        pytest.fail(f"the twin's tree does not build: {error}")
    assert (tmp_path / "out/flag_payload").is_file()


def test_a_stale_twin_is_an_apply_error(tmp_path):
    catalog = with_generated(
        load_catalog(fixture_catalog(tmp_path, twin_rule()), tree_root=REPO), REPO
    )
    _, twin = catalog.fault(FAULT_ID).patches
    stale = WAIT_H.read_text().replace("kTimeoutNs))", "kTimeoutNs + 1))")
    tree = fixture_tree(tmp_path / "tree", **{"common/wait.h": stale})
    with pytest.raises(ApplyError) as raised:
        apply_fault(SourceTree(tree / FIXTURE), catalog, FAULT_ID)
    assert str(raised.value) == (
        f"fault {FAULT_ID}: text patch anchor found 0 times in common/wait.h (needs exactly 1): "
        f"{twin.old[:80]!r}"
    )


# A release helper with an (anchored) site in its body, as an annotated tree holds it.
HELPER = """\
static inline __device__ void st_flag(unsigned flag, unsigned* addr) {
// @site fx.flag.body kind=compute
#if __CUDA_ARCH__ >= 700
  asm volatile("st.global.release.sys.b32 [%1], %0;" ::"r"(flag), "l"(addr));
#else
  __threadfence_system();
#endif
// @end fx.flag.body
}
"""


def test_a_twin_copies_no_site_of_its_originals_body(tmp_path):
    """A site is declared once in a tree: the copy leaves the original's
    markers out, so the mutant's tree still parses, each site once."""
    (tmp_path / "k.cuh").write_text(HELPER)
    twin = MutationRule.Twin("st_flag", "st_flag_gpu", re.compile(r"\.sys\."), ".gpu.")
    made = twin_copy(tmp_path, twin)
    assert made.copy == (
        "static inline __device__ void st_flag_gpu(unsigned flag, unsigned* addr) {\n"
        "#if __CUDA_ARCH__ >= 700\n"
        '  asm volatile("st.global.release.gpu.b32 [%1], %0;" ::"r"(flag), "l"(addr));\n'
        "#else\n  __threadfence_system();\n#endif\n}\n"
    )
    (tmp_path / "k.cuh").write_text(HELPER + made.copy)
    sites, violations = parse_tree(tmp_path)
    assert [s.name for s in sites] == ["fx.flag.body"]
    # (the copy's own primitive lies outside the sites: a review would say so)
    outside = "ordering primitive __threadfence_system( outside any site"
    assert violations == [Finding(str(tmp_path / "k.cuh"), 14, outside)]


# ---------------------------------------------------------------- finding a definition
TRICKY = """\
// int wait(int x) { in a comment }
#define WAIT(x) wait(x) { \\
  }
#pragma once
const char* text = "int wait(int x) {";
int wait(int x);  // a declaration: no body
/* Spins.
   wait(int x) { */
template <int kN>
__device__ inline int
wait(int x) noexcept {
  if (x) { return '}'; }
  return other.wait(x) + p->wait(x) + 1'000;
}  // wait
int y = wait(1);
"""


def test_a_definition_is_found_once_with_its_template_lines_and_nothing_else(tmp_path):
    (tmp_path / "k.cuh").write_text(TRICKY)
    [found] = definitions(tmp_path, "wait")
    assert found.source == (
        "template <int kN>\n__device__ inline int\nwait(int x) noexcept {\n"
        "  if (x) { return '}'; }\n  return other.wait(x) + p->wait(x) + 1'000;\n}  // wait\n"
    )
    assert found.where(tmp_path) == "k.cuh:11"
    assert definitions(tmp_path, "other") == []


def test_code_only_blanks_comments_strings_and_directives_keeping_offsets():
    text = '#include "a.h"\nint f() { return \'{\' + "}"; }  // {\nint g = 1\'000;\n'
    assert code_only(text) == (
        ";             \nint f() { return     +    ; }      \nint g = 1'000;\n"
    )
