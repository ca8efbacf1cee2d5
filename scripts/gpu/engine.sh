#!/bin/bash
# The engine at the GPU's pace (issue 48), in one call on one GPU with logical
# ranks, most needed first: what a run costs on both paths (scripts/gpu/run_cost.py,
# the engine-cost document), the neutral one-site rename's `review --run`, timed,
# a change that breaks the driver, reviewed and timed, then the seed faults swept
# on the process-per-run path, then (NIGHTLY=1) the whole nightly sweep on the
# warm workers in what time is left, and the seed faults' verdicts on the two
# paths compared. Every step ends by TOTAL_S (default 570) so the results
# always come back.
# Back: results.tgz (engine-cost, the reviews, the seed sweeps, the compare),
# console.log, cost.tgz, logs.tgz.
source scripts/gpu/common.sh
deadline=$((SECONDS + ${TOTAL_S:-570} - 15))
within() {  # within LIMIT: LIMIT, or what is left before the deadline if less
  local left=$((deadline - SECONDS))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
timeout "$(within ${COST_LIMIT_S:-200})" python3 scripts/gpu/run_cost.py --out /tmp/cost \
  --results-dir "$OUT/results" ${PROFILE:-} \
  --runs-per-slot ${RUNS_PER_SLOT:-3} --worker-runs-per-slot ${WORKER_RUNS_PER_SLOT:-10} \
  --configs bf16-graph 4gpu-f2 fp8-eager \
  --process-slots ${PROCESS_SLOTS:-8} --worker-slots ${WORKER_SLOTS:-1 4 8 16} \
  $([ "${VARIANTS:-}" = none ] || echo --variant ${VARIANTS:-CUDA_MODULE_LOADING=LAZY}) 2>&1 | tee -a "$LOG"
tar czf "$OUT/cost.tgz" -C /tmp cost/profiles cost/workers cost/run-cost.json 2>/dev/null
LIMIT_S=$(within ${REVIEW_LIMIT_S:-240}) SLOTS=${REVIEW_SLOTS:-16} EDIT='153,155s/pending/waiting/g' \
  FILE=afdep/csrc/impls/attention_combine.cuh bash scripts/gpu/review.sh neutral-rename -
# A change that breaks the clean driver (the forced failure's corruption, committed).
LIMIT_S=$(within ${BREAK_LIMIT_S:-120}) SLOTS=${REVIEW_SLOTS:-16} FILE=afdep/csrc/common/dispatch.cuh \
  EDIT='s/^  copy_row<Shape::kPayloadVecs>(reinterpret_cast<int4\*>(row), src, lane_idx);$/&\n  if (token_idx == 3 \&\& lane_idx == 0) reinterpret_cast<int4*>(row)[0] = make_int4(1, 2, 3, 4);/' \
  bash scripts/gpu/review.sh breaks-driver -
# The seed faults on both paths, on this card in this call, and their verdicts compared.
seed() {  # seed NAME [FLAG]: the seed faults swept into results/seed-NAME
  local start=$SECONDS
  timeout "$(within ${SEED_LIMIT_S:-240})" python3 -m faults --rank-mode logical \
    --workdir "/tmp/seed-$1" ${2:-} sweep --only 'P1|P2|P3|P4|P4b|N2|N3|N3b' \
    --config bf16-graph --config fp8-eager --config 4gpu-f2 --slots "${SLOTS:-10}" \
    --results-dir "$OUT/results/seed-$1" >> "$LOG" 2>&1
  echo "seed sweep $1 rc=$? wall=$((SECONDS - start))s" | tee -a "$LOG"
}
seed processes --process-per-run
if [ "${NIGHTLY:-0}" = 1 ]; then  # every fault, every config and its twin, on the workers
  start=$SECONDS left=$((deadline - SECONDS))
  timeout "$left" python3 -m faults --rank-mode logical --workdir /tmp/nightly sweep \
    --slots "${SLOTS:-10}" --budget-s $((left - 45)) --results-dir "$OUT/results/nightly" \
    >> "$LOG" 2>&1
  echo "nightly sweep on workers rc=$? wall=$((SECONDS - start))s" | tee -a "$LOG"
  workers=("$OUT"/results/nightly/sweep-*.json)
else
  seed workers
  workers=("$OUT"/results/seed-workers/sweep-*.json)
fi
python3 -m faults compare --left "$OUT"/results/seed-processes/sweep-*.json \
  --right "${workers[@]}" --out "$OUT/results/compare-seed.md" >> "$LOG" 2>&1
echo "compare rc=$?" | tee -a "$LOG"
pack_logs /tmp/seed-processes /tmp/seed-workers /tmp/nightly /tmp/faults-review-*
tar czf "$OUT/results.tgz" -C "$OUT" results && rm -rf "$OUT/results"
