"""From a run's outcome to a verdict (docs/verdicts.md, "Verdicts"): the
rule table and a fault's summary over its runs (verdict.py), the sweep's
scores (scores.py), and faults over seeds with their run ids and kill rates
(seeds.py)."""
