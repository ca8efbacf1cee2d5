"""The sweep and what is done with its report (docs/tools.md, "The sweep"): the
sweep itself (sweep.py), its shards merged (merge.py), its runs judged again
(rejudge.py) and the SQLite history (history.py); one run replayed is
faults/schedules/replay.py."""
