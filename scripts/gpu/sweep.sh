#!/bin/bash
# One shard of the fault sweep: sweep.sh REGEX [CONFIG...] (REGEX matches whole
# fault ids; no CONFIG: every config and its exposure twin that fits). Rank
# mode by the GPUs (RANK_MODE to force), SLOTS runs at a time (default 4).
# Shards of one tree merge with `afdep-faults compare`, or by their JSON.
# Back: results/sweep-*.{json,md,xml}, console.log, logs.tgz.
source scripts/gpu/common.sh
pattern=$1; shift
configs=(); for c in "$@"; do configs+=(--config "$c"); done
timeout "${LIMIT_S:-560}" python3 -m faults --rank-mode "${RANK_MODE:-auto}" \
  --workdir /tmp/sweep sweep --only "$pattern" "${configs[@]}" --slots "${SLOTS:-4}" \
  --results-dir "$OUT/results" --history /tmp/sweep-history.sqlite >> "$LOG" 2>&1
echo "sweep rc=$?" | tee -a "$LOG"
pack_logs /tmp/sweep
exit 0
