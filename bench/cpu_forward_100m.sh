#!/usr/bin/env bash
# Times a ~100M-parameter Llama forward pass on the CPU: tailor-run vs PyTorch.
#
#   bench/cpu_forward_100m.sh [ARGS...]     e.g. --batch 1 --seq 256 --threads 2
#
# Runs bench/cpu_forward_100m.py (see its --help) from the repository with the
# bootstrap venv (PYTHON overrides it); the export is cached in
# build/bench/cpu_forward_100m/ (BUILD_DIR overrides build/). Ends with one
# line: "forward 134M (B=1,T=256, 2 threads): tailor X ms, PyTorch Y ms, ratio R (best of 5)".
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY=python3
fi
cd "$ROOT"
exec "$PY" "$ROOT/bench/cpu_forward_100m.py" --build "$BUILD_DIR" "$@"
