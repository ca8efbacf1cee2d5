"""The pre-merge ordering review (docs/review.md, "The pre-merge
review"): what a change touches (diff.py, coverage.py), the static contract of
its tree (static.py), its runs (runs.py), the review itself (review.py, model.py)
and its Markdown and SARIF (markdown.py, findings.py)."""
