#!/bin/bash
# A kernel branch on one H200 (logical ranks) before it merges: the validation
# GROUP (default correctness; `all` for the whole matrix), then ffn_combine,
# attention_dispatch and ffn_expand alone, the base tree, a copy of it (the A/A
# arm: the noise floor) and this one, each checked bitwise first. The base tree travels
# ignored: before the call,
#   mkdir -p tmp_device/base && git archive main afdep/csrc | tar -x -C tmp_device/base
# and carry ["tmp_device", ".whl"]. BASE_TREE=none benches this tree and its
# A/A copy only (a base whose kernel names differ cannot run here).
# VARIANTS="DIR..." benches those kernel trees too, after the base, its copy
# and this one, in the same run (other branches' csrc, archived the same way
# under tmp_device/). JOBS validation runs at a time (default 4).
# PRIOR=a validate document of this tree (e.g. the branch's committed one, or
# the one an earlier call brought back), named as validate writes it
# (validate-<machine>[-<mode>].json), is copied into results first and
# validate runs with --resume: only the selected runs it lacks (validate
# accumulates the runs of one digest in the file of its name). ONLY=REGEX
# narrows the selection. BENCH_S=0: no bench; VALIDATE_S=0: no validation
# (the benches alone).
# Back: results/validate-*.json, results/benches.tgz (the {combine,dispatch,expand}-*
# .json and .md), console.log, logs.tgz.
case "$(basename "${PRIOR:-validate-.json}")" in
  validate-*.json) ;;
  *) echo "PRIOR=$PRIOR: validate reads only a validate-*.json of its own name"; exit 2 ;;
esac
[ -z "${PRIOR:-}" ] || [ -f "$PRIOR" ] || { echo "PRIOR=$PRIOR: no such file"; exit 2; }
BASE=${BASE_TREE:-tmp_device/base/afdep/csrc}
[ "${BENCH_S:-120}" = 0 ] || [ "$BASE" = none ] || [ -d "$BASE/impls" ] \
  || { echo "no base tree at $BASE (see the header; BASE_TREE=none, or BENCH_S=0 for no bench)"; exit 2; }
VARIANT_TREES=()
for variant in ${VARIANTS:-}; do
  [ -d "$variant/impls" ] || { echo "VARIANTS: no kernel tree at $variant (no impls/ folder)"; exit 2; }
  VARIANT_TREES+=(--tree "$variant")
done
source scripts/gpu/common.sh
[ -z "${PRIOR:-}" ] || cp "$PRIOR" "$OUT/results/" || exit 1
SELECT=()
[ "${1:-correctness}" = all ] || SELECT=(--select "${1:-correctness}")
[ -z "${ONLY:-}" ] || SELECT+=(--only "$ONLY")
[ -z "${PRIOR:-}" ] || SELECT+=(--resume)
if [ "${VALIDATE_S:-300}" != 0 ]; then
  timeout "${VALIDATE_S:-300}" python3 -m tools.validate --rank-mode logical "${SELECT[@]}" \
    --jobs "${JOBS:-4}" --results-dir "$OUT/results" --logs-dir /tmp/validate-kernels >> "$LOG" 2>&1
  echo "validate rc=$?" | tee -a "$LOG"
fi
[ "${BENCH_S:-120}" != 0 ] || { pack_logs /tmp/validate-kernels; exit 0; }
ISO=/tmp/kernels-iso/csrc
TREES=(--tree "$BASE" --tree "$ISO")
[ "$BASE" != none ] || { BASE=afdep/csrc; TREES=(--tree "$ISO"); }
rm -rf "$ISO" && mkdir -p "$(dirname "$ISO")" && cp -r "$BASE" "$ISO"
BENCHES=/tmp/kernels-benches && rm -rf "$BENCHES" && mkdir -p "$BENCHES"
for bench in combine dispatch expand; do
  extra=(); [ $bench != dispatch ] || extra=(--protocol payload-first --protocol count-first)
  timeout "${BENCH_S:-120}" python3 -m tools.bench.$bench "${TREES[@]}" --tree afdep/csrc \
    "${VARIANT_TREES[@]}" "${extra[@]}" --results-dir "$BENCHES" >> "$LOG" 2>&1
  echo "bench.$bench rc=$?" | tee -a "$LOG"
done
tar czf "$OUT/results/benches.tgz" -C "$BENCHES" .  # six reports in one file (eight come back)
pack_logs /tmp/validate-kernels
exit 0
