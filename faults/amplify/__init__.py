"""Amplification: the order-weakening mutants of a catalog run as
message-passing litmus tests under stress, MC Mutants' way (docs/architecture.md,
"Amplification"). `shapes.py` maps a mutant to its litmus, `compile.py`
compiles `litmus.cuh` with NVRTC (no GPU), `device.py` launches it, `report.py`
judges and writes, `cli.py` is `afdep-faults amplify`."""
