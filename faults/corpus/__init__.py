"""The review measured on real commits (docs/review.md, "The bug
corpus"): bug commits and what the review makes of each (bugs.py,
bugs_report.py), a foreign target's bugs made from its released versions
(releases.py) with each base as its review takes it (bases.py), and its
other half, real commits that must be approved (neutral.py,
neutral_report.py)."""
