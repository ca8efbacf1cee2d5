#!/bin/bash
# One shard of the fault sweep: sweep.sh REGEX [CONFIG...] (REGEX matches whole
# fault ids; no CONFIG: every config and its exposure twin that fits). Rank
# mode by the GPUs (RANK_MODE to force), SLOTS runs at a time (default 4),
# SHARD names the shard's folder when one call runs several. No fault starts
# after BUDGET_S (default LIMIT_S - 120: a run's 90 s outer timeout and the
# report), and the report names those left for the next shard.
# Shards of one tree merge into one report with `afdep-faults merge` (no GPU).
# REST_OF=REPORT (no REGEX, no CONFIG): the faults that shard's budget left,
# under its configs (sweep --rest-of; a report under docs/results/ travels with the tree).
# Back: results/[SHARD/]sweep-*.{json,md,xml}, console.log, logs[-SHARD].tgz.
if [ -n "${REST_OF:-}" ]; then
  [ $# -eq 0 ] || { echo "sweep.sh: REST_OF=$REST_OF chooses faults and configs; no REGEX or CONFIG"; exit 2; }
  select=(--rest-of "$REST_OF")
else
  [ $# -ge 1 ] || { echo "sweep.sh: REGEX [CONFIG...], or REST_OF=REPORT"; exit 2; }
  select=(--only "$1"); shift
fi
configs=(); for c in "$@"; do configs+=(--config "$c"); done
source scripts/gpu/common.sh
WORK=/tmp/sweep${SHARD:+-$SHARD}
LIMIT_S=${LIMIT_S:-560}
timeout "$LIMIT_S" python3 -m faults --rank-mode "${RANK_MODE:-auto}" \
  --workdir "$WORK" sweep "${select[@]}" "${configs[@]}" --slots "${SLOTS:-4}" \
  --budget-s "${BUDGET_S:-$((LIMIT_S - 120))}" \
  --results-dir "$OUT/results/${SHARD:-}" --history /tmp/sweep-history.sqlite >> "$LOG" 2>&1
echo "sweep ${SHARD:-} rc=$?" | tee -a "$LOG"
pack_logs "$WORK"
[ -z "${SHARD:-}" ] || mv "$OUT/logs.tgz" "$OUT/logs-$SHARD.tgz"
exit 0
