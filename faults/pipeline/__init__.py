"""One fault's trip through the engine, stage by stage (docs/catalog.md,
"Pipeline of the fault engine"): scratch tree, apply, build and run, parse,
the erasure check, the engine that runs them in order, and the slots that
spread a sweep over GPU groups."""
