#!/usr/bin/env bash
# Compile time, peak RSS and planned memory of LoRA training plans at long
# context, for the demo's tiny Llama and the 32-layer Llama-2-7B graph.
#
#   bench/long_context_compile.sh [BUILD_DIR] [SEQ ...]   (default 32768 131072)
#
# Causal masks are never materialized (frontends/onnx/LazyTensor.h): compile
# time and memory grow linearly with the sequence, as do the plan's
# activation and constant (rotary table) bytes. Models are generated on
# first use: BUILD_DIR/bench/tiny-llama/model.onnx by
# test/generators/export_hf.py (seconds), BUILD_DIR/bench/llama7b/ by
# bench/gen_llama7b_onnx.py (about a minute, a sparse 25 GiB data file).
# Prints one line per model and length:
#   MODEL seq N: compile X.XX s, peak RSS Y MiB, activations A GiB, constants C MiB, total T GiB
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(cd "${1:-$ROOT/build}" && pwd)"
shift || true
SEQS=("$@")
if [[ ${#SEQS[@]} -eq 0 ]]; then
  SEQS=(32768 131072)
fi
TAILOR="$BUILD_DIR/bin/tailor"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
RECIPE="$ROOT/examples/tiny-llama/lora.yaml"
OUT="$BUILD_DIR/bench/long-context"
mkdir -p "$OUT"

TINY="$BUILD_DIR/bench/tiny-llama/model.onnx"
if [[ ! -f "$TINY" ]]; then
  mkdir -p "$(dirname "$TINY")"
  "$PY" "$ROOT/test/generators/export_hf.py" --family llama \
    --exporter torchscript --opset 17 --external-data -o "$TINY" >/dev/null
fi
BIG="$BUILD_DIR/bench/llama7b/llama7b.onnx"
if [[ ! -f "$BIG" ]]; then
  "$PY" "$ROOT/bench/gen_llama7b_onnx.py" -o "$(dirname "$BIG")"
fi

for entry in "tiny:$TINY" "7b:$BIG"; do
  name=${entry%%:*}
  model=${entry#*:}
  for seq in "${SEQS[@]}"; do
    plan="$OUT/$name-$seq.tplan"
    stats=$( { /usr/bin/time -f "%e %M" "$TAILOR" compile "$model" \
      --recipe "$RECIPE" "sequence_len=$seq" micro_batch_size=1 \
      -o "$plan" >/dev/null; } 2>&1 | tail -1)
    read -r seconds kib <<<"$stats"
    "$TAILOR" inspect "$plan" --json >"$plan.json"
    "$PY" - "$plan.json" "$name" "$seq" "$seconds" "$kib" <<'EOF'
import json, sys
path, name, seq, seconds, kib = sys.argv[1:]
plan = json.load(open(path))
memory = plan["memory"]
gib = 1 << 30
print(f"{name} seq {seq}: compile {float(seconds):.2f} s, peak RSS {int(kib) / 1024:.0f} MiB, "
      f"activations {memory['activations'] / gib:.2f} GiB, "
      f"constants {memory['constants'] / (1 << 20):.1f} MiB, total {memory['total'] / gib:.2f} GiB")
EOF
  done
done
