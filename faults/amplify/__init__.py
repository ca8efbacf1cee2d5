"""Amplification: the order-weakening mutants of a catalog run as
message-passing litmus tests under stress, MC Mutants' way (docs/operators.md,
"Amplification"). `shapes.py` maps a mutant to its litmus, `compile.py`
compiles `litmus.cuh` with NVRTC (no GPU), `device.py` launches it, `plan.py`
orders the shapes and runs them in the budget, `report.py` judges and
writes; the command is tools/faults_cli/amplify.py."""
