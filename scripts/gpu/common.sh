# Sourced by every script here: run on a lent GPU machine from the repository
# root through the device tool (`OUT` is the folder whose files come back: at
# most 8, two folders deep, so logs go into one tarball). Wheels the machine
# lacks (gitpython, gitdb, smmap) travel in .whl/ (carry it).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/results"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 AFDEP_JIT_CACHE=${AFDEP_JIT_CACHE:-/tmp/jit}
# The review and the corpus need a git repository whose HEAD is this copy: the
# device copy has none, and a warm machine may keep an earlier call's.
export GIT_AUTHOR_NAME=afdep GIT_AUTHOR_EMAIL=afdep@localhost
export GIT_COMMITTER_NAME=afdep GIT_COMMITTER_EMAIL=afdep@localhost
[ -d .git ] || git init -q
git add -A && git commit -q --allow-empty -m "device copy"
LOG="$OUT/console.log"
nvidia-smi -L >> "$LOG" 2>&1
python3 -m tools.build >> "$LOG" 2>&1 || { echo "tools.build failed"; tail -20 "$LOG"; exit 1; }

# pack_logs DIR...: every log under DIR (none over 2 MB) into $OUT/${LOGS_TGZ:-logs.tgz}
pack_logs() {
  find "$@" -name '*.log' -size -2M -not -path '*/tree/*' 2>/dev/null |
    tar czf "$OUT/${LOGS_TGZ:-logs.tgz}" -T - 2>/dev/null
}
