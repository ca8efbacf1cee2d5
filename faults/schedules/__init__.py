"""Seeded schedules of a delay (docs/operators.md, "Seeded schedules and
replay"). A delay patch may carry a schedule: which warps, lanes, CTAs or
steps it holds back and for how long, drawn on the host from a seed into
constants of the injected code. One seed gives one patch text, so one tree
digest: a run is replayed by applying its seed again.

A module per stage, each below the engine's stages that need it
(tests/unit/test_imports.py, PARTS): the catalog's table (table.py), the
draw and the code it injects (draw.py), run ids and seeded fault ids
(ids.py), a catalog's scheduled faults over seeds (seeds.py), a fault
judged over its seeds with the kill rates (over_seeds.py), their tables in
the sweep's Markdown (report.py), and one run of a report replayed
(replay.py)."""
