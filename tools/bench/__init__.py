"""`afdep bench` and `afdep screen`: arms interleaved across processes
against NCCL and a peer copy (tools/bench/arms.py, one process: worker.py),
the 4-GPU screen (screen.py), their numbers, reports and timelines, and the
one-GPU micro-benches of each kernel against its bound (combine.py,
dispatch.py, expand.py, over micro.py and micro_step.py)."""
