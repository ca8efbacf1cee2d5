"""The catalog's [shrink] table: afdep's as loaded, and every malformed
table refused with one line naming the catalog, the entry and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.shrink.table import Dimension, Relation, RelationOp

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"


def test_afdeps_table_names_the_drivers_options_in_order():
    shrink = load_catalog(REPO / "catalogs/afdep.toml").shrink
    assert shrink.dimensions == (
        Dimension("tokens", "--tokens", min=1),
        Dimension("steps", "--steps", min=1),
        Dimension("top-k", "--top-k", min=1),
        Dimension("experts", "--num-experts", min=1),
        Dimension("hidden", "--hidden-size", values=(2048, 512, 128)),
        Dimension("capacity", "--capacity", min=1),
        Dimension("masking", "--empty-prob", values=(0.1, 0.0)),
    )
    assert [(r.left, r.op, r.right) for r in shrink.relations] == [
        ("top-k", RelationOp.AT_MOST, "experts"),
        ("top-k", RelationOp.AT_MOST, "32"),
        ("tokens", RelationOp.AT_MOST, "capacity"),
        ("experts", RelationOp.MULTIPLE_OF, "--ffn-ranks"),
    ]


def test_a_catalog_without_the_table_has_none():
    assert load_catalog(FIXTURE).shrink is None


def with_table(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text(table + "\n\n" + FIXTURE.read_text())  # before [target]: top level
    return path


def test_a_well_formed_table_loads(tmp_path):
    path = with_table(
        tmp_path,
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", start = 9, min = 2 }]\n'
        'constraints = ["n % 3 == 0"]\n',
    )
    shrink = load_catalog(path).shrink
    assert shrink.dimensions == (Dimension("n", "--n", start=9, min=2),)
    assert shrink.relations == (Relation("n", RelationOp.MULTIPLE_OF, "3", "n % 3 == 0"),)


BAD = [
    ("shrink = 3", "shrink: a table, got 3"),
    ("[shrink]\nsteps = 1", "shrink: unknown keys ['steps']"),
    ("[shrink]\ndimensions = []", "shrink: dimensions: a non-empty list of tables, got []"),
    ("[shrink]\ndimensions = [3]", "shrink.dimensions[0]: a table, got 3"),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", step = 2 }]',
        "shrink.dimensions[0]: unknown keys ['step']",
    ),
    (
        '[shrink]\ndimensions = [{ name = "N", arg = "--n" }]',
        "shrink.dimensions[0]: name: lower-case letters, digits or '-', got 'N'",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "n" }]',
        "shrink.dimensions n: arg: an option of the run command such as '--tokens', got 'n'",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", values = [4, 2], min = 1 }]',
        "shrink.dimensions n: values, or start and min: not both",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", values = [2, 4] }]',
        "shrink.dimensions n: values: largest first, each smaller than the one before: [2, 4]",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", values = ["a"] }]',
        "shrink.dimensions n: values: a non-empty list of numbers, got ['a']",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", min = -1 }]',
        "shrink.dimensions n: min: an integer >= 0, got -1",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n", start = 1, min = 2 }]',
        "shrink.dimensions n: start: an integer >= min (2), got 1",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n" }, { name = "n", arg = "--m" }]',
        "shrink.dimensions n: name: duplicate dimension",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n" }]\nconstraints = ["n < 3"]',
        "shrink.constraints: 'n < 3': expected 'A <= B' or 'A % B == 0'",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n" }]\nconstraints = ["n <= m"]',
        "shrink.constraints: 'n <= m': 'm' is no dimension, integer or --option",
    ),
    (
        '[shrink]\ndimensions = [{ name = "n", arg = "--n" }]\nconstraints = "n <= 3"',
        "shrink: constraints: a list of relations, got 'n <= 3'",
    ),
]


@pytest.mark.parametrize(("table", "message"), BAD)
def test_a_malformed_table_is_one_line_naming_it(tmp_path, table, message):
    path = with_table(tmp_path, table)
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    assert str(error.value) == f"{path}: {message}"
