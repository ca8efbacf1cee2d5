#!/usr/bin/env bash
# Installs afdep with its test extra on a fresh machine. A machine without
# torch gets the CPU build (a bare `torch` would pull a multi-GB CUDA build);
# a machine that already has torch (a GPU image) keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q -e ".[test]"
# pyenv finds new console scripts (afdep, afdep-faults) only after a rehash.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
