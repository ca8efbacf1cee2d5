"""Faults made from the sites rather than written by hand
(docs/operators.md, "Mutation operators"): skipped waits and delays
(site_faults.py), the mutation operators (mutate.py), the delays that expose
(expose.py) and the seeded schedules of a delay (schedule.py)."""
