"""A target whose sites are declared by anchors and whose wait is bounded
(tests/fixtures/flag_payload_anchored): its scratch trees hold the sites as
comment sites, patches apply there as on an annotated tree, every tree's
wait gets its time limit, and the user's sources are never written."""

from __future__ import annotations

from pathlib import Path

from faults.catalog import Patch, load_catalog
from faults.judge.verdict import Verdict
from faults.pipeline.apply import apply_patches
from faults.pipeline.engine import Engine
from faults.pipeline.scratch import target_scratch, tree_digest
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]
CATALOG = REPO / "tests/fixtures/flag_payload_anchored/catalog.toml"
SOURCES = REPO / "tests/fixtures/flag_payload_anchored"

BOUNDED_WAIT = [
    "  // @site fx.consumer.flag_wait kind=wait consumers=thread scope=sys "
    "guards=fx.producer.payload_store",
    "  const auto afd_bound_fx_consumer_flag_wait = std::chrono::steady_clock::now();"
    "  // AFDFAULT bound start of fx.consumer.flag_wait's time limit",
    "  while ((channel.flag.load(std::memory_order_acquire) < round_idx + 1) && "
    "(std::chrono::steady_clock::now() - afd_bound_fx_consumer_flag_wait < "
    "std::chrono::nanoseconds(2000000000) || ([&]() { "
    'std::printf("afdep timeout: site=fx.consumer.flag_wait rank=%d\\n", rank_idx); '
    "std::fflush(stdout); std::_Exit(3); return false; })())) {",
    "  }",
    "  // @end fx.consumer.flag_wait",
]


def patched(tmp_path: Path, *patches: Patch) -> list[str]:
    catalog = load_catalog(CATALOG, tree_root=REPO)
    sources = target_scratch(REPO, tmp_path / "tree", catalog.target)
    apply_patches(sources, catalog, list(patches))
    return (sources.root / "main.cpp").read_text().splitlines()


def region(lines: list[str], name: str) -> list[str]:
    first = lines.index(next(line for line in lines if f"// @site {name} " in line))
    return lines[first : lines.index(f"  // @end {name}", first) + 1]


def test_the_clean_tree_holds_the_anchored_sites_and_its_wait_bounded(tmp_path):
    lines = patched(tmp_path)
    assert region(lines, "fx.consumer.flag_wait") == BOUNDED_WAIT
    assert region(lines, "fx.producer.payload_store") == [
        "  // @site fx.producer.payload_store kind=store",
        "  for (int word_idx = 0; word_idx < kWords; ++word_idx)",
        "    channel.payload[word_idx] = expected(round_idx, word_idx);",
        "  // @end fx.producer.payload_store",
    ]


def test_a_delay_a_skip_and_a_text_patch_marker_apply_to_anchored_sites(tmp_path):
    delay = Patch("D9", site="fx.producer.flag_release", action="delay", ns=5, at="end")
    skip = Patch("S9", site="fx.consumer.flag_wait", action="skip")
    text = Patch(
        "T9",
        file="main.cpp",
        old="    const int got = channel.payload[word_idx];",
        new="    const int got = channel.payload[kWords - 1 - word_idx];",
    )
    lines = patched(tmp_path, delay, skip, text)
    marker = 'if (true) std::printf("AFDFAULT {0} rank=%d\\n", static_cast<int>(rank_idx));'
    spin = (
        "const auto afd_t0 = std::chrono::steady_clock::now(); while "
        "(std::chrono::steady_clock::now() - afd_t0 < std::chrono::nanoseconds(5)) { }"
    )
    assert region(lines, "fx.producer.flag_release") == [
        "  // @site fx.producer.flag_release kind=release producers=thread scope=sys "
        "guards=fx.producer.payload_store",
        "  channel.flag.store(round_idx + 1, std::memory_order_release);",
        f"  if (true) {{ {spin} {marker.format('D9')} }}"
        "  // AFDFAULT D9 delay 5 ns at end of fx.producer.flag_release",
        "  // @end fx.producer.flag_release",
    ]
    assert region(lines, "fx.consumer.flag_wait") == [
        BOUNDED_WAIT[0],  # skipped: no loop left to bound
        f"  {marker.format('S9')}  // AFDFAULT S9 skip fx.consumer.flag_wait",
        BOUNDED_WAIT[-1],
    ]
    assert region(lines, "fx.consumer.check")[:4] == [
        "  // @site fx.consumer.check kind=compute",
        f"  {marker.format('T9')}  // AFDFAULT T9 marker of a text patch in fx.consumer.check",
        "  for (int word_idx = 0; word_idx < kWords; ++word_idx) {",
        "    const int got = channel.payload[kWords - 1 - word_idx];",
    ]


def test_a_wait_that_would_hang_ends_with_its_timeout_line_and_marker_sources_untouched(
    tmp_path,
):
    """H1 skips the release: the wait would spin forever; its bound prints the
    timeout line naming the site, and the fault's marker is in the log."""
    catalog = load_catalog(CATALOG, tree_root=REPO)
    before = tree_digest(SOURCES)
    engine = Engine(catalog, REPO, tmp_path)
    with engine.guard():
        [result] = engine.evaluate("H1", list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.KILLED, True)
    assert (result.outcome["timeout_lines"], result.outcome["markers"]) == (1, {"H1": 1})
    assert result.outcome["exit_code"] == 3
    assert tree_digest(SOURCES) == before


def test_the_faults_generated_from_anchored_sites_apply(tmp_path):
    from faults.generate.site_faults import with_generated

    catalog = with_generated(load_catalog(CATALOG, tree_root=REPO), REPO)
    assert sorted(f for f in catalog.faults if f.startswith("gen.")) == [
        "gen.delay.fx.consumer.check",
        "gen.delay.fx.producer.flag_release",
        "gen.delay.fx.producer.payload_store",
        "gen.publish-early.fx.producer.flag_release",
        "gen.skip.fx.consumer.flag_wait",
        "gen.skip.fx.producer.flag_release",
    ]
    # A mutant's text is the annotated tree's: the release moves above its store.
    early = catalog.all_patches("gen.publish-early.fx.producer.flag_release")
    lines = patched(tmp_path / "early", *early)
    release = lines.index(region(lines, "fx.producer.flag_release")[0])
    assert release < lines.index(region(lines, "fx.producer.payload_store")[0])
    lines = patched(tmp_path, *catalog.all_patches("gen.skip.fx.consumer.flag_wait"))
    assert region(lines, "fx.consumer.flag_wait")[1].endswith(
        "// AFDFAULT gen.skip.fx.consumer.flag_wait skip fx.consumer.flag_wait"
    )


def test_a_compute_site_s_spin_is_bounded_a_store_site_s_loop_is_not(tmp_path):
    """A Lamport poll (data that is its own flag, no acquire) is a compute
    site and may spin forever: its loop gets the limit as a wait's does; a
    store site only writes, and its loops are left as they are."""
    from faults.pipeline.bound import bound_waits

    catalog = load_catalog(CATALOG, tree_root=REPO)
    source = tmp_path / "k.cpp"
    source.write_text(
        "void f(int* a, volatile int* v) {\n"
        "  // @site k.poll kind=compute\n"
        "  while (*v == 0) {\n"
        "  }\n"
        "  // @end k.poll\n"
        "  // @site k.fill kind=store\n"
        "  int i = 0;\n"
        "  while (i < 4) {\n"
        "    a[i++] = 1;\n"
        "  }\n"
        "  // @end k.fill\n"
        "}\n"
    )
    assert bound_waits(SourceTree(tmp_path), catalog.target) == [source]
    lines = source.read_text().splitlines()
    assert lines[2] == (
        "  const auto afd_bound_k_poll = std::chrono::steady_clock::now();"
        "  // AFDFAULT bound start of k.poll's time limit"
    )
    assert lines[3].startswith("  while ((*v == 0) && (std::chrono::steady_clock::now()")
    assert 'std::printf("afdep timeout: site=k.poll rank=%d\\n", rank_idx);' in lines[3]
    assert lines[7:11] == ["  int i = 0;", "  while (i < 4) {", "    a[i++] = 1;", "  }"]
