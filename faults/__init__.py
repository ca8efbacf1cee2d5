"""The fault engine: named delays, skipped waits and mutants applied to
scratch copies of a target's sources, rebuilt, run and judged. Generic: it
knows sites and text, never afdep; a target's words live in its catalog.
By stage (docs/catalog.md, "Pipeline of the fault engine"): operators/ (one
module a mutation operator), catalog/ (the model and one module per table),
generate/ (faults made from the sites), pipeline/ (scratch, apply, build and
run, parse, the erasure check, the engine, slots), judge/ (verdicts, a
judged run, scores), report/ (one sweep report document and its forms);
schedules/ (a delay's seeded schedules, a module per stage); the
applications sweep/, review/, corpus/, shrink/, amplify/ and init/; and the
pytest plugin. The commands are tools/faults_cli."""
