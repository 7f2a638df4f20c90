#!/usr/bin/env bash
# How fast `tailor explore` searches, on the 7B- and 70B-shaped graphs
# (no weight bytes: bench/gen_llama7b_onnx.py's sparse exports, made on
# first use, cached under BUILD_DIR/bench/).
#
#   bench/explore_rate.sh [BUILD_DIR] [FIX ...]     (default: build)
#
# For each graph and cluster it runs `tailor explore --json` with a QLoRA
# recipe (r=16 on every linear layer, seq 512) and prints configurations
# evaluated, seconds and configurations per second, the number that fit
# and the best row. Every configuration is compiled by compile's own
# pipeline with 2 and 3 layers and extended to the model's depth, then what
# explore reports is compiled whole (on --jobs workers, the machine's
# cores); FIX arguments (--fix key=value ...) narrow the space.
#   7B  on 2xrtx3090, global batch 16 (micro batch x accumulation x 2)
#   7B  on t4 (one 16 GB card, sm_75: fp16 with loss scaling), global
#       batch 8
#   70B on 2x8xh100, global batch 64 (hybrid sharding joins the space: two
#       nodes)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
shift $(( $# > 0 ? 1 : 0 ))
FIX=("$@")
PY="${PYTHON:-$ROOT/.venv/bin/python}"
TAILOR="$BUILD/bin/tailor"
OUT="$BUILD/bench/explore"
mkdir -p "$OUT"

graph() { # PRESET DIR: the eager-attention export (micro batches > 1 work)
  local preset=$1 dir=$2
  if [[ ! -f "$dir/$preset.onnx" ]]; then
    mkdir -p "$dir"
    "$PY" "$ROOT/bench/gen_llama7b_onnx.py" --preset "$preset" \
      --no-packed-mask --attn eager -o "$dir" | tail -1 >&2 || exit 1
  fi
  # Only the path on stdout: the caller captures it.
  echo "$dir/$preset.onnx"
}

cat > "$OUT/qlora.yaml" <<'YAML'
adapter: qlora
lora_r: 16
lora_alpha: 32
lora_target_modules: all-linear
sequence_len: 512
micro_batch_size: 1
gradient_accumulation_steps: 1
YAML
# The T4 has no bf16 tensor cores: the same recipe in fp16.
{ cat "$OUT/qlora.yaml"; echo "fp16: true"; } > "$OUT/qlora-fp16.yaml"

run() { # NAME MODEL HARDWARE GLOBAL_BATCH [FIX...]   (env RECIPE: another recipe)
  local name=$1 model=$2 hardware=$3 global=$4
  shift 4
  "$TAILOR" explore "$model" --recipe "${RECIPE:-$OUT/qlora.yaml}" --hardware "$hardware" \
    --global-batch "$global" --json --plot "$OUT/$name.svg" "$@" "${FIX[@]}" \
    > "$OUT/$name.json" 2> "$OUT/$name.log" || true
  "$PY" - "$OUT/$name.json" "$name" "$hardware" <<'PY'
import json, sys
path, name, hardware = sys.argv[1:]
try:
    doc = json.load(open(path))
except ValueError:
    print(f"{name}: no result (see {path[:-5]}.log)")
    sys.exit(0)
rate = doc["evaluated"] / doc["seconds"] if doc["seconds"] else 0
print(f"{name} on {hardware}: {doc['evaluated']} configurations in "
      f"{doc['seconds']:.1f} s ({rate:.1f}/s), {doc['fitting']} fit")
if doc["rows"]:
    best = doc["rows"][0]
    print(f"  best: {best['knobs']}, {best['device_peak_bytes'] / 2**30:.2f} GiB "
          f"per rank, {best['predicted_step_seconds'] * 1e3:.1f} ms a step, "
          f"{best['predicted_tokens_per_second']:.0f} tokens/s")
PY
}

M7=$(graph llama7b "$BUILD/bench/llama7b-eager")
run 7b-2x3090 "$M7" 2xrtx3090 16
RECIPE="$OUT/qlora-fp16.yaml" run 7b-t4 "$M7" t4 8
M70=$(graph llama70b "$BUILD/bench/llama70b")
run 70b-2x8xh100 "$M70" 2x8xh100 64
