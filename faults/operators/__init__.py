"""The mutation operators, one module each (docs/operators.md, "Mutation
operators"), as cosmic-ray keeps them: everything the engine knows of a
family lives in its module's `OPERATOR` (what a fault of it does, how it is
made, whether it weakens an order, whether a real bug can be of it, why a
must-fail fault of it can run clean, the litmus that shows it, and examples
of its rewrite before and after). A catalog names which operators apply to
its target and in what spelling (`[[target.mutation]]`).

Adding an operator is adding its module here: `Family`, the families each
stage draws on (ORDER_FAMILIES, REWRITE_FAMILIES, BUG_FAMILIES, the hints,
amplify's shapes) and the operator tests are read from the modules."""

from __future__ import annotations

import importlib
import pkgutil
from enum import Enum

from faults.operators.operator import Example, Litmus, Made, Operator

__all__ = [
    "BUG_FAMILIES",
    "Example",
    "Family",
    "Litmus",
    "Made",
    "OPERATORS",
    "ORDER_FAMILIES",
    "Operator",
    "REWRITE_FAMILIES",
    "Word",
    "operator",
]


def _discovered() -> list[Operator]:
    """Every module of this package that defines OPERATOR, in `rank` order."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name == "operator":
            continue
        found.append(importlib.import_module(f"{__name__}.{module.name}").OPERATOR)
    ranks = [op.rank for op in found]
    if len(set(ranks)) != len(ranks):
        raise RuntimeError(f"faults.operators: two operators share a rank: {sorted(ranks)}")
    return sorted(found, key=lambda op: op.rank)


class Word(str, Enum):
    """An enum of words (families, corpus classes): ids and reports print the word."""

    def __str__(self) -> str:
        return self.value


_OPERATORS = _discovered()

# What a generated fault does to its site: one member per operator module.
Family = Word(
    "Family",
    [(op.word.upper().replace("-", "_"), op.word) for op in _OPERATORS],
    module=__name__,
    qualname="Family",
)
Family.__doc__ = """What a generated fault does to its site: one member per module of
faults/operators/ (docs/operators.md, "Mutation operators")."""

OPERATORS: dict[Family, Operator] = {Family(op.word): op for op in _OPERATORS}


def operator(family: Family) -> Operator:
    return OPERATORS[Family(family)]


# Mutants that weaken the order a release or wait promises: the hardware may
# never show them, and the publish contract is their catch.
ORDER_FAMILIES = frozenset(f for f, op in OPERATORS.items() if op.weakens_order)
# The families a catalog's `[[target.mutation]]` rewrites make.
REWRITE_FAMILIES = tuple(f for f, op in OPERATORS.items() if op.made is Made.REWRITE)
# The families a real bug can be (faults/corpus/classes.py).
BUG_FAMILIES = tuple(f for f, op in OPERATORS.items() if op.bug_class)
