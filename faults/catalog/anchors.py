"""[[target.site]]: sites declared by anchors, outside the sources they name
(docs/catalog.md, "Sites by anchors"; docs/synchronization.md, "The site
grammar"). Each table is checked here, alone; where its anchors lie in the
target's tree is checked when a tree is at hand (faults/catalog/refs.py)."""

from __future__ import annotations

from pathlib import PurePosixPath

from faults.catalog.errors import CatalogError, catalog_error
from invariants.sync.sites import NAME, Anchor, header_problems

ANCHOR_KEYS = ("begin", "end", "at")
ATTR_KEYS = ("kind", "producers", "consumers", "scope", "guards")
SITE_KEYS = ("name", "file", *ANCHOR_KEYS, "after", *ATTR_KEYS)


def site_key(index: int, name: object = None) -> str:
    """How an error names the table: `target.site[2] (ar.oneshot.end_release)`."""
    return f"target.site[{index}]" + (f" ({name})" if isinstance(name, str) and name else "")


def site_tables(path, raw) -> tuple[Anchor, ...]:
    """Every [[target.site]] table checked, and no name declared twice."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(table, dict) for table in raw):
        raise catalog_error(path, "target.site", f"an array of tables [[target.site]], got {raw!r}")
    anchors: list[Anchor] = []
    for index, table in enumerate(raw):
        anchor = site_table(path, index, table)
        same = [i for i, other in enumerate(anchors) if other.name == anchor.name]
        if same:
            where = site_key(index, anchor.name)
            raise catalog_error(path, where, f"name: declared already by {site_key(same[0])}")
        anchors.append(anchor)
    return tuple(anchors)


def site_table(path, index: int, table: dict) -> Anchor:
    """One [[target.site]]: a name, a file under the sources, `begin` and
    `end` or `at` (optionally `after`, text before them), and the attributes
    a `// @site` line would give it."""
    name = table.get("name")

    def fail(message: str) -> CatalogError:
        return catalog_error(path, site_key(index, name), message)

    unknown = sorted(set(table) - set(SITE_KEYS))
    if unknown:
        raise fail(f"unknown keys {unknown}; known: {', '.join(SITE_KEYS)}")
    for key in SITE_KEYS:
        if key in table and (not isinstance(table[key], str) or not table[key]):
            raise fail(f"{key}: a non-empty string, got {table[key]!r}")
    for key in ("name", "file", "kind"):
        if key not in table:
            raise fail(f"{key}: required")
    if not NAME.match(name):
        raise fail(f"name: {name!r} is not dotted lower_case (e.g. ar.oneshot.end_release)")
    file = PurePosixPath(table["file"])
    if file.is_absolute() or ".." in file.parts:
        raise fail(f"file: {table['file']!r} is not a path inside [target].sources")
    given = [key for key in ANCHOR_KEYS if key in table]
    if "at" in given and len(given) > 1:
        raise fail("at: give either at, or begin and end, not both")
    if given in (["begin"], ["end"]):
        other = "end" if given == ["begin"] else "begin"
        raise fail(f"{given[0]}: given without {other}")
    if not given:
        raise fail("give begin and end (the texts opening and closing the site), or at")
    attrs = {key: table[key] for key in ATTR_KEYS if key in table}
    problems = header_problems(name, attrs)
    if problems:
        raise fail(problems[0].removeprefix(f"site {name}: "))
    return Anchor(
        name,
        file.as_posix(),
        tuple(attrs.items()),
        **{key: table.get(key) for key in (*ANCHOR_KEYS, "after")},
    )
