"""`afdep validate`: the correctness matrix over the driver
(tools/validate/validation.py) and its arguments (arguments.py), its runs
(matrix.py), where their ranks go (modes.py), how a run is judged (judge.py)
and what a CPU can check (cpu_checks.py)."""
