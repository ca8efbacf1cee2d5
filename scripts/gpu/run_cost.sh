#!/bin/bash
# What one fault-engine run costs on this machine, alone and N at a time
# (scripts/gpu/run_cost.py), to tell which bound holds the review's runs a
# second: process start, the driver's steps, CPU or GPU. ~4 min.
# Back: run-cost.json, run-cost.txt, cost.tgz (logs, cProfile, importtime), console.log.
source scripts/gpu/common.sh
python3 scripts/gpu/run_cost.py --out /tmp/cost "$@" 2>&1 | tee -a "$LOG"
cp /tmp/cost/run-cost.json /tmp/cost/run-cost.txt "$OUT/" 2>/dev/null
tar czf "$OUT/cost.tgz" -C /tmp cost/profiles cost/logs 2>/dev/null
exit 0
