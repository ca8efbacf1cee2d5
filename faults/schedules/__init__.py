"""Seeded schedules of a delay (docs/operators.md, "Seeded schedules and
replay"), a module per stage: the catalog's table (table.py)."""
