#!/bin/bash
# compute-sanitizer's four tools over the driver with logical ranks on one GPU,
# eager and graph (each run cut at 90 s, no run started after 300 s).
# Back: results/sanitize-*-logical.{json,md}, console.log, logs.tgz.
source scripts/gpu/common.sh
timeout 420 python3 -m tools.sanitize --budget-s 300 --run-timeout-s 90 \
  --results-dir "$OUT/results" --logs-dir /tmp/sanitize-logs >> "$LOG" 2>&1
echo "sanitize rc=$?" | tee -a "$LOG"
pack_logs /tmp/sanitize-logs
exit 0
