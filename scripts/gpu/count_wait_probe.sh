#!/bin/bash
# The count_wait epoch mutant on one H200 with logical ranks, with and without
# its exposing delay (a catalog copy without the rule's `expose`): the engine's
# runs (--repeat 2), then probe-instrumented trees (count_wait_probe.py) run by
# hand under bf16-graph, small and at 2048 tokens. ~2 min.
# Back: count-wait.tgz (run-*.json/txt, probe-*.log, env.txt), console.log.
source scripts/gpu/common.sh
ID=gen.epoch-off-by-one.cf.ffn_place.count_wait
DIR=/tmp/count-wait; mkdir -p $DIR
env | grep -E '^(CUDA|NCCL|AFDEP)' | sort > $DIR/env.txt
sed "/^expose = 'true'$/d" catalogs/afdep.toml > /tmp/noexpose.toml
BASE=(--mode logical --ranks 2 --capacity 2048 --hidden-size 2048 --top-k 8 --num-experts 128
      --num-sms 24 --tokens 8 128 512 --steps 2 --payload bf16 --graph)
for v in expose noexpose; do
  cat=(); [ $v = noexpose ] && cat=(--catalog /tmp/noexpose.toml)
  python3 -m faults "${cat[@]}" --root . --workdir /tmp/cw-run-$v run $ID --repeat 2 \
    --report $DIR/run-$v.json > $DIR/run-$v.txt 2>&1
  echo "run $v rc=$?" | tee -a "$LOG"
  python3 -m faults "${cat[@]}" --root . apply $ID --out /tmp/cw-$v >> "$LOG" 2>&1
  python3 scripts/gpu/count_wait_probe.py /tmp/cw-$v >> "$LOG" 2>&1
  ( cd /tmp/cw-$v && export PYTHONPATH=/tmp/cw-$v:/tmp/site PYTHONSAFEPATH=1 \
      AFDEP_COUNT_FIRST_MIN_BUCKET=1 AFDEP_TIMEOUT_MS=3000
    python3 -m tools.build --hidden 2048 --payload bf16 --view expanded >> "$LOG" 2>&1
    for r in 1 2; do
      timeout 90 python3 -m tools.driver "${BASE[@]}" > $DIR/probe-$v-graph-$r.log 2>&1
    done
    AFDEP_COUNT_FIRST_EPILOGUE_SMS=32 timeout 90 python3 -m tools.driver "${BASE[@]}" \
      --tokens 2048 --steps 4 --num-sms 4 > $DIR/probe-$v-graph2048.log 2>&1 )
done
tar czf "$OUT/count-wait.tgz" -C /tmp count-wait
