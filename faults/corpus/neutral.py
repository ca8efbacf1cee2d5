"""Real commits and what the review makes of each: the corpus's other half,
where a bug must be caught and an ordering-neutral change must be approved.

    afdep-faults corpus --neutral REV_RANGE [--expect FILE] [--results-dir D]

REV_RANGE is git rev-list's (`A..B`, or a ref alone for its whole history).
Every commit of it with a parent that changes a file under the catalog's
sources is reviewed statically against its first parent, by the corpus's
review (faults/corpus/bugs.py) on a clone of HEAD: HEAD's review judges each
commit's tree (by the tree's own catalog where it can take it, else by
HEAD's, `review --older-trees`), with its own PTX cache empty (a target's compiler may keep a
cache of its own: the environment decides that one), its wall and CPU seconds
said with the machine's load.
A commit is expected to be approved unless FILE lists it:

    [[commit]]
    sha = "35eacdd"            # 7 to 40 hex digits, a prefix of the commit's
    expect = "changes-needed"  # or "ok"
    why = "what it does to the ordering"

A commit expected `ok` that the review says CHANGES NEEDED is a false
positive; one it cannot judge (exit 2, or out of time) is said as such. The
report is written by faults/corpus/neutral_report.py (docs/review.md, "Neutral commits").
"""

from __future__ import annotations

import json
import os
import re
import resource
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import tomllib

from faults.catalog.errors import FaultsError, read_toml
from faults.corpus.bugs import STATIC_TIMEOUT_S, fresh_clone, review_bug, review_sarif
from faults.review.model import OLDER_TREE_OPENING

EXPECTATION_KEYS = ("sha", "expect", "why")
SHA_PREFIX = re.compile(r"^[0-9a-f]{7,40}$")


class NeutralError(FaultsError):
    """A range git does not know or that holds no commit, or an expectations
    file that cannot be read."""


class Expect(str, Enum):
    OK = "ok"  # ordering-neutral: the review must approve it
    CHANGES_NEEDED = "changes-needed"  # it changes the ordering: a flag is right

    def __str__(self) -> str:
        return self.value


class ReviewAnswer(str, Enum):
    """What the review answered of one commit (its exit status), or that it gave none."""

    OK = "ok"
    CHANGES_NEEDED = "CHANGES NEEDED"
    NOT_JUDGED = "not judged"  # the review stopped with an error, or ran out of time

    def __str__(self) -> str:
        return self.value


EXIT_OUTCOMES = {0: ReviewAnswer.OK, 1: ReviewAnswer.CHANGES_NEEDED}
JUDGED_AS = {ReviewAnswer.OK: Expect.OK, ReviewAnswer.CHANGES_NEEDED: Expect.CHANGES_NEEDED}


@dataclass(frozen=True)
class Expectation:
    sha: str  # a prefix of the commit's sha
    expect: Expect
    why: str


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str  # the first parent: a merge is reviewed as what it brings to its branch
    subject: str
    merge: bool = False


@dataclass
class CommitResult:
    commit: Commit
    outcome: ReviewAnswer
    expected: Expect
    why: str  # the expectation file's, or "" for the default
    seconds: float
    cpu_seconds: float = 0.0  # the review's processes' user + system time
    load: float = 0.0  # the machine's 1-minute load average as the review began
    sites_touched: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # `rule: message`, from the SARIF
    reason: str = ""  # not judged: the review's last line
    older: str = ""  # judged by HEAD's catalog, not its own: the review's line saying so

    @property
    def false_positive(self) -> bool:
        return self.expected is Expect.OK and self.outcome is ReviewAnswer.CHANGES_NEEDED

    @property
    def as_expected(self) -> bool:
        return JUDGED_AS.get(self.outcome) is self.expected


def _entry(path: Path, number: int, entry) -> Expectation:
    where = f"{path}: commit {number}"
    if not isinstance(entry, dict):
        raise NeutralError(f"{where}: not a table")
    missing = [key for key in EXPECTATION_KEYS if key not in entry]
    unknown = sorted(set(entry) - set(EXPECTATION_KEYS))
    if missing or unknown:
        said = [f"lacks {', '.join(missing)}"] * bool(missing)
        said += [f"has unknown {', '.join(unknown)}"] * bool(unknown)
        raise NeutralError(f"{where}: {'; '.join(said)} ({', '.join(EXPECTATION_KEYS)})")
    sha, expect, why = (entry[key] for key in EXPECTATION_KEYS)
    if not isinstance(sha, str) or not SHA_PREFIX.match(sha):
        raise NeutralError(f"{where}: sha {sha!r} is not 7 to 40 lowercase hex digits")
    try:
        expect = Expect(expect)
    except ValueError:
        raise NeutralError(
            f"{where}: expect {expect!r} is not one of {[e.value for e in Expect]}"
        ) from None
    if not isinstance(why, str) or not why.strip():
        raise NeutralError(f"{where}: why must say what the commit does to the ordering")
    return Expectation(sha, expect, why.strip())


def load_expectations(path: Path | None) -> list[Expectation]:
    """The [[commit]] entries of `path` (none: every commit expected ok)."""
    if path is None:
        return []

    def unreadable(error: Exception) -> NeutralError:
        if isinstance(error, tomllib.TOMLDecodeError):
            return NeutralError(f"{path}: {error}")
        return NeutralError(f"{path}: cannot be read ({error.__class__.__name__})")

    data = read_toml(path, unreadable)
    unknown = sorted(set(data) - {"commit"})
    if unknown:
        raise NeutralError(f"{path}: unknown {', '.join(unknown)}; it holds [[commit]] tables")
    entries = data.get("commit", [])
    if not isinstance(entries, list):
        raise NeutralError(f"{path}: commit must be [[commit]] tables")
    expectations = [_entry(Path(path), n, entry) for n, entry in enumerate(entries, 1)]
    for number, later in enumerate(expectations, 1):
        for earlier in expectations[: number - 1]:
            if earlier.sha.startswith(later.sha) or later.sha.startswith(earlier.sha):
                raise NeutralError(f"{path}: commit {number}: {later.sha} is listed twice")
    return expectations


def expectation_for(sha: str, expectations: list[Expectation]) -> Expectation:
    found = [entry for entry in expectations if sha.startswith(entry.sha)]
    return found[0] if found else Expectation(sha, Expect.OK, "")


def commits_in(repo_root: Path, rev_range: str, sources: str) -> tuple[list[Commit], list[Commit]]:
    """The commits of `rev_range` that have a parent, oldest first: those that
    change a file under `sources`, and those that do not."""
    import git

    from faults.review.diff import git_repo, top_prefix

    repo = git_repo(repo_root)
    try:
        if rev_range.startswith("-"):  # an option to git, not a range
            raise git.GitCommandError("rev-list", 128)
        listed = repo.git.rev_list("--topo-order", "--reverse", "--min-parents=1", rev_range, "--")
    except git.GitCommandError:
        raise NeutralError(f"--neutral {rev_range!r}: no revision or range git knows") from None
    if not listed.split():
        raise NeutralError(f"--neutral {rev_range!r}: no commit with a parent in the range")
    under_sources = (top_prefix(repo_root) / sources).as_posix()
    under, outside = [], []
    for sha in listed.split():
        commit = repo.commit(sha)
        parent = commit.parents[0].hexsha
        entry = Commit(sha, parent, commit.summary, merge=len(commit.parents) > 1)
        changed = repo.git.diff(parent, sha, "--name-only", "--", under_sources)
        (under if changed.strip() else outside).append(entry)
    return under, outside


def sarif_run(sarif: Path) -> tuple[list[str], list[str]]:
    """The sites a review's SARIF says it touched and its findings (`rule:
    message`); nothing from a review that wrote none (one that stopped)."""
    try:
        [run] = json.loads(Path(sarif).read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return [], []
    touched = (run.get("properties") or {}).get("sitesTouched", [])
    found = [
        f"{result.get('ruleId')}: {(result.get('message') or {}).get('text', '')}"
        for result in run.get("results", [])
    ]
    return list(touched), found


def last_line(log: Path) -> str:
    try:
        lines = [line for line in Path(log).read_text().splitlines() if line.strip()]
    except OSError:
        return "the review left no log"
    return lines[-1].strip() if lines else "the review printed nothing"


def older_tree_line(log: Path) -> str:
    """The review's line saying a catalog not the tree's own judged it, or ""."""
    try:
        lines = Path(log).read_text().splitlines()
    except OSError:
        return ""
    return next((line for line in lines if line.startswith(OLDER_TREE_OPENING)), "")


def review_commit(clone: Path, commit: Commit, work: Path, expected: Expectation) -> CommitResult:
    """The static review of parent..commit in `clone`, its files under `work`."""
    # Other work on the machine stretches a review's wall time, not its CPU time.
    load = round(os.getloadavg()[0], 2)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome = review_bug(
        clone,
        commit.parent,
        commit.sha,
        work,
        run=False,
        known_sites=set(),
        cache=work / "cache",
        older_trees=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    verdict = EXIT_OUTCOMES.get(outcome.exit_code, ReviewAnswer.NOT_JUDGED)
    touched, found = sarif_run(review_sarif(work, run=False))
    result = CommitResult(commit, verdict, expected.expect, expected.why, outcome.seconds)
    result.cpu_seconds, result.load = round(cpu, 2), load
    result.sites_touched, result.findings = touched, found
    result.older = older_tree_line(outcome.log)
    if verdict is ReviewAnswer.NOT_JUDGED:
        timed_out = outcome.exit_code is None
        result.reason = (
            f"out of time ({STATIC_TIMEOUT_S} s)" if timed_out else last_line(outcome.log)
        )
    return result


def review_commits(
    repo_root: Path,
    commits: list[Commit],
    workdir: Path,
    expectations: list[Expectation],
    say=print,
) -> list[CommitResult]:
    """Each commit reviewed in one clone of HEAD (never the user's tree), one at
    a time, each in its own folder under `workdir`."""
    clone = Path(workdir) / "clone"
    fresh_clone(repo_root, clone)
    results = []
    for commit in commits:
        expected = expectation_for(commit.sha, expectations)
        result = review_commit(clone, commit, Path(workdir) / commit.sha[:12], expected)
        say(
            f"{commit.sha[:12]} verdict={result.outcome} expected={result.expected} "
            f"false_positive={'yes' if result.false_positive else 'no'} s={result.seconds}"
        )
        results.append(result)
    return results
