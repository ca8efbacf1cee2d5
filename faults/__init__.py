"""The fault engine: named delays and skipped waits applied to scratch copies
of CUDA sources, rebuilt, run and judged. Generic: it knows sites and text,
not afdep. The stages, in order (docs/architecture.md, "Pipeline of the fault
engine"): the catalog (catalog.py loads it, catalog_types.py holds what it
holds, catalog_checks.py and catalog_patches.py check its tables, catalog_refs.py that what it
names exists), sites, scratch, apply, build and
run (both in run.py), parse, verdict and report (a package, report/);
engine.py strings them together. Around them: generate (faults made from the
sites), sweep (every fault, controls first, with its reports), history (past
sweeps in SQLite), review (what a diff does to the synchronization), project
(the catalogs pyproject.toml lists), cli (the command) and pytest_plugin."""
