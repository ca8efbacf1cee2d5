"""[target.identity]: the statement that makes a tree say its own digest,
written by the engine into every tree it runs (faults/pipeline/apply.py
`say_identity`), for a target whose run is the target's own test
(docs/targets.md, "Their tests as the harness"). Such a test prints no
digest of ours: without it, no log tells the scratch tree from another copy
the test found (an installed package, the user's checkout), and every run
would be WRONG TREE, or, were the digest not asked, judged on code it never ran."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import catalog_error

WHERE = "target.identity"
KEYS = {"file", "before", "say"}


@dataclass(frozen=True)
class Identity:
    """`say` (statements; `{digest}`: the tree's digest) written as a line of
    its own before the one line of `file` (under the target's sources) that
    holds `before`: code every run of the target executes."""

    file: str
    before: str
    say: str

    def written(self, text: str, digest: str) -> str:
        """`text` (of `file`) with the statement saying `digest` written in;
        ValueError naming `before` when not on exactly one line of it."""
        lines = text.splitlines(keepends=True)
        found = [i for i, line in enumerate(lines) if self.before in line]
        if len(found) != 1:
            raise ValueError(f"before {self.before!r} is on {len(found)} lines (needs exactly 1)")
        line = lines[found[0]]
        indent = line[: len(line) - len(line.lstrip())]
        statement = self.say.replace("{digest}", digest)
        lines.insert(found[0], f"{indent}{statement}  // AFDFAULT identity\n")
        return "".join(lines)


def check_identity(path: Path, identity: Identity | None, sources: Path) -> None:
    """The catalog's identity placed in the user's `sources`, before any work."""
    if identity is None:
        return
    file = Path(sources) / identity.file
    try:
        identity.written(file.read_text(), "0" * 64)
    except OSError as error:
        raise catalog_error(path, WHERE, f"file: cannot read {file}: {error.strerror}") from None
    except ValueError as error:
        raise catalog_error(path, WHERE, f"{error} of {file}") from None


def identity_table(path: Path, raw) -> Identity | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else raw
        raise catalog_error(path, WHERE, f"a table of file, before and say; got {keys!r}")
    for key in sorted(KEYS):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise catalog_error(path, WHERE, f"{key}: a non-empty string, got {raw[key]!r}")
    if "\n" in raw["before"]:
        raise catalog_error(path, WHERE, f"before: text of one line, got {raw['before']!r}")
    if raw["say"].count("{digest}") != 1:  # C braces are the code's own: only this one is ours
        raise catalog_error(path, WHERE, f"say: holds {{digest}} once, got {raw['say']!r}")
    return Identity(raw["file"], raw["before"], raw["say"])
