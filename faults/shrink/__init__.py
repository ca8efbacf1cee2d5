"""`shrink` (docs/operators.md, "Shrinking"), a module per stage: the
catalog's [shrink] table (table.py, below the catalog that reads it), what a
shrink starts from (plan.py), the loop that makes a killing run input
smaller (loop.py), its runs through the engine (runs.py) and what it hands
back (report.py)."""
