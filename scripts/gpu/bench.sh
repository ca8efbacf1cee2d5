#!/bin/bash
# The bench on 2 GPUs: the default arms and ISO (the A/A noise), NCCL, the NCCL
# pipeline and the peer copy at every bucket, traces at 512 and 2048, the
# overlap screen at 1024 and 2048; extra bench options pass through (e.g.
# --arm NEW:tree=DIR). Back: results/bench-*.{json,md}, console.log, logs.tgz and
# timelines.tgz (each traced bucket's SVG and Perfetto JSON: at most 8 files
# come back, so they travel packed; unpack them beside the report).
source scripts/gpu/common.sh
timeout "${LIMIT_S:-560}" python3 -m tools.bench --iso --trace-buckets 2048 \
  --results-dir "$OUT/results" --logs-dir /tmp/bench-logs "$@" >> "$LOG" 2>&1
echo "bench rc=$?" | tee -a "$LOG"
pack_logs /tmp/bench-logs
(cd "$OUT/results" && tar czf "$OUT/timelines.tgz" ./*.svg ./*.trace.json 2>/dev/null \
  && rm -f ./*.svg ./*.trace.json)
exit 0
