#!/usr/bin/env bash
# Llama-2-70B QLoRA on two 24 GB cards: what fits, proven before launch.
#
#   bench/plan_70b_offload.sh [BUILD_DIR]     (default: build)
#
# The graph: bench/gen_llama7b_onnx.py --preset llama70b --no-packed-mask
# --attn eager (68,976,648,192 parameters, no weight bytes: a sparse data
# file; cached under BUILD_DIR/bench/llama70b, about 5 minutes the first
# time). The recipe: QLoRA (NF4, double quantization) r=16 on every linear
# layer, micro batch 2 x seq 512, gradient checkpointing, AdamW, on
# --hardware 2xrtx3090 (DDP over the two cards). Compiled twice:
#   1. as is: refused, with the bytes by which it exceeds a card;
#   2. with offload_param: cpu: the per-card device peak (inspect --json
#      device_peak_bytes) and the host bytes, under 24 GiB;
#   3. with every offload (parameters, AdamW on the host, the activations
#      gradient checkpointing keeps), the same figures.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
DIR="$BUILD/bench/llama70b"
MODEL="$DIR/llama70b.onnx"
TAILOR="$BUILD/bin/tailor"
if [[ ! -f "$MODEL" ]]; then
  mkdir -p "$DIR"
  "$PY" "$ROOT/bench/gen_llama7b_onnx.py" --preset llama70b --no-packed-mask \
    --attn eager -o "$DIR" | tail -1 || exit 1
fi
RECIPE="$DIR/qlora-2x3090.yaml"
cat > "$RECIPE" <<'YAML'
adapter: qlora
lora_r: 16
lora_alpha: 32
lora_target_modules: all-linear
tie_word_embeddings: never
mixed_precision: bf16
sequence_len: 512
micro_batch_size: 2
gradient_accumulation_steps: 1
gradient_checkpointing: true
optimizer: adamw
learning_rate: 2.0e-4
max_steps: 100
YAML
echo "== without offload (expected: refused)"
start=$EPOCHREALTIME
if "$TAILOR" compile "$MODEL" --recipe "$RECIPE" --hardware 2xrtx3090 \
    -o "$DIR/plain.tplan"; then
  echo "plan_70b_offload: error: the plan without offload fit a 24 GB card" >&2
  exit 1
fi
echo "== with offload_param: cpu"
"$TAILOR" compile "$MODEL" --recipe "$RECIPE" --hardware 2xrtx3090 \
  offload_param=cpu -o "$DIR/offload.tplan" || exit 1
awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { printf "(both compiles: %.1f s)\n", e - s }'
"$TAILOR" inspect "$DIR/offload.tplan" | sed -n '/^memory:/,/^entries:/p'
"$TAILOR" inspect "$DIR/offload.tplan" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
r = d["ranks"][0]
gib = 2 ** 30
device, host, ranks = r["device_peak_bytes"], r["host_peak_bytes"], len(d["ranks"])
print(f"per GPU: device peak {device / gib:.2f} GiB (rtx3090: 24 GiB), "
      f"host {host / gib:.2f} GiB (pinned, per rank), {ranks} ranks")
sys.exit(0 if r["device_peak_bytes"] <= 24 * gib else 1)' || exit 1
echo "== with offload_param: cpu, offload_optimizer: cpu, enable_activation_offloading"
"$TAILOR" compile "$MODEL" --recipe "$RECIPE" --hardware 2xrtx3090 \
  offload_param=cpu offload_optimizer=cpu enable_activation_offloading=true \
  -o "$DIR/offload-all.tplan" || exit 1
"$TAILOR" inspect "$DIR/offload-all.tplan" | grep -E '^(predicted step|offload):'
"$TAILOR" inspect "$DIR/offload-all.tplan" --json | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["ranks"][0]
gib = 2 ** 30
device, host = r["device_peak_bytes"], r["host_peak_bytes"]
print(f"per GPU: device peak {device / gib:.2f} GiB, host {host / gib:.2f} "
      f"GiB (pinned, per rank)")
sys.exit(0 if device <= 24 * gib else 1)'
