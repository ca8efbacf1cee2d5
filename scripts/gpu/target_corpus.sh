#!/bin/bash
# A foreign target's real bugs (a --target-corpus file) through `review --run`,
# one bug per command so that a cut keeps what finished (write_results merges
# into one document), on one GPU with logical ranks. Usage: target_corpus.sh
# CORPUS [REGEX] (whole bug names; all by default). The releases' trees come
# from .targets/trees (carry it: the device has no network).
# Back: results/review-corpus-<target>-*.{json,md}, console.log, logs.tgz.
[ $# -ge 1 ] || { echo "target_corpus.sh: CORPUS [REGEX]"; exit 2; }
corpus=$1 pattern=${2:-.*}
[ -f "$corpus" ] || { echo "target_corpus.sh: no corpus file $corpus"; exit 2; }
bugs=$(python3 -c "import tomllib,sys,re;print(' '.join(b['name'] for b in tomllib.load(open(sys.argv[1],'rb'))['bug'] if re.fullmatch(sys.argv[2],b['name'])))" "$corpus" "$pattern")
[ -n "$bugs" ] || { echo "target_corpus.sh: REGEX '$pattern' names no bug of $corpus"; exit 2; }
[ -d .targets/trees ] || { echo "target_corpus.sh: no .targets/trees (carry it)"; exit 2; }
source scripts/gpu/common.sh
# The committed documents, so that what comes back is merged into them.
cp docs/results/"$(basename "$corpus" .toml)"/review-corpus-*xH200*.json "$OUT/results/" 2>/dev/null
deadline=$((SECONDS + ${LIMIT_S:-560}))
for bug in $bugs; do
  left=$((deadline - SECONDS))
  [ "$left" -gt 30 ] || { echo "target corpus: no time left for $bug" | tee -a "$LOG"; break; }
  timeout "$left" python3 -m faults --rank-mode logical --workdir /tmp/target-corpus \
    corpus --target-corpus "$corpus" --run --slots "${SLOTS:-8}" --only "$bug" \
    --results-dir "$OUT/results" >> "$LOG" 2>&1
  echo "target corpus $bug rc=$? at ${SECONDS}s" | tee -a "$LOG"
done
pack_logs /tmp/target-corpus
exit 0
