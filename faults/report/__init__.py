"""The sweep's report: one document (document.py), its Markdown and JUnit
(markdown.py, schedules.py), SARIF (sarif.py) and two sides compared
(compare.py)."""
