"""Faults made from the sites rather than written by hand
(docs/operators.md, "Mutation operators"): skipped waits and delays
(site_faults.py), the mutation operators (mutate.py) and the delays that
expose (expose.py); anchored sites written in as comment sites
(annotate.py). A delay's seeded schedule is faults/schedules/."""
