#!/bin/bash
# The bug corpus through `review --run` (one bug's review: a few minutes; on
# one GPU with logical ranks unless RANK_MODE=per-gpu). Usage: corpus.sh REGEX
# (whole bug names, e.g. 'b15.*'). Back: results/review-corpus-*.{json,md},
# console.log, logs.tgz.
source scripts/gpu/common.sh
timeout "${LIMIT_S:-560}" python3 -m faults --rank-mode "${RANK_MODE:-logical}" \
  --workdir /tmp/corpus corpus corpus/afdep --run --slots "${SLOTS:-4}" --only "$1" \
  --results-dir "$OUT/results" >> "$LOG" 2>&1
echo "corpus rc=$?" | tee -a "$LOG"
pack_logs /tmp/corpus
exit 0
