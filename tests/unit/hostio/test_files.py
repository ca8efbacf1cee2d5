"""hostio/files.py: a report written whole, and readable by others."""

from __future__ import annotations

import os
import stat

from hostio import write_json, write_text


def test_a_report_is_readable_by_others_as_the_umask_allows(tmp_path):
    path = tmp_path / "report.md"
    write_text(path, "x\n")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    write_json(tmp_path / "report.json", {"ok": True})
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
