"""What must hold, used by the tests and by the fault engine
(docs/architecture.md, "Layers"): `data/`, the pure reference of dispatch,
expert function and combine, layout checks, step-encoded inputs and the
Hypothesis strategies of routes; `sync/`, the site grammar and the publish
contract on the source and on the PTX. It imports neither faults nor tools,
and this face imports nothing, so the engine's `invariants.sync` does not
bring in the kernel package that `invariants.data` reads."""
