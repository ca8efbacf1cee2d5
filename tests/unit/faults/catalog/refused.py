"""What the catalog tests share: a fixture catalog's text edited once and
loaded on the repository's tree, and the one-line error it is refused with."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog

REPO = Path(__file__).parents[4]


def refusal(tmp_path: Path, text: str, old: str, new: str) -> str:
    """The error of `text` with `old` (found in it) made `new`, loaded on
    the repository's tree: one line, the catalog's path taken off."""
    assert old in text
    path = tmp_path / "catalog.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=REPO)
    message = str(raised.value)
    assert message.count("\n") == 0
    return message.removeprefix(f"{path}: ")
