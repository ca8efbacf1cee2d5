"""Ordering-neutral edits of afdep's kernels the static review must approve
(docs/review.md, "Neutral commits"): a release moved into a helper the site
calls, pure pointer arithmetic hoisted above a wait, a wait loop run in the
other order with the same acquires, the PDL trigger moved first. They are
committed on a clone of HEAD and reviewed as the corpus reviews a bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.corpus.bugs import fresh_clone, review_bug
from invariants.sync.sites import parse_tree

REPO = Path(__file__).parents[4]
KNOWN_SITES = {site.name for site in parse_tree(REPO / "afdep/csrc")[0]}
# name -> its edits: (file, old, new), each old found exactly once
NEUTRAL = {
    'n1-row-release-helper': [
        (
            'afdep/csrc/common/comm.cuh',
            '// An invalid route:',
            "// A combine row's flag, released at sys scope for the peer's wait.\n"
            '__device__ __forceinline__ void publish_row_flag(u64* flag, u64 epoch) {\n'
            '  ptx::st_release_sys(flag, epoch);\n'
            '}\n'
            '\n'
            '// An invalid route:',
        ),
        (
            'afdep/csrc/impls/ffn_combine.cuh',
            '      ptx::st_release_sys(flags + static_cast<u64>(ffn_local) * capacity + token_idx'
            ', epoch);',
            '      publish_row_flag(flags + static_cast<u64>(ffn_local) * capacity + token_idx, e'
            'poch);',
        ),
    ],
    'n2-placement-pointers-above-wait': [
        (
            'afdep/csrc/impls/ffn_place.cuh',
            '  // @site cf.ffn_place.count_wait',
            '  const Placement placement =\n'
            '      placement_at(peer_ptr<i32>(p, rank_idx, p.off_placement), num_attention, exper'
            'ts_per_ffn);\n'
            '  // @site cf.ffn_place.count_wait',
        ),
        (
            'afdep/csrc/impls/ffn_place.cuh',
            '  // @site cf.ffn_place.prefix_compute kind=compute\n'
            '  const Placement placement =\n'
            '      placement_at(peer_ptr<i32>(p, rank_idx, p.off_placement), num_attention, exper'
            'ts_per_ffn);\n',
            '  // @site cf.ffn_place.prefix_compute kind=compute\n',
        ),
    ],
    'n3-done-wait-reversed': [
        (
            'afdep/csrc/impls/ffn_expand.cuh',
            '    for (int source = 0; source < num_attention; ++source)\n'
            '      wait_until(done + source, epoch * p.source_ctas, "pf.ffn_expand.done_wait", p)'
            ';',
            '    for (int source = num_attention - 1; source >= 0; --source)\n'
            '      wait_until(done + source, epoch * p.source_ctas, "pf.ffn_expand.done_wait", p)'
            ';',
        ),
    ],
    'n4-pdl-trigger-first': [
        (
            'afdep/csrc/impls/ffn_place.cuh',
            '  ptx::launch_dependents();  // the epilogue may start: it waits for prefix_ready it'
            'self\n'
            '\n',
            '',
        ),
        (
            'afdep/csrc/impls/ffn_place.cuh',
            '  // @site cf.ffn_place.count_wait',
            '  ptx::launch_dependents();  // the epilogue may start: it waits for prefix_ready it'
            'self\n'
            '\n'
            '  // @site cf.ffn_place.count_wait',
        ),
    ],
}


@pytest.mark.skipif(
    not (REPO / ".git").exists(), reason="the edits are committed on a clone of HEAD"
)
def test_the_static_review_approves_the_neutral_edits(tmp_path):
    """All of them in one commit, one review: a finding is some edit's alone
    (the rules add findings, none takes one away), and the log names it."""
    import git

    repo = fresh_clone(REPO, tmp_path / "clone")
    base = repo.head.commit.hexsha
    for file, old, new in [edit for edits in NEUTRAL.values() for edit in edits]:
        path = tmp_path / "clone" / file
        text = path.read_text()
        assert text.count(old) == 1, (file, old)
        path.write_text(text.replace(old, new))
    repo.git.add("--all")
    actor = git.Actor("afdep", "afdep@localhost")
    head = repo.index.commit("neutral edits", author=actor, committer=actor).hexsha
    static = review_bug(
        tmp_path / "clone", base, head, tmp_path, run=False, known_sites=KNOWN_SITES
    )
    assert static.exit_code == 0, Path(static.log).read_text()
