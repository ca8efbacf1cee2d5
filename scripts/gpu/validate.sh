#!/bin/bash
# afdep validate, one or more groups (correctness failures count-first four-gpu
# split-knobs), 4 runs at a time; RANK_MODE=logical on one GPU (auto picks it).
# A previous shard's JSON placed in $PREV (a folder in the repository, carried)
# is copied in first, so runs of the same tree accumulate in one document.
# Times on 1xH200 (logical): correctness 90 s, failures 120 s, count-first
# ~200 s, four-gpu ~230 s. Back: results/validate-*.json, console.log, logs.tgz.
[ $# -ge 1 ] || { echo "validate.sh: GROUP... (correctness failures count-first four-gpu split-knobs)"; exit 2; }
source scripts/gpu/common.sh
[ -n "${PREV:-}" ] && cp "$PREV"/validate-*.json "$OUT/results/" 2>/dev/null
for group in "$@"; do
  timeout "${LIMIT_S:-280}" python3 -m tools.validate --rank-mode "${RANK_MODE:-auto}" \
    --select "$group" --jobs 4 --results-dir "$OUT/results" \
    --logs-dir "/tmp/validate-$group" >> "$LOG" 2>&1
  echo "validate $group rc=$?" | tee -a "$LOG"
done
pack_logs /tmp/validate-*
exit 0
