#!/usr/bin/env bash
# Times LoRA training steps of a ~100M-parameter Llama on the CPU: tailor
# train vs PyTorch + PEFT, each in its own process.
#
#   bench/cpu_train_100m.sh [ARGS...]     e.g. --batch 1 --seq 256 --threads 2 --steps 6
#
# Runs bench/cpu_train_100m.py (see its --help) from the repository with the
# bootstrap venv (PYTHON overrides it); the export is shared with
# cpu_forward_100m in build/bench/cpu_forward_100m/ and the run's files go to
# build/bench/cpu_train_100m/ (BUILD_DIR overrides build/). Ends with one
# line: "train 134M LoRA r=8 (B=1,T=256, 2 threads): tailor X ms/step, peak Y MiB;
# PyTorch+PEFT X ms/step, peak Y MiB".
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
exec "$PY" "$ROOT/bench/cpu_train_100m.py" --build "$BUILD_DIR" "$@"
