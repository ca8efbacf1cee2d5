"""[[target.mutation]]: the target's rewrites that make the mutation
operators' mutants (docs/operators.md, "Mutation operators"), each
entry checked: a known rewrite family, a site kind, a pattern that matches
some text, a replacement and an exposing condition whose group references
the pattern has, and its twins (the copies of functions the rewritten site
calls, their names maybe the pattern's groups) well formed; and each twin,
as a match expands it, found in a tree's sources, its copy made, or the very
copy found there already (faults/catalog/refs.py checks it,
faults/generate/mutate.py injects it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import CatalogError, catalog_error
from faults.catalog.fields import regex
from faults.catalog.model import MutationRule
from faults.operators import REWRITE_FAMILIES, Family
from invariants.sync.functions import Definition, definitions
from invariants.sync.sites import CLOSE, KINDS, OPEN, Site

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
    twins = ()
    if "twin" in entry:
        twins = _twins(path, where, entry["twin"], pattern, entry["replacement"])
    return MutationRule(
        Family(entry["family"]), entry["kind"], pattern, entry["replacement"], expose, twins
    )


def _twins(
    path: Path, where: str, raw, pattern: re.Pattern[str], replacement: str
) -> tuple[MutationRule.Twin, ...]:
    """`twin = { of, name, pattern, replacement }`, or an array of such tables
    (a copy may call another: each key is then `twin #<i>.<key>`). Every
    copy's name is called by the rule's replacement or by another copy's
    replacement; `of` and `name` may name the rule pattern's groups."""
    keys = ", ".join(TWIN_KEYS)
    if isinstance(raw, list) and raw and all(isinstance(item, dict) for item in raw):
        tables = [(f"twin #{index}", item) for index, item in enumerate(raw)]
    elif isinstance(raw, dict):
        tables = [("twin", raw)]
    else:
        raise catalog_error(
            path, where, f"twin: a table {{ {keys} }} or an array of them, got {raw!r}"
        )
    twins = tuple(_twin(path, where, key, item, pattern) for key, item in tables)
    for index, ((key, _), twin) in enumerate(zip(tables, twins, strict=True)):
        others = [other.replacement for at, other in enumerate(twins) if at != index]
        if not any(_calls(text, twin.name) for text in (replacement, *others)):
            said = (
                f"neither the replacement {replacement!r} nor another twin's calls {twin.name!r}"
                if others
                else f"the replacement {replacement!r} does not call {twin.name!r}"
            )
            raise catalog_error(path, where, f"{key}.name: {said}: no site would call the twin")
    return twins


def _twin(path: Path, where: str, key: str, raw: dict, rule: re.Pattern[str]) -> MutationRule.Twin:
    """One twin table: two function names (or templates of one over the
    rule pattern's groups, `rule`) and a rewrite of the copy's body."""
    unknown = sorted(set(raw) - set(TWIN_KEYS))
    if unknown:
        raise catalog_error(path, where, f"{key}: unknown keys {unknown}")
    for field in TWIN_KEYS:
        if not isinstance(raw.get(field), str):
            raise catalog_error(
                path, where, f"{key}.{field}: required string, got {raw.get(field)!r}"
            )
    for field in ("of", "name"):
        _check_groups(path, where, rule, f"{key}.{field}", raw[field], "the rule's pattern")
        if not FUNCTION_NAME.fullmatch(GROUP_REFERENCE.sub("x", raw[field])):
            raise catalog_error(
                path, where, f"{key}.{field}: {raw[field]!r} is not a function name"
            )
    if raw["name"] == raw["of"]:
        raise catalog_error(
            path, where, f"{key}.name: {raw['name']!r} is the name of the function it copies"
        )
    pattern = regex(path, where, f"{key}.pattern", raw["pattern"])
    _check_groups(path, where, pattern, f"{key}.replacement", raw["replacement"])
    return MutationRule.Twin(raw["of"], raw["name"], pattern, raw["replacement"])


def _calls(text: str, name: str) -> bool:
    """`text` (a replacement template) names `name` (a function name, or a
    template of one) as a word."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def _check_groups(
    path: Path,
    where: str,
    pattern: re.Pattern[str],
    key: str,
    text: str,
    whose: str = "the pattern",
) -> None:
    for number, name in GROUP_REFERENCE.findall(text):
        known = int(number) <= pattern.groups if number else _group_exists(pattern, name)
        if not known:
            raise catalog_error(
                path,
                where,
                f"{key}: {text!r} refers to group {number or name} that {whose} does not have",
            )


def _group_exists(pattern: re.Pattern[str], name: str) -> bool:
    return int(name) <= pattern.groups if name.isdigit() else name in pattern.groupindex


# ---------------------------------------------------------------- a rule's matches
def region_matches(rule: MutationRule, site: Site) -> Iterator[tuple[str, str, re.Match[str]]]:
    """(region text, its `@end` line, match) for every match of `rule.pattern`
    in the region of `site` (between its `@site` and `@end` lines), when the
    site is of the rule's kind."""
    if site.kind != rule.kind:
        return
    lines = site.path.read_text().splitlines(keepends=True)
    body, end = "".join(lines[site.start : site.end - 1]), lines[site.end - 1]
    for match in rule.pattern.finditer(body):
        yield body, end, match


def rule_twins(rule: MutationRule, sites: list[Site]) -> list[MutationRule.Twin]:
    """The twins `rule` makes over `sites`: each twin expanded per match, once."""
    if not rule.twins:  # no site file need be read
        return []
    found: dict[MutationRule.Twin, None] = {}
    for site in sites:
        for _, _, match in region_matches(rule, site):
            found.update(dict.fromkeys(twin.expanded(match) for twin in rule.twins))
    return list(found)


# ---------------------------------------------------------------- a twin in the sources
class TwinError(CatalogError):
    """A twin its tree cannot make: the function missing or defined more than
    once, its pattern matching nothing in the body, or its name taken by
    another function."""


@dataclass(frozen=True)
class TwinCopy:
    """The twin of one definition: `copy` is what goes right after it, unless
    the sources define it already, exactly so (`existing`: nothing to add)."""

    definition: Definition
    copy: str  # the copy's lines, renamed and rewritten, each ending in a newline
    existing: Definition | None = None


def twin_copy(sources: Path, twin: MutationRule.Twin) -> TwinCopy:
    """The definition of `twin.of` under `sources` (exactly one) and its
    copy: renamed `twin.name`, every match of `twin.pattern` in its body
    rewritten. A function `twin.name` the sources define already is the twin
    only if it is that copy to the letter. Raises TwinError, one line naming
    the key and the function."""
    for key, name in (("of", twin.of), ("name", twin.name)):
        if not FUNCTION_NAME.fullmatch(name):  # a template's expansion
            raise TwinError(f"twin.{key}: {name!r} is not a function name")
    if twin.name == twin.of:
        raise TwinError(f"twin.name: {twin.name!r} is the name of the function it copies")
    found = definitions(sources, twin.of)
    if len(found) != 1:
        places = f" ({_places(found, sources)})" if found else ""
        state = "is not defined" if not found else f"is defined {len(found)} times"
        raise TwinError(f"twin.of: function {twin.of!r} {state} in {sources}{places}")
    [definition] = found
    text = definition.text
    body, count = twin.pattern.subn(twin.replacement, text[definition.body : definition.close + 1])
    if not count:
        raise TwinError(
            f"twin.pattern: {twin.pattern.pattern!r} matches nothing in the body of "
            f"{twin.of} ({definition.where(sources)})"
        )
    copy = _without_sites(
        _line_ended(
            text[definition.start : definition.name]
            + twin.name
            + text[definition.name + len(twin.of) : definition.body]
            + body
            + text[definition.close + 1 : definition.end]
        )
    )
    taken = definitions(sources, twin.name)
    if len(taken) == 1 and _line_ended(taken[0].source) == copy:
        return TwinCopy(definition, copy, existing=taken[0])
    if taken:
        raise TwinError(
            f"twin.name: function {twin.name!r} is defined already in {sources} "
            f"({_places(taken, sources)}), not as the twin's copy: the twin would define it again"
        )
    return TwinCopy(definition, copy)


def _places(found: list[Definition], sources: Path) -> str:
    return ", ".join(d.where(sources) for d in found)


def _line_ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _without_sites(copy: str) -> str:
    """The copy less the site markers its original's body holds (an anchored
    site in the function, as an annotated tree writes it in): a site is
    declared once in a tree, and the original keeps it."""
    lines = copy.splitlines(keepends=True)
    return "".join(line for line in lines if not (OPEN.match(line) or CLOSE.match(line)))
