"""The correctness driver: dispatch -> per-expert function -> combine checked
against invariants.data every step, in its two rank modes."""
