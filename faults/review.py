"""The pre-merge ordering review: what a change does to the synchronization.

    afdep-faults review BASE [HEAD] [--run]

From the git diff BASE..HEAD (HEAD omitted: the working tree) under the
catalog's sources: the sites the change touches; ordering primitives it adds
outside any site; and, for each touched site, the faults that cover it - a
must-pass fault that delays it and a must-fail fault that exercises it (skips
it, or delays it while skipping a wait that guards it), from the catalog or
generated from the sites. With --run (and the hardware the target needs) the
covering faults run on HEAD's tree in scratch trees. Writes a Markdown report;
exits non-zero when anything is uncovered, unsited or judged wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from faults.catalog import Catalog, load_catalog
from faults.generate import with_generated
from faults.scratch import make_scratch
from faults.sites import Site, parse_tree
from hostio import UsageError

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


@dataclass
class Coverage:
    """A site's covering faults. Must pass: a fault delaying it (for a wait: the
    site it guards). Must fail: a fault skipping it, or delaying it while
    skipping a wait that guards it. A store or compute site no wait guards
    (data read in stream order) needs no must-fail fault."""

    site: Site
    guarded: bool = False  # some wait guards this site
    passing: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)

    @property
    def needs_failing(self) -> bool:
        return self.site.kind in ("wait", "release") or self.guarded

    @property
    def missing(self) -> list[str]:
        gaps = []
        if not self.passing:
            what = (
                f"delays {self.site.guards}, the site it guards"
                if self.site.guards
                else "delays it"
            )
            gaps.append(f"no must-pass fault {what}")
        if self.needs_failing and not self.failing:
            gaps.append(
                "no must-fail fault exercises it (skips it, or delays it while "
                "skipping a wait that guards it)"
            )
        return gaps


@dataclass
class Review:
    base: str
    head: str
    changed: dict[str, set[int]]  # file (relative to the sources) -> lines changed in HEAD
    touched: list[Coverage]
    unsited: list[str]  # "file:line: message" for primitives the change adds outside sites
    runs: list = field(default_factory=list)  # RunResults, with --run

    @property
    def ok(self) -> bool:
        return (
            not self.unsited
            and not any(c.missing for c in self.touched)
            and all(r.ok for r in self.runs)
        )


class ReviewError(UsageError):
    """A review that cannot start: not a git repository, or a ref git does not know."""


def git_repo(root: Path):
    """The repository holding `root` (from any of its subdirectories)."""
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ReviewError(f"{root} is not inside a git repository") from None


def check_refs(root: Path, *refs: str | None) -> None:
    import git

    repo = git_repo(root)
    commits = []
    for ref in filter(None, refs):
        try:
            commits.append(repo.commit(ref))
        except (git.BadName, ValueError):
            raise ReviewError(f"unknown git ref {ref!r}") from None
    if len(commits) == 2 and commits[0] == commits[1]:
        raise ReviewError(f"BASE {refs[0]} and HEAD {refs[1]} are one commit: nothing to review")


def changed_lines(
    repo_root: Path, base: str, head: str | None, sources: str
) -> dict[str, set[int]]:
    """Per file under `sources`: the HEAD-side lines the diff adds or changes; a
    pure deletion marks the line before it (git's `+N,0`), so the site around
    it counts."""
    repo = git_repo(repo_root)
    # git names paths from the repository's top; the root may lie below it.
    below = Path(repo_root).resolve().relative_to(Path(repo.working_tree_dir).resolve())
    sources = str(below / sources)
    revisions = [base] + ([head] if head else [])
    names = repo.git.diff(*revisions, "--name-only", "--", sources).splitlines()
    changed: dict[str, set[int]] = {}
    for name in names:
        text = repo.git.diff(*revisions, "--unified=0", "--", name)
        lines: set[int] = set()
        for match in HUNK.finditer(text):
            start, count = int(match[1]), int(match[2] or 1)
            lines.update(range(start, start + count) if count else {max(start, 1)})
        changed[str(Path(name).relative_to(sources))] = lines
    return changed


def coverage(catalog: Catalog, sites: list[Site]) -> dict[str, Coverage]:
    """Which faults of `catalog` (generated ones included, if added) cover each site."""
    guarded_by: dict[str, set[str]] = {}
    for site in sites:
        if site.guards:
            guarded_by.setdefault(site.guards, set()).add(site.name)
    by_name = {site.name: Coverage(site, guarded=site.name in guarded_by) for site in sites}
    for fault in catalog.faults.values():
        patches = catalog.all_patches(fault.id)
        delayed = {p.site for p in patches if p.action == "delay"}
        skipped = {p.site for p in patches if p.action == "skip"}
        for name, cover in by_name.items():
            delays_it = name in delayed or (
                cover.site.kind == "wait" and cover.site.guards in delayed
            )
            if fault.expect == "pass" and delays_it:
                cover.passing.append(fault.id)
            exercised = name in skipped or (
                name in delayed and skipped & guarded_by.get(name, set())
            )
            if fault.expect == "fail" and exercised:
                cover.failing.append(fault.id)
    return by_name


def review(
    repo_root: Path,
    base: str,
    head: str | None,
    catalog_path: Path,
    *,
    generated: bool = True,
    workdir: Path,
) -> tuple[Review, Catalog, Path]:
    check_refs(repo_root, base, head)
    tree = make_scratch(repo_root, workdir / "head", ref=head) if head else Path(repo_root)
    catalog = load_catalog(catalog_path, tree_root=tree)
    if generated:
        catalog = with_generated(catalog, tree)
    sources = tree / catalog.target.sources
    sites, violations = parse_tree(sources)
    changed = changed_lines(repo_root, base, head, catalog.target.sources)
    covers = coverage(catalog, sites)
    touched = [
        covers[s.name]
        for s in sites
        if changed.get(str(s.path.relative_to(sources)), set()) & set(range(s.start, s.end + 1))
    ]
    unsited = [
        f"{v.path.relative_to(tree)}:{v.line}: {v.message}"
        for v in violations
        if v.line in changed.get(str(v.path.relative_to(sources)), set())
    ]
    return Review(base, head or "working tree", changed, touched, unsited), catalog, tree


def markdown(result: Review) -> str:
    lines = [f"# Ordering review: {result.base}..{result.head}", ""]
    files = ", ".join(f"`{name}`" for name in sorted(result.changed)) or "none"
    lines += [f"Files changed under the sources: {files}", ""]
    if result.unsited:
        lines += ["## Ordering primitives added outside any site", ""]
        lines += [f"- {entry}" for entry in result.unsited] + [""]
    lines += ["## Sites touched", ""]
    if not result.touched:
        lines.append("None: the change leaves every synchronization site as it was.")
    for cover in result.touched:
        site = cover.site
        state = "covered" if not cover.missing else "UNCOVERED: " + "; ".join(cover.missing)
        lines.append(
            f"- `{site.name}` ({site.kind}, {site.path.name}:{site.start}-{site.end}): {state}"
        )
        lines.append(f"  - must pass: {', '.join(cover.passing) or '-'}")
        failing = ", ".join(cover.failing) or (
            "-" if cover.needs_failing else "n/a (no wait guards it)"
        )
        lines.append(f"  - must fail: {failing}")
    if result.runs:
        lines += ["", "## Covering faults run on HEAD (controls first)", ""]
        lines += [
            f"- {r.fault} [{r.config}]: {r.verdict}" + ("" if r.ok else f" ({r.reason})")
            for r in result.runs
        ]
    lines += ["", f"Verdict: {'ok' if result.ok else 'CHANGES NEEDED'}"]
    return "\n".join(lines) + "\n"


def run_covering(result: Review, catalog: Catalog, tree: Path, workdir: Path) -> list:
    """The covering faults on HEAD's tree, through the sweep: the controls
    first (the clean tree must pass, the forced failure must be killed), so a
    harness that fails everything cannot pass its must-fail faults off as KILLED."""
    from faults.engine import Engine, sweep
    from hostio import gpu_count

    gpus = gpu_count()
    ids = list(dict.fromkeys(f for c in result.touched for f in (*c.passing, *c.failing)))
    if not ids:
        return []
    fits = [c.name for c in catalog.configs if catalog.gpus_for(c) <= gpus]
    controls, runs = sweep([Engine(catalog, tree, workdir)], ids, fits, 1, lambda _: None)
    return [*controls, *runs]
