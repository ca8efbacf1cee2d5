#!/bin/bash
# The order-weakening mutants as litmus tests on the GPUs here (docs/
# docs/operators.md, "Amplification"): the GPU tests first (the controls clean),
# then `afdep-faults amplify` without stress and with memory stress (nvlink too
# on two GPUs), the payload read as the kernels do (READ=l2) unless READ=cached.
# Back: results/amplify-<machine>.{json,md}, results/gpu-tests.log, console.log.
source scripts/gpu/common.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_amplify.py \
  > "$OUT/results/gpu-tests.log" 2>&1
echo "gpu tests rc=$?" | tee -a "$LOG"
STRESS=(--stress none --stress memory)
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && STRESS+=(--stress nvlink)
timeout "${LIMIT_S:-390}" python3 -m faults amplify --budget-s "${BUDGET_S:-300}" "${STRESS[@]}" \
  --read "${READ:-l2}" --results-dir "$OUT/results" >> "$LOG" 2>&1
echo "amplify rc=$?" | tee -a "$LOG"
exit 0
