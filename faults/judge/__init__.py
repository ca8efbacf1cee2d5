"""From a run's outcome to a verdict (docs/verdicts.md, "Verdicts"): the
rule table and a fault's summary over its runs (verdict.py), a judged run
(run_result.py) and the sweep's scores (scores.py)."""
