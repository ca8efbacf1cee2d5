"""The mutation operators (faults/operators/): each family's facts live in its
module, the stages read them from there, and every example of a rewrite
operator is what the afdep catalog's rules of its family make of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.amplify.shapes import AMPLIFIED_FAMILIES
from faults.catalog import CatalogError, load_catalog
from faults.corpus.classes import BugClass
from faults.generate.mutate import family_hint
from faults.operators import (
    BUG_FAMILIES,
    OPERATORS,
    ORDER_FAMILIES,
    REWRITE_FAMILIES,
    Family,
    Made,
)

REPO = Path(__file__).parents[4]
RULES = load_catalog(REPO / "catalogs/afdep.toml").target.mutations

EXAMPLES = [
    pytest.param(family, example, id=f"{family}-{i}")
    for family, op in OPERATORS.items()
    for i, example in enumerate(op.examples)
]


@pytest.mark.parametrize(("family", "example"), EXAMPLES)
def test_each_example_is_what_the_afdep_rules_of_its_family_make(family, example):
    made = {
        rule.pattern.sub(rule.replacement, example.before, count=1)
        for rule in RULES
        if rule.family is family and rule.kind == example.kind
        and rule.pattern.search(example.before)
    }  # fmt: skip
    assert example.after in made, made


def test_every_rewrite_operator_has_examples_and_a_rule_in_the_afdep_catalog():
    for family in REWRITE_FAMILIES:
        assert OPERATORS[family].examples, family
        assert any(rule.family is family for rule in RULES), family
    # Only rewrite operators have examples: the others are made by the engine's own code.
    assert {f for f, op in OPERATORS.items() if op.examples} == set(REWRITE_FAMILIES)


def test_the_families_each_stage_draws_on_are_read_from_the_operators():
    assert ORDER_FAMILIES == {f for f, op in OPERATORS.items() if op.weakens_order} >= {
        Family.REMOVE_BARRIER, Family.REMOVE_WARP_SYNC, Family.WEAKEN_RELEASE,
        Family.WEAKEN_ACQUIRE, Family.REMOVE_FENCE, Family.NARROW_SCOPE, Family.PUBLISH_EARLY,
    }  # fmt: skip
    assert REWRITE_FAMILIES == tuple(f for f in Family if OPERATORS[f].made is Made.REWRITE)
    assert {Family.EPOCH_OFF_BY_ONE, Family.WRONG_SLOT} <= set(REWRITE_FAMILIES) - ORDER_FAMILIES
    assert [c.value for c in BugClass][: len(BUG_FAMILIES)] == [f.value for f in BUG_FAMILIES]
    assert family_hint(Family.NARROW_SCOPE) == OPERATORS[Family.NARROW_SCOPE].hint
    assert family_hint(Family.SKIP_WAIT) is None and family_hint(None) is None
    assert AMPLIFIED_FAMILIES == tuple(f for f, op in OPERATORS.items() if op.litmus)
    assert [f.value for f in Family][:2] == ["skip-wait", "delay"]  # the operators' ranks


def test_a_catalog_rule_of_a_family_no_rewrite_operator_makes_is_refused(tmp_path):
    text = (REPO / "catalogs/afdep.toml").read_text()
    text = text.replace('family = "remove-fence"', 'family = "skip-wait"', 1)
    (tmp_path / "catalog.toml").write_text(text)
    with pytest.raises(CatalogError, match="skip-wait"):
        load_catalog(tmp_path / "catalog.toml", tree_root=REPO)


def test_an_operator_module_is_the_family():
    for family, op in OPERATORS.items():
        module = op.word.replace("-", "_")
        assert (REPO / "faults/operators" / f"{module}.py").is_file(), family
        assert str(family) == op.word
