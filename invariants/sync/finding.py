"""One thing wrong at one place of a tree, as the site check, the publish
contract, the review and its SARIF all say it: the file and line, the site it
is about (None: outside every site), the kernel variant whose PTX showed it
(None: the source), and what is wrong. `file` is as the checker named it, or
relative to the tree's root once the tree is gone (from_root)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    file: str | None  # None: it is about no file (a review's harness, say)
    line: int | None  # 1-based; None: the whole file
    message: str
    site: str | None = None
    variant: str | None = None

    @property
    def said(self) -> str:
        """What is wrong, led by the site and the variant: `site [variant]: message`."""
        if self.site is None:
            return self.message
        variant = f" [{self.variant}]" if self.variant else ""
        return f"{self.site}{variant}: {self.message}"

    def __str__(self) -> str:
        if self.file is None:
            return self.said
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.said}"

    def from_root(self, tree: Path) -> Finding:
        """Its file from `tree`'s root: a scratch tree is gone once its report is read."""
        return self if self.file is None else replace(self, file=tree_relative(self.file, tree))


def tree_relative(path: Path | str, tree: Path) -> str:
    """A checker's path as reports name it: relative to the tree's root (as
    it was when it lies outside)."""
    path = Path(path)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(Path(tree).resolve()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()
