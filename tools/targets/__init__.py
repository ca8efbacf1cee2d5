"""Targets nobody here wrote: each a folder holding its release table (which
file of which package, pinned by sha256, and which members of it), our
harness for it, and nothing of the other project (docs/targets.md)."""
