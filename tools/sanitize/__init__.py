"""`afdep sanitize`: the one-GPU driver under compute-sanitizer
(tools/sanitize/stage.py), the tool's text read into findings (findings.py),
and its documents (report.py)."""
