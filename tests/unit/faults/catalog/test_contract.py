"""The afdep catalog's [target.log] patterns and afdep.vocab's log-line
contract say the same thing: every sample line is read alike by both, and the
digest line vocab writes gives back its digest through the catalog."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from afdep import vocab
from faults.catalog import LOG_KEYS, LogPatterns, load_catalog

REPO = Path(__file__).parents[4]
DIGEST = "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def log() -> LogPatterns:
    return load_catalog(REPO / "catalogs/afdep.toml").target.log


def read_by_vocab(line: str) -> set[str]:
    """What afdep.vocab says a line is, by its own definitions."""
    found = {
        "mismatch": vocab.MISMATCH in line,
        "timeout": vocab.TIMEOUT in line,
        "assertion": vocab.ASSERTION in line,
        "device_error": vocab.DEVICE_ERROR.search(line) is not None,
        "digest": vocab.DIGEST.search(line) is not None,
    }
    return {key for key, hit in found.items() if hit}


def read_by_catalog(log: LogPatterns, line: str) -> set[str]:
    return {key for key in LOG_KEYS if getattr(log, key).search(line)}


SAMPLES = [
    (
        "[default1]:afdep timeout: site=cf.ffn_place.count_wait rank=1 expected=3 seen=2",
        {"timeout"},
    ),
    ("afdep timeout: site=cf.ffn_place.count_wait rank=1 expected=3 seen=2", {"timeout"}),
    ("[default0]:afdep assertion failed: route wide token=3 slot=1 rank=0", {"assertion"}),
    ("afdep assertion failed: route wide token=3 slot=1 rank=0", {"assertion"}),
    ("[default0]:Mismatched x rank=0 token=3 col=0: got 1.0 expected 2.0", {"mismatch"}),
    (
        "[default1]:torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        {"device_error"},
    ),
    ("RuntimeError: CUDA error: unspecified launch failure", {"device_error"}),
    (
        "cuda.core.experimental._utils.cuda_utils.CUDAError: CUDA_ERROR_ILLEGAL_ADDRESS: "
        "an illegal memory access was encountered",
        {"device_error"},
    ),
    (f"[default0]:{vocab.digest_line(DIGEST)}", {"digest"}),
    (vocab.result_line({"ok": True, "ranks": 2}), set()),
    ("[default1]:AFDFAULT N2 rank=1", set()),
    ("[default0]:step 3 tokens=512 ok", set()),
    (f"[default1]:{vocab.skew_line(3, 1, 41234)}", set()),
]


@pytest.mark.parametrize("line, expected", SAMPLES, ids=[s[0][:40] for s in SAMPLES])
def test_each_line_is_read_alike_by_the_catalog_and_vocab(log, line, expected):
    assert read_by_vocab(line) == expected
    assert read_by_catalog(log, line) == expected


def test_the_digest_line_gives_back_its_digest(log):
    found = [m[1] for m in log.digest.finditer(vocab.digest_line(DIGEST))]
    assert found == [DIGEST]


def test_the_patterns_are_vocabs_words(log):
    assert log.device_error.pattern == vocab.DEVICE_ERROR.pattern
    assert log.digest.pattern == vocab.DIGEST.pattern
    for key, word in (
        ("mismatch", vocab.MISMATCH),
        ("timeout", vocab.TIMEOUT),
        ("assertion", vocab.ASSERTION),
    ):
        assert re.fullmatch(getattr(log, key).pattern, word), (key, word)
