"""The PTX check's results kept per variant (invariants/sync/ptx_memo.py):
read back they are exactly what the check makes, a variant read back is
never parsed, and a site whose contract changed is checked anew."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import invariants.sync.ptx_memo as ptx_memo
from invariants.sync.ptx_check import ptx_findings, read_index
from invariants.sync.ptx_memo import Memo, remembered_findings
from invariants.sync.sites import parse_tree
from tests.unit.invariants.sync.test_guarded_data import SOURCE, module_text

NON_COHERENT = {"READ_ROW": "ld.global.nc.u32 %r3, [%rd5];"}


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path]:
    """The sources and a PTX folder of two variants: the right kernels, and a
    consumer that reads the rows on the read-only path."""
    sources, folder = tmp_path / "src", tmp_path / "ptx"
    sources.mkdir()
    folder.mkdir()
    (sources / "k.cu").write_text(SOURCE)
    (folder / "right.ptx").write_text(module_text())
    (folder / "nc.ptx").write_text(module_text(consumer=NON_COHERENT))
    (folder / "index.json").write_text(json.dumps({"right.ptx": "right", "nc.ptx": "nc"}))
    return sources, folder


def checked(sources: Path, folder: Path, memo: Memo):
    sites = parse_tree(sources)[0]
    return remembered_findings(sites, sources, folder, sites, memo), ptx_findings(
        sites, sources, read_index(folder), sites
    )


def test_results_read_back_are_the_checks_and_no_variant_is_parsed_again(
    tree, tmp_path, monkeypatch
):
    sources, folder = tree
    memo = Memo(tmp_path / "memo")
    (found, count), expected = checked(sources, folder, memo)
    assert (found, count) == (expected, 2)
    assert [(f.variant, f.line, f.site) for f in found] == [("nc", 15, "k.wait")]
    assert len(list((tmp_path / "memo").iterdir())) == 4  # each variant's stores and findings

    def parsed(path):
        raise AssertionError(f"{path} parsed again")

    monkeypatch.setattr(ptx_memo, "read_module", parsed)
    sites = parse_tree(sources)[0]
    assert remembered_findings(sites, sources, folder, sites, memo) == (expected, 2)


def test_a_site_whose_contract_changed_is_checked_anew(tree, tmp_path):
    sources, folder = tree
    memo = Memo(tmp_path / "memo")
    checked(sources, folder, memo)
    source = sources / "k.cu"
    source.write_text(SOURCE.replace("consumers=block", "consumers=thread"))
    (found, _), expected = checked(sources, folder, memo)
    assert found == expected
    assert len(list((tmp_path / "memo").iterdir())) == 8
