"""The command-line programs over the packages (docs/architecture.md,
"Layers"): the `afdep` command (tools/afdep_cli.py: build, validate, bench,
screen, sanitize, drive) and the `afdep-faults` command, the correctness
driver, validate, sanitize and bench. The one place where a library's error
becomes a one-line message and exit 2. This face imports nothing: the build
command must not load torch."""
