"""What one mutation operator is (faults/operators/__init__.py reads one from
each module of the package)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Made(Enum):
    """How the engine makes a fault of the family."""

    SITE_ACTION = "site-action"  # a patch at the site: skip or delay (generate/site_faults.py)
    EXPOSE = "expose"  # a schedule at a publishing group (generate/expose.py)
    REWRITE = "rewrite"  # a catalog's [[target.mutation]] rule in the site's region
    MOVE = "move"  # the release moved above the store it guards (generate/mutate.py)


@dataclass(frozen=True)
class Litmus:
    """The litmus test that shows the family's mutant (faults/amplify/shapes.py):
    at a wait, the load the mutant leaves (`wait`: litmus::Wait's word; None:
    no litmus shows it there, `why_not_at_wait` says why); at a release,
    whether the mutant narrows its scope and keeps the producers' barrier."""

    wait: str | None = None
    why_not_at_wait: str = (
        "a consumer barrier removed is a plain race, not an order; the runs show it"
    )
    narrows_release: bool = False
    keeps_barrier: bool = True


@dataclass(frozen=True)
class Example:
    """A rewrite of the family in afdep's spelling: `before` becomes `after`
    under catalogs/afdep.toml's rules of this family and `kind` (the
    operator tests run them)."""

    kind: str  # "release" or "wait": the site kind the rule rewrites
    before: str
    after: str


@dataclass(frozen=True)
class Operator:
    rank: int  # its place among the families (reports list them in this order)
    word: str  # the family's word in fault ids, catalogs and reports
    does: str  # what a fault of it does, in a line
    made: Made
    weakens_order: bool = False  # the hardware may never show it; the contract is its catch
    bug_class: bool = False  # a real bug can be of this family (the corpus's classes)
    hint: str | None = None  # why a must-fail fault of it can run clean, what opens its window
    litmus: Litmus | None = None  # None: amplify makes no litmus of it
    examples: tuple[Example, ...] = ()
