"""The catalog's [shrink] table: the dimensions of a run's input that
`afdep-faults shrink` may make smaller, how each is spelled on the run
command, its ladder of smaller values, and the relations every probed input
keeps (docs/operators.md, "Shrinking"). The catalog reads it, so this module
sits below it and says what is wrong through the catalog's `fail(where,
message)`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

NAME = re.compile(r"^[a-z][a-z0-9-]*$")
OPTION = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9-]*$")
DIMENSION_KEYS = {"name", "arg", "values", "start", "min"}
# `A <= B` and `A % B == 0` (A a multiple of B), A and B each a dimension's
# name, an integer, or an option of the run command (its value there).
AT_MOST = re.compile(r"^\s*(\S+)\s*<=\s*(\S+)\s*$")
MULTIPLE = re.compile(r"^\s*(\S+)\s*%\s*(\S+)\s*==\s*0\s*$")

Number = int | float
# (where in the table, what is wrong) -> the error the loader raises
Fail = Callable[[str, str], Exception]


@dataclass(frozen=True)
class Dimension:
    """One shrinkable input: `values` (largest first, the first the start), or
    halving from `start` (None: the value the run command gives) down to `min`."""

    name: str
    arg: str
    values: tuple[Number, ...] = ()
    start: int | None = None
    min: int = 1

    def smaller(self, value: Number) -> Number | None:
        """The next rung down the ladder from `value`; None at the bottom."""
        if self.values:
            below = [v for v in self.values if v < value]
            return below[0] if below else None
        if value <= self.min:
            return None
        return max(int(value) // 2, self.min)


class RelationOp(str, Enum):
    AT_MOST = "<="
    MULTIPLE_OF = "%"

    def holds(self, left: Number, right: Number) -> bool:
        if self is RelationOp.AT_MOST:
            return left <= right
        return right != 0 and left % right == 0


@dataclass(frozen=True)
class Relation:
    left: str
    op: RelationOp
    right: str
    text: str  # as the catalog writes it

    def holds(self, value_of: Callable[[str], Number | None]) -> bool:
        """`value_of` gives an operand's value; None (an option the command
        does not give) leaves the relation unchecked."""
        left, right = value_of(self.left), value_of(self.right)
        return left is None or right is None or self.op.holds(left, right)


@dataclass(frozen=True)
class ShrinkSpec:
    dimensions: tuple[Dimension, ...]
    relations: tuple[Relation, ...] = ()

    def dimension(self, name: str) -> Dimension | None:
        return next((d for d in self.dimensions if d.name == name), None)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _dimension(index: int, raw, fail: Fail) -> Dimension:
    where = f"shrink.dimensions[{index}]"
    if not isinstance(raw, dict):
        raise fail(where, f"a table, got {raw!r}")
    unknown = sorted(set(raw) - DIMENSION_KEYS)
    if unknown:
        raise fail(where, f"unknown keys {unknown}")
    name, arg = raw.get("name"), raw.get("arg")
    if not isinstance(name, str) or not NAME.match(name):
        raise fail(where, f"name: lower-case letters, digits or '-', got {name!r}")
    where = f"shrink.dimensions {name}"
    if not isinstance(arg, str) or not OPTION.match(arg):
        raise fail(where, f"arg: an option of the run command such as '--tokens', got {arg!r}")
    values = raw.get("values")
    if values is not None:
        if {"start", "min"} & set(raw):
            raise fail(where, "values, or start and min: not both")
        if not isinstance(values, list) or not values or not all(map(_number, values)):
            raise fail(where, f"values: a non-empty list of numbers, got {values!r}")
        if not all(a > b for a, b in zip(values, values[1:], strict=False)):
            raise fail(where, f"values: largest first, each smaller than the one before: {values}")
        return Dimension(name, arg, values=tuple(values))
    low, start = raw.get("min", 1), raw.get("start")
    if not isinstance(low, int) or isinstance(low, bool) or low < 0:
        raise fail(where, f"min: an integer >= 0, got {low!r}")
    if start is not None and (not isinstance(start, int) or isinstance(start, bool) or start < low):
        raise fail(where, f"start: an integer >= min ({low}), got {start!r}")
    return Dimension(name, arg, start=start, min=low)


def _relation(text, names: set[str], fail: Fail) -> Relation:
    if not isinstance(text, str):
        raise fail("shrink.constraints", f"a relation as a string, got {text!r}")
    for pattern, op in ((AT_MOST, RelationOp.AT_MOST), (MULTIPLE, RelationOp.MULTIPLE_OF)):
        if found := pattern.match(text):
            for operand in found.groups():
                if not (operand in names or operand.isdigit() or OPTION.match(operand)):
                    raise fail(
                        "shrink.constraints",
                        f"{text!r}: {operand!r} is no dimension, integer or --option",
                    )
            return Relation(found[1], op, found[2], text)
    raise fail("shrink.constraints", f"{text!r}: expected 'A <= B' or 'A % B == 0'")


def shrink_table(raw, fail: Fail) -> ShrinkSpec | None:
    """[shrink] dimensions = [{...}, ...], constraints = ["A <= B", ...];
    None when the catalog has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise fail("shrink", f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {"dimensions", "constraints"})
    if unknown:
        raise fail("shrink", f"unknown keys {unknown}")
    tables = raw.get("dimensions")
    if not isinstance(tables, list) or not tables:
        raise fail("shrink", f"dimensions: a non-empty list of tables, got {tables!r}")
    dimensions = tuple(_dimension(i, table, fail) for i, table in enumerate(tables))
    names = [d.name for d in dimensions]
    for name in names:
        if names.count(name) > 1:
            raise fail(f"shrink.dimensions {name}", "name: duplicate dimension")
    constraints = raw.get("constraints", [])
    if not isinstance(constraints, list):
        raise fail("shrink", f"constraints: a list of relations, got {constraints!r}")
    relations = tuple(_relation(text, set(names), fail) for text in constraints)
    return ShrinkSpec(dimensions, relations)
