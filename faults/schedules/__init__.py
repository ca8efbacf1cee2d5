"""Seeded schedules of a delay (docs/operators.md, "Seeded schedules and
replay"). A delay patch may carry a schedule: which warps, lanes, CTAs or
steps it holds back and for how long, drawn on the host from a seed into
constants of the injected code. One seed gives one patch text, so one tree
digest: a run is replayed by applying its seed again.

A module per stage: the catalog's table (table.py) and the draw with the
code it injects (draw.py)."""
