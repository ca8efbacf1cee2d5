"""Write corpus/afdep/<name>.patch for every bug of corpus/afdep.toml.

    python3 scripts/make_corpus.py [REPO]

Each bug's edits (exact-once `old` -> `new`; `{A}` stands for the attributes
of the bug's site header, so an edit survives a contract change) or its move
(`release-above-store`: the bug's release site moved above its guarded store
site) are applied to a shared clone of HEAD, and `git diff` under the bug's
header is its patch (docs/review.md, "The bug corpus"). Run it again
when the kernels change: a bug whose edit no longer applies stops it, named.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

HEADER_KEYS = ("class", "site", "catch", "title")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode()


def site_attributes(text: str, site: str) -> str:
    match = re.search(r"// @site " + re.escape(site) + r"(.*)\n", text)
    if match is None:
        raise SystemExit(f"make_corpus: no site {site} in the file its edit names")
    return match.group(1)


def apply_edit(clone: Path, bug: dict, edit: dict) -> None:
    path = clone / edit["file"]
    text = path.read_text()
    attributes = site_attributes(text, bug["site"]) if "{A}" in edit["old"] else ""
    old, new = (edit[key].replace("{A}", attributes) for key in ("old", "new"))
    if text.count(old) != 1:
        raise SystemExit(f"make_corpus: {bug['name']}: its edit of {edit['file']} does not apply")
    path.write_text(text.replace(old, new))


def move_release_above_store(clone: Path, bug: dict) -> None:
    """The release site's region, whole, put right above its guarded store site."""
    for path in sorted((clone / "afdep/csrc").rglob("*.cuh")):
        text = path.read_text()
        release = re.search(
            rf"[ \t]*// @site {re.escape(bug['site'])} .*\n(?:.*\n)*?[ \t]*// @end "
            rf"{re.escape(bug['site'])}\n",
            text,
        )
        if release is None:
            continue
        guarded = re.search(r"guards=(\S+)", release.group(0)).group(1)
        store = re.search(rf"[ \t]*// @site {re.escape(guarded)} .*\n", text)
        text = text.replace(release.group(0), "")
        path.write_text(text.replace(store.group(0), release.group(0) + store.group(0)))
        return
    raise SystemExit(f"make_corpus: {bug['name']}: no site {bug['site']} to move")


def write_patch(clone: Path, bug: dict, out: Path) -> None:
    git(clone, "checkout", "-q", "--", ".")
    if bug.get("move") == "release-above-store":
        move_release_above_store(clone, bug)
    for edit in bug.get("edit", []):
        apply_edit(clone, bug, edit)
    # Full blob names: an abbreviated index line grows with the repository's
    # object count, so the same edit would write another patch in a bigger clone.
    diff = git(clone, "diff", "--full-index")
    if not diff:
        raise SystemExit(f"make_corpus: {bug['name']}: changes nothing")
    header = "".join(f"{key}: {bug[key]}\n" for key in HEADER_KEYS)
    (out / f"{bug['name']}.patch").write_text(f"{header}\n{diff}")


def main(repo: Path) -> None:
    bugs = tomllib.loads((repo / "corpus/afdep.toml").read_text())["bug"]
    out = repo / "corpus/afdep"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        clone = Path(folder) / "clone"
        subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(clone)], check=True)
        for bug in bugs:
            write_patch(clone, bug, out)
    print(f"{len(bugs)} bugs in {len({bug['class'] for bug in bugs})} classes: {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
