"""The fault engine: named delays and skipped waits applied to scratch copies
of CUDA sources, rebuilt, run and judged. Generic: it knows sites and text,
not afdep. Stages, one module each: catalog, sites, apply, build, run, parse,
verdict, report (docs/architecture.md)."""
