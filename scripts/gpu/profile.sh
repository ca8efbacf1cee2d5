#!/bin/bash
# Where one micro-bench's kernel spends its time, by Nsight Compute:
# profile.sh BENCH [ARG...] (BENCH: combine, dispatch or expand; each ARG goes
# to tools.bench.BENCH, e.g. `profile.sh dispatch --tokens 2048 --protocol
# count-first`). The bench's first launch of its kernel (the checked eager
# step's) is profiled with the full section set; the kernels carry line info,
# so the source counters say which line the warps stall on and why. ncu
# serializes every launch: a kernel that waits on one launched after it (ARM=
# attention's prefix wait) times out naming its site, so profile the
# payload-first or plain count-first dispatch. Back: results/BENCH.ncu-rep
# (Nsight Compute opens it), results/BENCH-details.txt (the bench report's
# head: machine, rank mode, source digests; then speed of light, memory, warp
# states, launch), results/BENCH-source.csv (samples and stall
# reasons per SASS instruction), console.log. The clocks are left as they
# are (--clock-control none), as the benches see them. TAG=WORD names them BENCH-WORD
# instead, so one call can profile several sizes. KERNEL=NAME profiles another
# kernel the bench launches (combine: attention_combine; dispatch:
# attention_route) instead of its first. No ncu: it says so and stops.
case "${1:-}" in
  combine | dispatch | expand) bench=$1; shift ;;
  *) echo "profile.sh: BENCH is combine, dispatch or expand, got '${1:-}'"; exit 2 ;;
esac
kernels=$(case $bench in combine) echo ffn_combine attention_combine ;;
  dispatch) echo attention_dispatch attention_route ;; expand) echo ffn_expand ;; esac)
kernel=${KERNEL:-${kernels%% *}}
case " $kernels " in
  *" $kernel "*) ;;
  *) echo "profile.sh: KERNEL=$kernel is not a kernel of the $bench bench ($kernels)"; exit 2 ;;
esac
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "profile.sh: no ncu here (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"; exit 3; }
source scripts/gpu/common.sh
REPORT="$OUT/results/$bench${TAG:+-$TAG}"
rm -rf /tmp/profile  # an earlier call's report must not head this one's details
timeout "${LIMIT_S:-300}" "$NCU" --clock-control none --set full --import-source yes --kernel-name "regex:${kernel}_impl" \
  --launch-count 1 -f -o "$REPORT" \
  python3 -m tools.bench.$bench --iters 1 --warmup 0 --reps 1 --results-dir /tmp/profile "$@" \
  >> "$LOG" 2>&1
echo "ncu $bench rc=$?" | tee -a "$LOG"
[ -f "$REPORT.ncu-rep" ] || { echo "no report: see console.log"; exit 1; }
# The details page opens with the bench report's head: what ran, on which
# machine, and each tree's source digest.
{ grep -E '^# |^- tree ' /tmp/profile/"$bench"-*.md 2>/dev/null
  "$NCU" --import "$REPORT.ncu-rep" --page details; } > "$REPORT-details.txt" 2>&1
"$NCU" --import "$REPORT.ncu-rep" --page source --csv --print-source sass > "$REPORT-source.csv" 2>&1
echo "details rc=$? $(wc -l < "$REPORT-details.txt") lines; source $(wc -l < "$REPORT-source.csv") lines" | tee -a "$LOG"
exit 0
