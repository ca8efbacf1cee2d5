#!/usr/bin/env bash
# The 4-GPU work in one command on nvidia-h200-x4: the 4-GPU driver matrix, the fault
# catalog at f1 (3A:1F) and f2 (2A:2F), and the C vs CF screen beside the
# recorded changes. Results and logs go under $1 (default docs/results). On fewer
# GPUs each tool says what it would run and needs.
set -u -o pipefail
out=${1:-docs/results}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 AFDEP_JIT_CACHE=${AFDEP_JIT_CACHE:-$PWD/.jit}
status=0
python3 -m tools.build > "$out/build.log" 2>&1 || status=1
python3 -m tools.validate --select four-gpu --jobs 4 --results-dir "$out" \
    --logs-dir /tmp/afdep-4gpu-validate || status=1
python3 -m faults --no-generated --workdir /tmp/afdep-4gpu-sweep sweep --config 4gpu-f1 --config 4gpu-f2 --config 4gpu-f3 \
    --slots 2 --results-dir "$out" || status=1
python3 -m tools.bench.screen --results-dir "$out" || status=1
exit $status
