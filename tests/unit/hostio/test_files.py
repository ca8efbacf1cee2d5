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


def test_no_output_inside_the_sources_nor_over_a_tracked_file_but_the_results(tmp_path):
    """output_problem, the one rule of every path a command writes."""
    import subprocess
    from pathlib import Path

    from hostio import RESULTS_DIR, output_problem

    checkout = tmp_path / "checkout"
    sources = checkout / "src"
    results = checkout / RESULTS_DIR
    sources.mkdir(parents=True)
    results.mkdir(parents=True)
    for path in (checkout / "README.md", sources / "k.cu", results / "sweep-cpu.json"):
        path.write_text("tracked\n")
    (checkout / "notes.md").write_text("untracked\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "README.md", "src", str(RESULTS_DIR)], check=True)

    def problem(path: Path) -> str | None:
        return output_problem(path, [sources])

    assert "inside the target's sources" in problem(sources)
    assert "inside the target's sources" in problem(sources / "new" / "r.sarif")
    assert "a file the checkout tracks (README.md)" in problem(checkout / "README.md")
    assert problem(results / "sweep-cpu.json") is None  # the record, measured again
    for free in (checkout / "notes.md", checkout / "new.md", checkout, results, tmp_path / "x"):
        assert problem(free) is None, free
