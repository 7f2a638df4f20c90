#!/usr/bin/env bash
# demo.sh BUILD_DIR: what `make demo` runs on the bundled example.
#
# Today: export a tiny, randomly initialized Hugging Face Llama with
# torch.onnx (cached in BUILD_DIR/demo), import it with `tailor compile`,
# raise it to transformer-level ops and show what came out: the op counts,
# one decoder layer of the raised graph, and the parameter inventory; plan
# and run the forward pass against PyTorch; then compile a LoRA training
# plan from examples/tiny-llama/lora.yaml and train it on
# examples/data/counting.jsonl, writing a PEFT adapter, and generate with
# the adapter merged into a generation plan.
set -euo pipefail

build=${1:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$build/bin
out=$build/demo
python=$root/.venv/bin/python
mkdir -p "$out"
model=$out/tiny-llama/model.onnx

echo "== tailor --version"
"$bin/tailor" --version

echo
echo "== export a tiny Hugging Face LlamaForCausalLM (2 layers, GQA 4/2 heads) with torch.onnx"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$python" "$root/test/generators/export_hf.py" --family llama \
    --exporter torchscript --opset 17 --external-data -o "$model" | tail -1
else
  echo "(cached) $model"
fi
echo "ONNX nodes: $("$python" -c "import onnx,sys; m=onnx.load(sys.argv[1], load_external_data=False); print(len(m.graph.node))" "$model")"

echo
echo "== tailor compile --compile-to=graph --batch 1 --seq 16"
start=$EPOCHREALTIME
"$bin/tailor" compile "$model" --compile-to=graph --batch 1 --seq 16 -o "$out/graph.mlir"
end=$EPOCHREALTIME
awk -v s="$start" -v e="$end" -v o="$out/graph.mlir" \
  'BEGIN { printf "compiled in %.2f s -> %s\n", e - s, o }'
for op in embedding rms_norm linear rope attention silu; do
  printf '  tg.%-10s %3d\n' "$op" "$(grep -c " = tg\.$op " "$out/graph.mlir")"
done
echo "  shape arithmetic left: $(grep -c ' = arith\.[a-bd-z]' "$out/graph.mlir") ops"

echo
echo "== layer 0 (ops with a module path)"
grep -E ' = tg\.(rms_norm|linear|rope|attention|silu) .*tg.layer = 0 ' "$out/graph.mlir" |
  sed -E 's/^ *(%[0-9]+) = (tg\.[a-z_]+) ([^{]*)\{(.*)\} : .*/\1 = \2 {\4}/' |
  sed -E 's/epsilon = [^,]+, //'

echo
echo "== tailor-opt --tailor-summarize-params"
"$bin/tailor-opt" "$out/graph.mlir" --tailor-summarize-params=largest=3 -o /dev/null

echo
echo "== tailor compile -o tiny-llama.tplan (plan one rank: kernels, lifetimes, arena offsets)"
"$bin/tailor" compile "$model" --batch 2 --seq 8 -o "$out/tiny-llama.tplan"
"$bin/tailor" inspect "$out/tiny-llama.tplan" | sed -n '/^memory:/,/^arenas:/p' | sed '$d'
"$bin/tailor" inspect "$out/tiny-llama.tplan" | sed -n '/^inputs:/,$p'

echo
echo "== tailor-run: the forward pass on the CPU, against PyTorch's logits"
"$python" -c "import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])['input_ids'])" \
  "${model%.onnx}.ref.npz" "$out/input_ids.npy"
"$bin/tailor-run" "$out/tiny-llama.tplan" --input input_ids="$out/input_ids.npy" \
  --output logits="$out/logits.npy"
"$python" -c "
import numpy as np, sys
ref = np.load(sys.argv[1])['logits']; got = np.load(sys.argv[2])
print(f'logits {list(got.shape)}: max |tailor - PyTorch| = {abs(got - ref).max():.2e}')
print('next tokens (tailor): ', got[:, -1].argmax(-1).tolist())
print('next tokens (PyTorch):', ref[:, -1].argmax(-1).tolist())
" "${model%.onnx}.ref.npz" "$out/logits.npy"

echo
echo "== examples/embed: a C program running the plan through the C API"
"$build/bin/tailor-embed-example" "$out/tiny-llama.tplan"

echo
echo "== tailor compile --recipe examples/tiny-llama/lora.yaml (LoRA r=16 on all linear layers, AdamW, cosine)"
"$bin/tailor" compile "$model" --recipe "$root/examples/tiny-llama/lora.yaml" \
  -o "$out/tiny-llama-lora.tplan"
"$bin/tailor" inspect "$out/tiny-llama-lora.tplan" | sed -n '/^memory:/,/^arenas:/p' | sed '$d'

echo
echo "== tailor train on examples/data/counting.jsonl (every 25th step shown)"
rm -rf "$out/lora-run"
"$bin/tailor" train "$out/tiny-llama-lora.tplan" --data "$root/examples/data/counting.jsonl" \
  --output-dir "$out/lora-run" | awk '!/^step/ || /^step +(1|[0-9]*[05]0|[0-9]*25|[0-9]*75)\//'
echo "adapter: $(cd "$out/lora-run" && ls adapter_config.json adapter_model.safetensors | tr '\n' ' ')"
"$python" -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f'loss: step 1 {rows[0][\"loss\"]:.4f} -> step {rows[-1][\"step\"]} {rows[-1][\"loss\"]:.4f}')
" "$out/lora-run/metrics.jsonl"

echo
echo "== tailor generate: the tiny Llama after its LoRA run (KV cache, the adapter merged at load)"
"$bin/tailor" compile "$model" --task generate --max-seq-len 32 -o "$out/tiny-llama-generate.tplan"
generate() {
  "$bin/tailor" generate "$out/tiny-llama-generate.tplan" --max-new-tokens 10 "$@"
}
for prompt in 24,29,34,39 48,49,50,51; do
  echo "prompt $prompt"
  echo "  base model, greedy:        $(generate --prompt-ids "$prompt")"
  echo "  + adapter, greedy:         $(generate --prompt-ids "$prompt" --adapter "$out/lora-run")"
  echo "  + adapter, T 0.1, seed 1:  $(generate --prompt-ids "$prompt" --adapter "$out/lora-run" --temperature 0.1 --seed 1)"
done

echo
echo "== QLoRA: the same recipe with adapter=qlora (NF4 + double quantization of every frozen linear weight)"
"$bin/tailor" compile "$model" --recipe "$root/examples/tiny-llama/lora.yaml" adapter=qlora \
  -o "$out/tiny-llama-qlora.tplan"
"$bin/tailor" inspect "$out/tiny-llama-qlora.tplan" | grep -E "^parameters|quantized|not quantized"
rm -rf "$out/qlora-run"
"$bin/tailor" train "$out/tiny-llama-qlora.tplan" --data "$root/examples/data/counting.jsonl" \
  --output-dir "$out/qlora-run" > "$out/qlora-run.log"
"$python" -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f'qlora loss: step 1 {rows[0][\"loss\"]:.4f} -> step {rows[-1][\"step\"]} {rows[-1][\"loss\"]:.4f}')
" "$out/qlora-run/metrics.jsonl"

echo
echo "== the same LoRA recipe compiled for an H100 (--hardware h100: device arenas, bf16 compute, cubins for sm_90a + PTX)"
if "$bin/tailor" compile "$model" --recipe "$root/examples/tiny-llama/lora.yaml" \
     --hardware h100 -o "$out/tiny-llama-lora-h100.tplan" 2> "$out/h100.err"; then
  ls -l "$out/tiny-llama-lora-h100.tplan" | awk '{print "plan: " $5 " bytes"}'
  "$bin/tailor" inspect "$out/tiny-llama-lora-h100.tplan" |
    grep -E "^target|^device code: (attention|quantized_linear)|^  (parameters|workspace|total) "
  if [ "$("$bin/tailor" devices --count 2>/dev/null || echo 0)" -gt 0 ]; then
    echo "(a GPU is present: test/tools/train-gpu-vs-cpu.test trains this plan on it)"
  else
    echo "(no GPU here: running it says why)"
    "$bin/tailor" train "$out/tiny-llama-lora-h100.tplan" --data "$root/examples/data/counting.jsonl" \
      --output-dir "$out/h100-run" 2>&1 | cut -c1-160 || true
  fi
else
  echo "(skipped: $(cat "$out/h100.err"))"
fi
