#!/bin/bash
# The bug corpus through `review --run`, one bug per command so that a cut
# keeps what finished (write_results merges into one document); on one GPU
# with logical ranks unless RANK_MODE=per-gpu. Usage: corpus.sh REGEX...
# (whole bug names, e.g. 'b15.*'; the bugs run in the order of the REGEXes).
# Back: results/review-corpus-*.{json,md}, console.log, logs.tgz.
[ $# -ge 1 ] || { echo "corpus.sh: REGEX... (whole bug names, e.g. 'b15.*')"; exit 2; }
for pattern in "$@"; do  # each names a bug, before any work
  found=0; for patch in corpus/afdep/*.patch; do
    [[ $(basename "$patch" .patch) =~ ^($pattern)$ ]] && found=1
  done
  [ $found = 1 ] || { echo "corpus.sh: REGEX '$pattern' names no bug of corpus/afdep"; exit 2; }
done
source scripts/gpu/common.sh
# The committed documents, so that what comes back is merged into them.
cp docs/results/review-corpus-*xH200*.json "$OUT/results/" 2>/dev/null
deadline=$((SECONDS + ${LIMIT_S:-560}))
for pattern in "$@"; do for patch in corpus/afdep/*.patch; do
  bug=$(basename "$patch" .patch)
  [[ $bug =~ ^($pattern)$ ]] || continue
  left=$((deadline - SECONDS))
  [ "$left" -gt 30 ] || { echo "corpus: no time left for $bug" | tee -a "$LOG"; break 2; }
  timeout "$left" python3 -m faults --rank-mode "${RANK_MODE:-logical}" --workdir /tmp/corpus \
    corpus corpus/afdep --run --slots "${SLOTS:-4}" --only "$bug" \
    --results-dir "$OUT/results" >> "$LOG" 2>&1
  echo "corpus $bug rc=$? at ${SECONDS}s" | tee -a "$LOG"
done; done
pack_logs /tmp/corpus
exit 0
