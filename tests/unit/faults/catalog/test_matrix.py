"""The [matrix] table (faults/catalog/matrix.py): the configs a change is run
across, every valid combination or a pairwise covering set."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.catalog.matrix import matrix_table, pairs_of

REPO = Path(__file__).parents[4]


def dims(**values: int) -> list[dict]:
    return [
        {"name": name, "values": [{"name": f"{name}{i}"} for i in range(count)]}
        for name, count in values.items()
    ]


def test_every_valid_combination_runs_when_there_are_at_most_most():
    matrix = matrix_table(Path("c.toml"), {"most": 8, "dimensions": dims(a=2, b=2, c=2)})
    points, how = matrix.points()
    assert [tuple(v.name for v in p) for p in points] == list(
        itertools.product(["a0", "a1"], ["b0", "b1"], ["c0", "c1"])
    )
    assert how == "all 8 valid combinations of 3 dimensions"


def test_pairwise_covers_every_valid_pair_with_fewer_combinations():
    raw = {
        "most": 4,
        "dimensions": dims(a=2, b=2, c=3, d=4),
        "excludes": [{"a": "a1", "c": "c2"}, {"b": "b0", "d": "d3"}],
    }
    matrix = matrix_table(Path("c.toml"), raw)
    valid = matrix.product()
    points, how = matrix.points()
    covered = set().union(*(pairs_of(p) for p in points))
    assert covered == set().union(*(pairs_of(p) for p in valid))
    assert all(matrix.valid(p) for p in points)
    assert not any(p[0].name == "a1" and p[2].name == "c2" for p in points)
    assert 12 <= len(points) < len(valid) == 2 * 2 * 3 * 4 - 2 * 4 - 2 * 3 + 1
    assert how.startswith(f"pairwise over 4 dimensions: {len(points)} of the {len(valid)}")
    assert matrix.points() == (points, how)  # the same set every time


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"dimensions": []}, "matrix: dimensions: a non-empty list"),
        ({"dimensions": dims(a=1) * 2}, "matrix: dimensions: a name twice"),
        ({"dimensions": dims(a=2), "excludes": [{"a": "a9"}]}, "matrix.excludes[0]: a = 'a9'"),
        ({"dimensions": dims(a=1), "excludes": [{"a": "a0"}]}, "no valid combination is left"),
        ({"dimensions": [{"name": "a", "values": [{"name": "x", "gpu": 2}]}]}, "unknown keys"),
        ({"dimensions": dims(a=1), "many": 3}, "matrix: unknown keys ['many']"),
    ],
)
def test_a_bad_matrix_is_one_line_naming_the_field(raw, said):
    with pytest.raises(CatalogError, match=None) as error:
        matrix_table(Path("c.toml"), raw)
    assert said in str(error.value) and "\n" not in str(error.value)


def test_afdeps_matrix_runs_each_protocol_and_arm_at_every_rank_split():
    """The two bugs no 1A:1F run shows: payload-first's done wait bounded by
    the wrong count (3A:1F, 1A:3F) and the attention arm waiting for one FFN
    rank (2A:2F, 1A:3F)."""
    catalog, how = load_catalog(REPO / "catalogs/afdep.toml").on_matrix()
    names = [c.name for c in catalog.configs]
    assert len(set(names)) == len(names) and how.startswith("pairwise over 6 dimensions")
    splits = ("1A1F", "3A1F", "2A2F", "1A3F")
    for value in ("cf", "pf", "arm-attn", "arm-ffn", "ungated", "fp8", "bf16", "graph", "eager"):
        at = {split for name in names for split in splits if f"-{value}-" in f"-{name}-"
              and name.endswith(split)}  # fmt: skip
        assert at == set(splits), value
    for config in catalog.configs:
        assert config.gpus == (2 if config.name.endswith("1A1F") else 4)
        if "-pf-" in config.name:
            assert config.env == {"AFDEP_PAYLOAD_FIRST": "1"}
