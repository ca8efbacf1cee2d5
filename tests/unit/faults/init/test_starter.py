"""The starter catalog's text: TOML, its contract the spellings found, a site
table per proposal with its anchors, and the harness's log lines."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from faults.catalog import load_catalog
from faults.init import harness_skeleton, propose, scan, starter_catalog
from faults.init.harness import LOG_PATTERNS
from faults.init.starter import toml_string
from invariants.sync.sites import parse_tree
from tests.unit.faults.init.tree import write_tree


def starter(tmp_path) -> tuple[dict, str]:
    found = scan(write_tree(tmp_path), {})
    text = starter_catalog(found, propose(found), "demo", "src")
    return tomllib.loads(text), text


def test_the_starter_is_toml_with_a_site_per_proposal(tmp_path):
    data, _ = starter(tmp_path)
    target = data["target"]
    assert (target["name"], target["sources"], target["language"]) == ("demo", "src", "cuda")
    assert target["contract"] == {
        "acquire": {"sys": "ld_flag_acquire"},
        "barrier": {"block": "__syncthreads"},
        "release": {"sys": "st_flag_release"},
    }
    assert [(s["name"], s["kind"], s["file"]) for s in target["site"]] == [
        ("kernels.producer.store", "store", "kernels.cu"),
        ("kernels.producer.release", "release", "kernels.cu"),
        ("kernels.consumer.wait", "wait", "kernels.cu"),
        ("legacy.legacy_wait.wait", "wait", "legacy.cu"),
    ]
    release = target["site"][1]
    assert release == {
        "name": "kernels.producer.release",
        "file": "kernels.cu",
        "begin": "__syncthreads();\n  if (threadIdx.x == 0) {",
        "end": "st_flag_release(flag, epoch);\n  }",
        "kind": "release",
        "producers": "block",
        "scope": "sys",
        "guards": "kernels.producer.store",
    }
    assert target["site"][3]["at"] == "while (*flag < epoch) {"
    assert [c["name"] for c in data["config"]] == ["default"]
    assert data["fault"][0]["patches"][0]["site"] == "kernels.producer.release"
    assert "bound" not in target  # commented: the table is the user's to switch on


def test_each_site_says_its_file_line_and_code_and_the_volatile_spin_its_weakness(tmp_path):
    _, text = starter(tmp_path)
    assert "# kernels.cu:8: st_flag_release(flag, epoch);\n[[target.site]]" in text
    assert "# legacy.cu:2: while (*flag < epoch) {\n# relaxed (volatile) — no acquire\n" in text
    assert "# [target.bound]\n" in text


def test_the_harness_prints_what_the_log_patterns_find():
    harness = harness_skeleton("demo", "kernels.cu")
    printed = {
        "mismatch": "mismatch: rank=0 index=3 expected=1 got=2",
        "timeout": "timeout: site=unknown rank=1",
        "digest": '"native_source_sha256": "' + "a" * 64 + '"',
    }
    for key, line in printed.items():
        assert re.search(LOG_PATTERNS[key], line), key
    assert 'std::printf("timeout: site=%s rank=%d\\n"' in harness
    assert '"mismatch: rank=%d index=%zu' in harness
    assert '"\\"native_source_sha256\\": \\"%s\\"\\n", SOURCE_DIGEST' in harness
    assert "cudaStreamCreateWithFlags" in harness and '#include "kernels.cu"' in harness


def test_a_toml_string_reads_back_as_its_text():
    for text in ("plain", "it's", 'a "quote"\nand a line', "back\\slash", "tab\there"):
        assert tomllib.loads(f"x = {toml_string(text)}")["x"] == text


def test_the_starter_loads_and_its_anchored_sites_are_the_proposed_lines(tmp_path):
    found = scan(write_tree(tmp_path), {})
    proposals = propose(found)
    path = tmp_path / "demo.toml"
    path.write_text(starter_catalog(found, proposals, "demo", "src"))
    catalog = load_catalog(path, tree_root=tmp_path)
    sites, violations = parse_tree(tmp_path / "src", catalog.target.anchors)
    assert violations == []
    assert {
        s.name: (Path(s.path).name, s.lines.start, s.lines.stop - 1, s.kind, s.guards)
        for s in sites
    } == {p.name: (p.path, p.start, p.end, p.kind.value, p.guards) for p in proposals}
    assert {s.name: (s.producers or s.consumers, s.scope) for s in sites} == {
        p.name: (p.group, p.scope) for p in proposals
    }
