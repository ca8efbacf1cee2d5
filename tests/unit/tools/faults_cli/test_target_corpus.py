"""tools/faults_cli/target_corpus.py: `corpus --target-corpus` asks for the
GPUs of its rank mode before any workspace is made."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).parents[4]


class Reviewing(Exception):
    """The reviews were reached: the rank mode they were given."""


def test_corpus_run_needs_the_gpus_of_its_rank_mode_before_any_workspace(
    monkeypatch, tmp_path, capsys
):
    """With logical ranks one GPU runs every config of a 2-rank target; with
    a GPU per rank it is refused, before any workspace is made (no fetch)."""
    import faults.corpus.bugs
    import tools.faults_cli.target_corpus as target_corpus
    import tools.targets.bug_workspace as bug_workspace
    from faults.catalog import load_catalog
    from faults.corpus.bases import BaseSites
    from faults.corpus.bugs import BugCommit
    from tools.faults_cli.main import main as faults_main

    made: list[str] = []

    def made_only(corpus, bug, root, into, cache, on_base):
        made.append(bug.bug.name)
        base = BaseSites(load_catalog(REPO / corpus.catalog), frozenset(), "")
        return BugCommit(bug.bug, into, "base", "head"), base

    def reviews(commits, *args, rank_mode, **kwargs):
        raise Reviewing(rank_mode)

    monkeypatch.setattr(bug_workspace, "workspace", made_only)
    monkeypatch.setattr(target_corpus, "gpu_count", lambda: 1)
    monkeypatch.setattr(faults.corpus.bugs, "review_commits", reviews)
    corpus = str(REPO / "corpus/flashinfer_comm.toml")

    def corpus_run(mode: str, workdir: str) -> int:
        top = ["--root", str(REPO), "--rank-mode", mode, "--workdir", str(tmp_path / workdir)]
        return faults_main([*top, "corpus", "--target-corpus", corpus, "--only", "B-.*", "--run"])

    assert corpus_run("per-gpu", "w1") == 2
    assert capsys.readouterr().err.strip().endswith(
        "corpus --run: the target needs 2 GPUs, this machine has 1"
    )
    assert made == []  # refused before any workspace
    with pytest.raises(Reviewing) as reached:
        corpus_run("logical", "w2")
    assert (made, reached.value.args) == (["B-fusion-barrier-own-slot-first"], ("logical",))
