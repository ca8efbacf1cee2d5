#!/bin/bash
# What the fault engine's runs cost on this machine on both paths, a process
# per run and the warm workers (scripts/gpu/run_cost.py; its options pass
# through: --profile, --worker-slots, --variant ...). ~2-4 min.
# Back: results/engine-cost-<machine>-logical.{json,md}, run-cost.json, cost.tgz
# (profiles, worker logs), console.log.
source scripts/gpu/common.sh
python3 scripts/gpu/run_cost.py --out /tmp/cost --results-dir "$OUT/results" "$@" 2>&1 \
  | tee -a "$LOG"
cp /tmp/cost/run-cost.json "$OUT/" 2>/dev/null
tar czf "$OUT/cost.tgz" -C /tmp cost/profiles cost/workers 2>/dev/null
exit 0
