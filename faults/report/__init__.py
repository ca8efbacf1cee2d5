"""The sweep's report: one document (document.py), its Markdown and JUnit
(markdown.py; the seeded schedules' tables are faults/schedules/report.py),
SARIF (sarif.py) and two sides compared (compare.py)."""
