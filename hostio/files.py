"""Atomic writes: a report is whole or not there."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Written to a temporary file and renamed: no reader sees half a report,
    and a failed write leaves the old report and no temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:  # nothing half-written stays behind
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, document: dict) -> None:
    write_text(path, json.dumps(document, indent=1) + "\n")
