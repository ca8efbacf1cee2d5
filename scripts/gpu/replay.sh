#!/bin/bash
# Seeded schedules on one H200 with logical ranks: the 8 scheduled faults
# (P1s/P5s must pass, N2s/N5s must fail; .uneven and .pct) with --seeds 4
# under bf16-graph, then `replay` of one KILLED run id from the sweep's JSON.
# ~6-7 min (the sweep cut at 400 s, the replay at 90 s).
# Back: results/sweep-*-logical.{json,md,xml}, replay.{json,md}, console.log, logs.tgz.
source scripts/gpu/common.sh
FAULTS=(--rank-mode logical --no-generated)
timeout "${SWEEP_S:-400}" python3 -m faults "${FAULTS[@]}" --workdir /tmp/sched-sweep sweep \
  --only "${ONLY:-(P1s|P5s|N2s|N5s)\.(uneven|pct)}" --config bf16-graph --no-exposure \
  --seeds "${SEEDS:-4}" --seed-base 0 --slots 4 --results-dir "$OUT/results" \
  --history /tmp/sched-history.sqlite >> "$LOG" 2>&1
echo "sweep rc=$?" | tee -a "$LOG"
JSON=$(ls "$OUT"/results/sweep-*-logical.json 2>/dev/null | head -1)
RUN=$(python3 - "${JSON:-}" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"] if sys.argv[1] else []
seeded = [r for r in results if r.get("seed") is not None]
killed = [r for r in seeded if r["verdict"] == "KILLED"] or seeded
print(f"{killed[0]['fault']}@{killed[0]['config']}#{killed[0]['repeat']}" if killed else "")
PY
)
echo "replaying ${RUN:-nothing} from ${JSON:-no report}" | tee -a "$LOG"
if [ -n "$RUN" ]; then
  timeout 90 python3 -m faults "${FAULTS[@]}" --workdir /tmp/sched-replay replay "$RUN" \
    --from "$JSON" --out "$OUT/replay" >> "$LOG" 2>&1
  echo "replay rc=$?" | tee -a "$LOG"
fi
pack_logs /tmp/sched-sweep /tmp/sched-replay
exit 0
