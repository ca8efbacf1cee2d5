"""`shrink` (docs/operators.md, "Shrinking"): the loop that makes a killing
run input smaller (loop.py), its runs through the engine (runs.py) and what it
hands back (report.py)."""
