"""[[target.mutation]]: the target's rewrites that make the mutation
operators' mutants (docs/architecture.md, "Mutation operators"), each
entry checked: a known rewrite family, a site kind, a pattern that matches
some text, a replacement and an exposing condition whose group references
the pattern has."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog.errors import catalog_error
from faults.catalog.model import REWRITE_FAMILIES, Family, MutationRule
from invariants.sync.sites import KINDS

RULE_KEYS = ("family", "kind", "pattern", "replacement")


OPTIONAL_RULE_KEYS = ("expose",)


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
    try:
        pattern = re.compile(entry["pattern"])
    except re.error as error:
        raise catalog_error(
            path, where, f"pattern: {entry['pattern']!r} is not a regular expression: {error}"
        ) from None
    if pattern.search(""):
        raise catalog_error(path, where, f"pattern: {entry['pattern']!r} matches empty text")
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
    return MutationRule(
        Family(entry["family"]), entry["kind"], pattern, entry["replacement"], expose
    )


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
