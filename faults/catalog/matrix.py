"""The catalog's [matrix] table: the dimensions a change is run across
(docs/catalog.md, "The matrix"), and the configs they make: every valid
combination when there are at most `most`, else a pairwise covering set
(every valid pair of two dimensions' values in some config)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from faults.catalog.errors import catalog_error

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Value:
    """One value of a dimension: what it adds to a run (`gpus`: its ranks; 0: the target's)."""

    name: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0


@dataclass(frozen=True)
class Dimension:
    name: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class Matrix:
    dimensions: tuple[Dimension, ...]
    most: int  # the full product when it has at most this many valid combinations
    excludes: tuple[dict[str, str], ...] = ()  # partial combinations that mean nothing

    def valid(self, point: tuple[Value, ...]) -> bool:
        named = {d.name: v.name for d, v in zip(self.dimensions, point, strict=True)}
        return not any(all(named[k] == v for k, v in ex.items()) for ex in self.excludes)

    def product(self) -> list[tuple[Value, ...]]:
        """Every valid combination, in the dimensions' order."""
        every = itertools.product(*(d.values for d in self.dimensions))
        return [point for point in every if self.valid(point)]

    def points(self) -> tuple[list[tuple[Value, ...]], str]:
        """The combinations that run, and how they were chosen in words."""
        full = self.product()
        if len(full) <= self.most:
            return full, f"all {len(full)} valid combinations of {len(self.dimensions)} dimensions"
        chosen = pairwise(full, len(self.dimensions))
        return chosen, (
            f"pairwise over {len(self.dimensions)} dimensions: {len(chosen)} of the "
            f"{len(full)} valid combinations, every valid pair of two dimensions' values in one"
        )


def config_fields(point: tuple[Value, ...]) -> dict:
    """A combination as a config's fields: named by its values, their args in
    the dimensions' order, their env together, the most ranks any asks for."""
    env: dict[str, str] = {}
    for value in point:
        env.update(value.env)
    return {
        "name": "-".join(value.name for value in point),
        "args": tuple(arg for value in point for arg in value.args),
        "env": env,
        "gpus": max(value.gpus for value in point),
    }


def pairs_of(point: tuple[Value, ...]) -> set[tuple[int, str, int, str]]:
    return {
        (i, point[i].name, j, point[j].name)
        for i, j in itertools.combinations(range(len(point)), 2)
    }


def pairwise(valid: list[tuple[Value, ...]], dimensions: int) -> list[tuple[Value, ...]]:
    """A covering set, greedily: the combination that covers the most pairs not
    yet covered, the first such in `valid`'s order, until every pair some
    valid combination holds is covered. Deterministic."""
    if dimensions < 2:
        return list(valid)
    uncovered = set().union(*(pairs_of(p) for p in valid))
    chosen: list[tuple[Value, ...]] = []
    while uncovered:
        best = max(valid, key=lambda p: len(pairs_of(p) & uncovered))
        chosen.append(best)
        uncovered -= pairs_of(best)
    return chosen


def matrix_table(path: Path, raw) -> Matrix | None:
    """[matrix] most, dimensions = [{name, values = [{name, args, env, gpus}]}],
    excludes = [{dimension = value, ...}]; None when the catalog has none."""
    if raw is None:
        return None
    where = "matrix"
    if not isinstance(raw, dict):
        raise catalog_error(path, where, f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {"most", "dimensions", "excludes"})
    if unknown:
        raise catalog_error(path, where, f"unknown keys {unknown}")
    most = raw.get("most", 0)
    if not isinstance(most, int) or isinstance(most, bool) or most < 0:
        raise catalog_error(path, where, f"most: an int >= 0, got {most!r}")
    dims = raw.get("dimensions")
    if not isinstance(dims, list) or not dims:
        raise catalog_error(path, where, f"dimensions: a non-empty list of tables, got {dims!r}")
    dimensions = tuple(dimension(path, i, d) for i, d in enumerate(dims))
    names = [d.name for d in dimensions]
    if len(set(names)) != len(names):
        raise catalog_error(path, where, f"dimensions: a name twice in {names}")
    values = {d.name: {v.name for v in d.values} for d in dimensions}
    excludes = raw.get("excludes", [])
    if not isinstance(excludes, list):
        raise catalog_error(path, where, f"excludes: a list of tables, got {excludes!r}")
    for i, exclude in enumerate(excludes):
        if not isinstance(exclude, dict) or not exclude:
            raise catalog_error(path, f"matrix.excludes[{i}]", f"a table, got {exclude!r}")
        for key, value in exclude.items():
            if value not in values.get(key, ()):
                known = sorted(values.get(key, ())) or names
                raise catalog_error(
                    path, f"matrix.excludes[{i}]", f"{key} = {value!r}: not one of {known}"
                )
    matrix = Matrix(dimensions, most, tuple(excludes))
    if not matrix.product():
        raise catalog_error(path, where, "excludes: no valid combination is left")
    return matrix


def dimension(path: Path, index: int, raw) -> Dimension:
    where = f"matrix.dimensions[{index}]"
    if not isinstance(raw, dict) or set(raw) != {"name", "values"}:
        raise catalog_error(path, where, f"a table with keys name and values, got {raw!r}")
    name = raw["name"]
    if not isinstance(name, str) or not NAME.match(name):
        raise catalog_error(path, where, f"name: letters, digits, '.', '-', '_'; got {name!r}")
    where = f"matrix.{name}"
    values = raw["values"]
    if not isinstance(values, list) or not values:
        raise catalog_error(path, where, f"values: a non-empty list of tables, got {values!r}")
    parsed = []
    for i, entry in enumerate(values):
        at = f"{where}.values[{i}]"
        if not isinstance(entry, dict) or "name" not in entry:
            raise catalog_error(path, at, f"a table with a name, got {entry!r}")
        unknown = sorted(set(entry) - {"name", "args", "env", "gpus"})
        if unknown:
            raise catalog_error(path, at, f"unknown keys {unknown}")
        if not isinstance(entry["name"], str) or not NAME.match(entry["name"]):
            said = f"name: letters, digits, '.', '-', '_'; got {entry['name']!r}"
            raise catalog_error(path, at, said)
        gpus = entry.get("gpus", 0)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            raise catalog_error(path, at, f"gpus: an int >= 0, got {gpus!r}")
        args, env = entry.get("args", []), entry.get("env", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise catalog_error(path, at, f"args: a list of strings, got {args!r}")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise catalog_error(path, at, f"env: a table of strings, got {env!r}")
        parsed.append(Value(entry["name"], tuple(args), dict(env), gpus))
    if len({v.name for v in parsed}) != len(parsed):
        raise catalog_error(path, where, "values: a name twice")
    return Dimension(name, tuple(parsed))
