"""A corpus of realistic bug commits and what the review makes of each.

    afdep-faults corpus [DIR] [--run] [--only REGEX] [--results-dir D]

Each bug is a patch file (`git diff` output) under DIR whose first lines, before
the diff, say what it is:

    class: remove-barrier
    site: <the site the bug breaks>
    catch: static            # static: the review must catch it with no GPU; run: only a run can
    title: one line on what the commit does

For every bug: clone the repository's HEAD into a scratch folder (shared
objects, so it is quick), apply the patch and commit it, then run the review of
HEAD..bug there - static always, and with --run (the target's GPUs needed) the
covering faults as well - each writing SARIF. A bug is caught by a review that
says CHANGES NEEDED and names its site. The result, per bug: its class, caught
by static / run / both / missed, or not run (only a run catches it and none ran
here: not judged), whether the culprit site was named, and the time each review
took (docs/review.md, "The bug corpus").
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from faults.catalog.errors import FaultsError
from faults.catalog.model import Target
from faults.corpus.classes import BugClass
from hostio import run_logged

HEADER_KEYS = ("class", "site", "catch", "title")
HEADER_LINE = re.compile(r"^(?P<key>[a-z]+):\s*(?P<value>.+?)\s*$")
# A review that runs no GPU work; with --run the covering faults too.
STATIC_TIMEOUT_S = 300
RUN_TIMEOUT_S = 1800
AUTHOR = ("faults corpus", "corpus@localhost")


class CorpusError(FaultsError):
    """A corpus that cannot be read: a missing folder, a patch without its header."""


class Catch(str, Enum):
    STATIC = "static"  # the static review (the publish contract) must catch it
    RUN = "run"  # only running the covering faults can
    # Expected to get past the review; the entry says why (a foreign corpus:
    # code the target's harness never runs, a fault no catalog entry makes).
    MISSED = "missed"

    def __str__(self) -> str:
        return self.value


class CaughtBy(str, Enum):
    STATIC = "static"
    RUN = "run"
    BOTH = "both"
    MISSED = "missed"
    # Only a run catches it and none ran here (no --run, or not the GPUs):
    # not judged, so neither caught nor missed.
    NOT_RUN = "not run"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Bug:
    name: str  # the patch file's stem
    path: Path
    bug_class: BugClass
    site: str  # "" where the code the bug changes holds no site of the catalog
    catch: Catch
    title: str
    # Why the catch is expected as it is, and where the bug was fixed upstream
    # (a foreign corpus says both; a patch's header holds neither).
    why: str = ""
    upstream: str = ""


@dataclass
class ReviewOutcome:
    """One review of one bug: its exit code (1: CHANGES NEEDED), the sites its
    SARIF names, its wall time."""

    exit_code: int | None
    sites_named: list[str]
    seconds: float
    log: str

    @property
    def caught(self) -> bool:
        return self.exit_code == 1


@dataclass
class BugResult:
    bug: Bug
    static: ReviewOutcome
    run: ReviewOutcome | None = None
    not_run_why: str = ""  # why no run review ran, when none did
    older: str = ""  # BugCommit.older: its base judged by a catalog not its own

    @property
    def caught_by(self) -> CaughtBy:
        """How the bug was caught; NOT RUN for a bug only a run catches when
        no run review ran and the static one did not catch it."""
        static = self.static.caught and self.bug.site in self.static.sites_named
        ran = self.run is not None and self.run.caught and self.bug.site in self.run.sites_named
        if static and ran:
            return CaughtBy.BOTH
        if static or ran:
            return CaughtBy.STATIC if static else CaughtBy.RUN
        if self.run is None and self.bug.catch is Catch.RUN:
            return CaughtBy.NOT_RUN
        return CaughtBy.MISSED


def _header(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith(("diff --git", "--- ")):
            break
        if not line.strip() or line.startswith("#"):
            continue
        match = HEADER_LINE.match(line)
        if match is None or match["key"] not in HEADER_KEYS:
            raise CorpusError(f"{path}:{number}: not a header line ({', '.join(HEADER_KEYS)})")
        fields[match["key"]] = match["value"]
    return fields


def word_of(enum: type[Enum], value: object, where: str, key: str):
    """`value` as a member of `enum`, else a CorpusError naming `where` and `key`."""
    try:
        return enum(value)
    except ValueError:
        words = [member.value for member in enum]
        raise CorpusError(f"{where}: {key} {value!r} is not one of {words}") from None


def load_bug(path: Path) -> Bug:
    fields = _header(path)
    missing = [key for key in HEADER_KEYS if key not in fields]
    if missing:
        raise CorpusError(f"{path}: header lacks {', '.join(missing)}")
    catch = word_of(Catch, fields["catch"], str(path), "catch")
    bug_class = word_of(BugClass, fields["class"], str(path), "class")
    if "diff --git" not in path.read_text():
        raise CorpusError(f"{path}: no diff after the header")
    return Bug(path.stem, path, bug_class, fields["site"], catch, fields["title"])


def load_corpus(folder: Path, only: str | None = None) -> list[Bug]:
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"corpus {folder}: not a directory")
    try:
        pattern = re.compile(only) if only else None
    except re.error as error:
        raise CorpusError(f"--only {only!r}: not a regular expression ({error})") from None
    bugs = [
        load_bug(path)
        for path in sorted(folder.glob("*.patch"))
        if pattern is None or pattern.fullmatch(path.stem)
    ]
    if not bugs:
        matching = f" matches {only!r}" if only else ""
        raise CorpusError(f"corpus {folder}: no *.patch file{matching}")
    return bugs


def fresh_clone(repo_root: Path, clone: Path):
    """A clone of `repo_root`'s HEAD at `clone`, sharing its objects (quick); one
    an earlier (perhaps cut) run left there is this tool's scratch: it goes first."""
    import git

    shutil.rmtree(clone, ignore_errors=True)
    return git.Repo.clone_from(str(repo_root), str(clone), shared=True, no_checkout=False)


def bug_commit(repo_root: Path, bug: Bug, clone: Path) -> tuple[str, str]:
    """Clone HEAD of `repo_root` into `clone`, commit the bug there: (base, head)."""
    import git

    repo = fresh_clone(repo_root, clone)
    base = repo.head.commit.hexsha
    try:
        repo.git.apply("--index", str(bug.path.resolve()))
    except git.GitCommandError as error:
        stderr = (error.stderr or "").strip().splitlines()
        reason = stderr[-1] if stderr else error
        raise CorpusError(f"{bug.path}: does not apply to HEAD: {reason}") from None
    actor = git.Actor(*AUTHOR)
    head = repo.index.commit(f"{bug.bug_class}: {bug.title}", author=actor, committer=actor)
    return base, head.hexsha


def sarif_sites(sarif: Path, known_sites: set[str]) -> list[str]:
    """The sites a review's SARIF names: in a result's properties or message."""
    try:
        document = json.loads(sarif.read_text())
    except (OSError, ValueError):
        return []
    named: set[str] = set()
    for run in document.get("runs", []):
        for result in run.get("results", []):
            site = (result.get("properties") or {}).get("site")
            if site:
                named.add(site)
            text = (result.get("message") or {}).get("text", "")
            named.update(s for s in known_sites if s in text)
    return sorted(named)


def review_words(
    clone: Path,
    base: str,
    head: str,
    work: Path,
    sarif: Path,
    *,
    run: bool,
    rank_mode: str,
    slots: int,
    exposure: bool = True,
    older_trees: bool = False,
    catalog: Path | None = None,
) -> list[str]:
    """The review command one bug gets: static, or --run with `slots` (and
    the real-size configs unless `exposure` is false; `older_trees`: a commit of
    the history, review --older-trees; `catalog`: --catalog, else the clone's
    default)."""
    mode = "run" if run else "static"
    command = [sys.executable, "-m", "faults", "--root", str(clone), "--workdir", str(work / mode)]
    command += ["--catalog", str(catalog)] if catalog is not None else []
    command += ["--rank-mode", rank_mode, "review", base, head, "--sarif", str(sarif)]
    command += ["--older-trees"] if older_trees else []
    if not run:
        return command
    return command + ["--run", "--slots", str(slots)] + ([] if exposure else ["--no-exposure"])


def review_bug(
    clone: Path,
    base: str,
    head: str,
    work: Path,
    *,
    run: bool,
    known_sites: set[str],
    rank_mode: str = "auto",
    slots: int = 1,
    exposure: bool = True,
    cache: Path | None = None,
    older_trees: bool = False,
    catalog: Path | None = None,
) -> ReviewOutcome:
    """One review of base..head in `clone`, its files under `work`; `cache`:
    the review's own cache folder (its PTX compiled afresh), else the user's."""
    sarif = review_sarif(work, run=run)
    command = review_words(
        clone,
        base,
        head,
        work,
        sarif,
        run=run,
        rank_mode=rank_mode,
        slots=slots,
        exposure=exposure,
        older_trees=older_trees,
        catalog=catalog,
    )
    log = sarif.with_suffix(".log")
    started = time.perf_counter()
    outcome = run_logged(
        command,
        log,
        timeout_s=RUN_TIMEOUT_S if run else STATIC_TIMEOUT_S,
        env=_env_for(clone, cache),
        cwd=clone,
    )
    seconds = round(time.perf_counter() - started, 2)
    return ReviewOutcome(outcome.exit_code, sarif_sites(sarif, known_sites), seconds, str(log))


def review_sarif(work: Path, *, run: bool) -> Path:
    """Where a review under `work` writes its SARIF (its log beside it)."""
    return work / f"review-{'run' if run else 'static'}.sarif"


def _env_for(clone: Path, cache: Path | None = None) -> dict[str, str]:
    """This faults package first (the tool that reviews; `clone` is only what
    it reviews: the target's own stages put the clone first themselves)."""
    import os

    tool = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tool, env.get("PYTHONPATH")]))
    env["PYTHONSAFEPATH"] = "1"  # run in the clone, never import from it
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return env


@dataclass(frozen=True)
class BugCommit:
    """A bug committed: the repository it is in, its parent and its commit;
    `older`: a parent older than the catalog's pin (the catalog does not load
    on it), the line saying what of the catalog was left out there; both
    commits are then reviewed as review --older-trees judges an older tree."""

    bug: Bug
    repo: Path
    base: str
    head: str
    older: str = ""


def run_corpus(
    repo_root: Path,
    target: Target,
    bugs: list[Bug],
    workdir: Path,
    **review_options,
) -> list[BugResult]:
    """Each bug committed on a clone of HEAD, all of them first (a bug naming
    no site of HEAD, comment or anchored, or one that does not apply, stops
    the command before any review), then reviewed (`review_commits`, with
    `review_options`)."""
    from invariants.sync.sites import parse_tree

    found = parse_tree(Path(repo_root) / target.sources, target.anchors)[0]
    known_sites = {site.name for site in found}
    for bug in bugs:
        if bug.site not in known_sites:
            raise CorpusError(f"{bug.path}: site {bug.site} is not a site of HEAD")
    commits = []
    for bug in bugs:
        clone = Path(workdir) / bug.name / "clone"
        commits.append(BugCommit(bug, clone, *bug_commit(repo_root, bug, clone)))
    return review_commits(commits, workdir, known_sites, **review_options)


def review_commits(
    commits: list[BugCommit],
    workdir: Path,
    known_sites: set[str],
    *,
    run: bool,
    catalog: Path | None = None,
    rank_mode: str = "auto",
    slots: int = 1,
    exposure: bool = True,
    not_run_why: str = "",
    say=print,
) -> list[BugResult]:
    """Each bug commit reviewed in its repository, one at a time (a review
    --run holds every GPU): static, and with `run` the covering faults too;
    `catalog`: the review's --catalog (else the repository's default).
    Without `run`, `not_run_why` says why no run review runs."""
    results = []
    for commit in commits:
        bug, work = commit.bug, Path(workdir) / commit.bug.name
        words = {"known_sites": known_sites, "catalog": catalog, "older_trees": bool(commit.older)}
        static = review_bug(commit.repo, commit.base, commit.head, work, run=False, **words)
        result = BugResult(bug, static, not_run_why="" if run else not_run_why, older=commit.older)
        if run:
            options = {"rank_mode": rank_mode, "slots": slots, "exposure": exposure}
            result.run = review_bug(
                commit.repo, commit.base, commit.head, work, run=True, **words, **options
            )
        say(
            f"{bug.name} class={bug.bug_class} expected={bug.catch} caught_by={result.caught_by} "
            f"static_s={static.seconds}"
            + (f" run_s={result.run.seconds}" if result.run else "")
            + (f" ({result.not_run_why})" if result.caught_by is CaughtBy.NOT_RUN else "")
        )
        results.append(result)
    return results
