"""The sweep and what is done with its report (docs/tools.md, "The sweep"): the
sweep itself (sweep.py), its shards merged (merge.py), its runs judged again
(rejudge.py), one run replayed (replay.py) and the SQLite history (history.py)."""
