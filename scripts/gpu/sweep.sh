#!/bin/bash
# One shard of the fault sweep: sweep.sh REGEX [CONFIG...] (REGEX matches whole
# fault ids; no CONFIG: every config and its exposure twin that fits). Rank
# mode by the GPUs (RANK_MODE to force), SLOTS runs at a time (default 4),
# SHARD names the shard's folder when one call runs several.
# Shards of one tree merge with `afdep-faults compare`, or by their JSON.
# Back: results/[SHARD/]sweep-*.{json,md,xml}, console.log, logs[-SHARD].tgz.
source scripts/gpu/common.sh
pattern=$1; shift
WORK=/tmp/sweep${SHARD:+-$SHARD}
configs=(); for c in "$@"; do configs+=(--config "$c"); done
timeout "${LIMIT_S:-560}" python3 -m faults --rank-mode "${RANK_MODE:-auto}" \
  --workdir "$WORK" sweep --only "$pattern" "${configs[@]}" --slots "${SLOTS:-4}" \
  --results-dir "$OUT/results/${SHARD:-}" --history /tmp/sweep-history.sqlite >> "$LOG" 2>&1
echo "sweep ${SHARD:-} rc=$?" | tee -a "$LOG"
pack_logs "$WORK"
[ -z "${SHARD:-}" ] || mv "$OUT/logs.tgz" "$OUT/logs-$SHARD.tgz"
exit 0
