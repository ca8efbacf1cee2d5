#!/bin/bash
# A foreign target on the device, logical ranks on one GPU: its harness clean
# under every config, then its sweep. Usage: target.sh CATALOG WS [REGEX]
# (WS: a workspace `python3 -m tools.targets.fetch` made here; carry it, the
# device has no network). Back: results/<target>/sweep-*.{json,md,xml},
# console.log, logs-<target>.tgz.
[ $# -ge 2 ] || { echo "target.sh: CATALOG WS [REGEX]"; exit 2; }
catalog=$1 ws=$(realpath "$2") only=${3:-.*}
[ -f "$catalog" ] || { echo "target.sh: no catalog $catalog"; exit 2; }
[ -d "$ws/.git" ] || { echo "target.sh: $ws is no fetched workspace (no .git)"; exit 2; }
source scripts/gpu/common.sh
name=$(basename "$catalog" .toml)
sources=$(python3 -c "import tomllib,sys;print(tomllib.load(open(sys.argv[1],'rb'))['target']['sources'])" "$catalog")
# Logical ranks where the catalog has them; a one-GPU target (CUB's scan: its
# blocks synchronize, no ranks) runs as it is.
mode=$(python3 -c "import tomllib,sys;print('logical' if 'logical' in tomllib.load(open(sys.argv[1],'rb'))['target'] else 'per-gpu')" "$catalog")
python3 -m faults --root "$ws" --catalog "$PWD/$catalog" --rank-mode "$mode" \
  sites --check "$ws/$sources" >> "$LOG" 2>&1
echo "sites --check rc=$?" | tee -a "$LOG"
WORK=/tmp/target-$name
timeout "${LIMIT_S:-420}" python3 -m faults --root "$ws" --catalog "$PWD/$catalog" \
  --rank-mode "$mode" --workdir "$WORK" sweep --only "$only" --slots "${SLOTS:-4}" \
  --budget-s "${BUDGET_S:-300}" --results-dir "$OUT/results/$name" >> "$LOG" 2>&1
echo "sweep $name rc=$?" | tee -a "$LOG"
LOGS_TGZ="logs-$name.tgz" pack_logs "$WORK"
exit 0
