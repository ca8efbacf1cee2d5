#!/bin/bash
# Shrinking on one H200 with logical ranks: N2 under its exposure twin and two
# generated must-fail faults killed in the small runs, each with --write-test,
# then the written regression tests (each must be KILLED at its minimal input).
# ~7.5 min expected, <= 9 (budgets 130 + 100 + 100 s, each cut at budget + 50 s).
# Back: results/shrink-*-logical.{json,md}, console.log, logs.tgz (with tests/regress).
source scripts/gpu/common.sh
shrink() {  # FAULT CONFIG BUDGET_S
  local t0; t0=$(date +%s)
  timeout $(( $3 + 50 )) python3 -m faults --rank-mode logical --workdir "/tmp/shrink-$1" \
    shrink "$1" --config "$2" --budget-s "$3" --results-dir "$OUT/results" --write-test \
    >> "$LOG" 2>&1
  echo "== $1 under $2: rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
}
# Arguments: FAULT CONFIG BUDGET_S triples (default: N2 and two generated faults).
[ $# -ge 3 ] || set -- N2 bf16-graph@2048 130 gen.skip.cf.ffn_place.count_wait bf16-graph 100 \
  gen.epoch-off-by-one.cb.attention_combine.row_wait bf16-graph 100
while [ $# -ge 3 ]; do shrink "$1" "$2" "$3"; shift 3; done
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/regress >> "$LOG" 2>&1
echo "== regression tests: rc=$?" | tee -a "$LOG"
{ find /tmp/shrink-* -name '*.log' -size -2M; ls tests/regress/shrunk/*.json; } 2>/dev/null \
  | tar czf "$OUT/logs.tgz" -T - 2>/dev/null  # the logs and the written cases
exit 0
