"""[target.bound]: a time limit on every spin loop of a wait or compute
site, written into each tree the target runs (docs/catalog.md, "Bounded
waits"), so a spin that would hang forever ends with the target's timeout
line and a trap: a hung run still says which site hung, and its markers
reach the log."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from string import Formatter

from faults.catalog.errors import catalog_error

BOUND_PLACEHOLDERS = ("site", "limit_ns")
WHERE = "target.bound"


@dataclass(frozen=True)
class Bound:
    """How the target's spin loops start (`loop`, a regular expression whose
    group `cond` is the loop's condition), how long one may spin (from the
    start of its site), and the statements that run past it
    (`expired`: they print the timeout line and stop, as `__trap();`)."""

    loop: re.Pattern[str]
    limit_ns: int
    expired: str

    def expired_at(self, site: str) -> str:
        return self.expired.format(site=site, limit_ns=self.limit_ns)


def bound_table(path: Path, raw, language: str, clock: str) -> Bound | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"loop", "limit_ns", "expired"}:
        keys = sorted(raw) if isinstance(raw, dict) else raw
        raise catalog_error(path, WHERE, f"a table of loop, limit_ns and expired; got {keys!r}")
    if not isinstance(raw["loop"], str):
        raise catalog_error(path, WHERE, f"loop: a regular expression, got {raw['loop']!r}")
    try:
        loop = re.compile(raw["loop"])
    except re.error as error:
        raise catalog_error(path, WHERE, f"loop: not a regular expression: {error}") from None
    if "cond" not in loop.groupindex:
        raise catalog_error(path, WHERE, f"loop: {raw['loop']!r} has no group (?P<cond>...)")
    limit = raw["limit_ns"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise catalog_error(path, WHERE, f"limit_ns: a positive int (nanoseconds), got {limit!r}")
    expired = raw["expired"]
    if not isinstance(expired, str) or not expired.strip():
        raise catalog_error(path, WHERE, f"expired: statements (C), got {expired!r}")
    try:
        names = [name for _, name, _, _ in Formatter().parse(expired) if name is not None]
        unknown = [name for name in names if name not in BOUND_PLACEHOLDERS]
        if not unknown:  # a stray brace, a bad conversion or format spec
            expired.format(**dict.fromkeys(BOUND_PLACEHOLDERS, ""))
    except ValueError as error:
        raise catalog_error(path, WHERE, f"expired: cannot fill in: {error}") from None
    if unknown:
        known = "{site}, {limit_ns}"
        raise catalog_error(
            path, WHERE, f"expired: unknown placeholder {{{unknown[0]}}}; known: {known}"
        )
    if language == "cuda" and not clock.strip():
        raise catalog_error(path, WHERE, "a cuda target's bound reads [target] clock: give it")
    return Bound(loop, limit, expired)
