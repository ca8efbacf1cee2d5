"""[[target.mutation]]: the target's rewrites that make the mutation
operators' mutants (docs/operators.md, "Mutation operators"), each
entry checked: a known rewrite family, a site kind, a pattern that matches
some text, a replacement and an exposing condition whose group references
the pattern has, and a twin (the copy of a function the rewritten site
calls) well formed; and the twin's function found in a tree's sources, its
copy made (faults/catalog/refs.py checks it, faults/generate/mutate.py
injects it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import CatalogError, catalog_error
from faults.catalog.fields import regex
from faults.catalog.model import REWRITE_FAMILIES, Family, MutationRule
from invariants.sync.functions import Definition, definitions
from invariants.sync.sites import KINDS

RULE_KEYS = ("family", "kind", "pattern", "replacement")


OPTIONAL_RULE_KEYS = ("expose", "twin")


TWIN_KEYS = ("of", "name", "pattern", "replacement")


FUNCTION_NAME = re.compile(r"[A-Za-z_]\w*")


EXPOSING_KINDS = ("release", "wait")  # the kinds whose data has a store site to delay


GROUP_REFERENCE = re.compile(r"\\(\d+)|\\g<([^>]*)>")


# ---------------------------------------------------------------- the catalog's entries
def mutation_rules(path: Path, raw) -> tuple[MutationRule, ...]:
    """`[[target.mutation]]`, each entry checked: a known rewrite family, a
    site kind, a regular expression that matches some text, a replacement
    whose group references the pattern has."""
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise catalog_error(path, "target", f"mutation must be an array of tables, got {raw!r}")
    return tuple(_rule(path, index, entry) for index, entry in enumerate(raw))


def _rule(path: Path, index: int, entry: dict) -> MutationRule:
    where = f"target.mutation #{index}"
    unknown = sorted(set(entry) - set(RULE_KEYS) - set(OPTIONAL_RULE_KEYS))
    if unknown:
        raise catalog_error(path, where, f"unknown keys {unknown}")
    for key in RULE_KEYS:
        if not isinstance(entry.get(key), str):
            raise catalog_error(path, where, f"{key}: required string, got {entry.get(key)!r}")
    families = [family.value for family in REWRITE_FAMILIES]
    if entry["family"] not in families:
        raise catalog_error(
            path, where, f"family: {entry['family']!r} is not one of {', '.join(families)}"
        )
    where = f"{where} ({entry['family']})"
    if entry["kind"] not in KINDS:
        raise catalog_error(
            path, where, f"kind: {entry['kind']!r} is not a site kind ({', '.join(KINDS)})"
        )
    pattern = regex(path, where, "pattern", entry["pattern"])
    _check_groups(path, where, pattern, "replacement", entry["replacement"])
    expose = entry.get("expose")
    if expose is not None:
        if not isinstance(expose, str) or not expose.strip():
            raise catalog_error(path, where, f"expose: a condition string, got {expose!r}")
        if entry["kind"] not in EXPOSING_KINDS:
            raise catalog_error(
                path,
                where,
                f"expose: only a release or wait rule holds producers back, this one is kind="
                f"{entry['kind']}",
            )
        _check_groups(path, where, pattern, "expose", expose)
    twin = _twin(path, where, entry["twin"], entry["replacement"]) if "twin" in entry else None
    return MutationRule(
        Family(entry["family"]), entry["kind"], pattern, entry["replacement"], expose, twin
    )


def _twin(path: Path, where: str, raw, replacement: str) -> MutationRule.Twin:
    """`twin = { of, name, pattern, replacement }`: two function names, the
    copy's name called by the rule's replacement, and a rewrite of its body."""
    if not isinstance(raw, dict):
        keys = ", ".join(TWIN_KEYS)
        raise catalog_error(path, where, f"twin: a table {{ {keys} }}, got {raw!r}")
    unknown = sorted(set(raw) - set(TWIN_KEYS))
    if unknown:
        raise catalog_error(path, where, f"twin: unknown keys {unknown}")
    for key in TWIN_KEYS:
        if not isinstance(raw.get(key), str):
            raise catalog_error(path, where, f"twin.{key}: required string, got {raw.get(key)!r}")
    for key in ("of", "name"):
        if not FUNCTION_NAME.fullmatch(raw[key]):
            raise catalog_error(path, where, f"twin.{key}: {raw[key]!r} is not a function name")
    if raw["name"] == raw["of"]:
        raise catalog_error(
            path, where, f"twin.name: {raw['name']!r} is the name of the function it copies"
        )
    if not re.search(rf"\b{raw['name']}\b", replacement):
        raise catalog_error(
            path,
            where,
            f"twin.name: the replacement {replacement!r} does not call {raw['name']!r}: "
            "no site would call the twin",
        )
    pattern = regex(path, where, "twin.pattern", raw["pattern"])
    _check_groups(path, where, pattern, "twin.replacement", raw["replacement"])
    return MutationRule.Twin(raw["of"], raw["name"], pattern, raw["replacement"])


def _check_groups(path: Path, where: str, pattern: re.Pattern[str], key: str, text: str) -> None:
    for number, name in GROUP_REFERENCE.findall(text):
        known = int(number) <= pattern.groups if number else _group_exists(pattern, name)
        if not known:
            raise catalog_error(
                path,
                where,
                f"{key}: {text!r} refers to group {number or name} that the pattern does not have",
            )


def _group_exists(pattern: re.Pattern[str], name: str) -> bool:
    return int(name) <= pattern.groups if name.isdigit() else name in pattern.groupindex


# ---------------------------------------------------------------- a twin in the sources
class TwinError(CatalogError):
    """A twin its tree cannot make: the function missing or defined more than
    once, its pattern matching nothing in the body, or its name taken."""


@dataclass(frozen=True)
class TwinCopy:
    """The twin of one definition: `copy` is what goes right after it."""

    definition: Definition
    copy: str  # the copy's lines, renamed and rewritten, each ending in a newline


def twin_copy(sources: Path, twin: MutationRule.Twin) -> TwinCopy:
    """The definition of `twin.of` under `sources` (exactly one) and its
    copy: renamed `twin.name`, every match of `twin.pattern` in its body
    rewritten. Raises TwinError, one line naming the key and the function."""
    found = definitions(sources, twin.of)
    if len(found) != 1:
        places = f" ({', '.join(d.where(sources) for d in found)})" if found else ""
        state = "is not defined" if not found else f"is defined {len(found)} times"
        raise TwinError(f"twin.of: function {twin.of!r} {state} in {sources}{places}")
    taken = definitions(sources, twin.name)
    if taken:
        raise TwinError(
            f"twin.name: function {twin.name!r} is defined already in {sources} "
            f"({', '.join(d.where(sources) for d in taken)}): the twin would define it again"
        )
    [definition] = found
    text = definition.text
    body, count = twin.pattern.subn(twin.replacement, text[definition.body : definition.close + 1])
    if not count:
        raise TwinError(
            f"twin.pattern: {twin.pattern.pattern!r} matches nothing in the body of "
            f"{twin.of} ({definition.where(sources)})"
        )
    copy = (
        text[definition.start : definition.name]
        + twin.name
        + text[definition.name + len(twin.of) : definition.body]
        + body
        + text[definition.close + 1 : definition.end]
    )
    return TwinCopy(definition, copy if copy.endswith("\n") else copy + "\n")
