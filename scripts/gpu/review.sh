#!/bin/bash
# `review --run` of one change, timed, on one GPU with logical ranks unless
# RANK_MODE=per-gpu. Usage: review.sh NAME PATCH|-  (a corpus patch, or - for
# the edit in $EDIT: a sed script run on the file $FILE). The change is made in
# a shared clone of this copy and committed; the review runs HEAD~1..HEAD there.
# Back: results/review-NAME.{md,sarif}, console.log.
[ $# -eq 2 ] || { echo "review.sh: NAME PATCH|-"; exit 2; }
name=$1 patch=$2
[ "$patch" = - ] || [ -f "$patch" ] || { echo "review.sh: no patch file $patch"; exit 2; }
source scripts/gpu/common.sh
clone=/tmp/review-$name
rm -rf "$clone" && git clone -q --shared "$PWD" "$clone" || exit 1
if [ "$patch" = - ]; then
  sed -i "$EDIT" "$clone/$FILE" && git -C "$clone" commit -qam "$name" || exit 1
else
  git -C "$clone" apply --index "$PWD/$patch" && git -C "$clone" commit -qm "$name" || exit 1
fi
git -C "$clone" show --stat HEAD | tail -3 | tee -a "$LOG"
start=$SECONDS
( cd "$clone" && timeout "${LIMIT_S:-480}" python3 -m faults --rank-mode "${RANK_MODE:-logical}" \
    review HEAD~1 HEAD --run --slots "${SLOTS:-8}" \
    --report "$OUT/results/review-$name.md" --sarif "$OUT/results/review-$name.sarif" ) \
  >> "$LOG" 2>&1  # every progress line, timed: where a slow review's time went
echo "review $name rc=$? wall=$((SECONDS - start))s" | tee -a "$LOG"
