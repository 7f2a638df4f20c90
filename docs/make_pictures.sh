#!/usr/bin/env bash
# make_pictures.sh BUILD_DIR: regenerates the timeline pictures the README shows.
#
# The tiny Llama of examples/demo.sh (exported into BUILD_DIR/demo if not
# there yet), fully fine-tuned with ZeRO-3 over two CPU ranks with
# overlap_comm (parameter gathers and gradient reduce-scatters on the comm
# stream, in buckets of at most 0.1 MiB so there are several), one thread a
# rank. Writes
#   docs/timeline-predicted.svg  `tailor inspect --trace`: rank 0's predicted step
#   docs/timeline-measured.svg   `tailor train --trace` under mpirun: rank 0's
#                                first two measured steps
# drawn by scripts/trace_to_svg.py; the traces stay in BUILD_DIR/pictures.
# The measured picture is one run on the machine at hand: its times change
# from run to run.
set -euo pipefail

build=${1:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$build/bin
out=$build/pictures
python=$root/.venv/bin/python
model=$build/demo/tiny-llama/model.onnx
mkdir -p "$out"

if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$python" "$root/test/generators/export_hf.py" --family llama \
    --exporter torchscript --opset 17 --external-data -o "$model" | tail -1
fi

recipe=(--recipe "$root/examples/tiny-llama/lora.yaml" adapter=full zero_stage=3
        overlap_comm=true ddp_bucket_cap_mb=0.1)
"$bin/tailor" compile "$model" "${recipe[@]}" --hardware 2xcpu --threads 1 \
  -o "$out/zero3.tplan"
"$bin/tailor" inspect "$out/zero3.tplan" --trace "$out/predicted.json" |
  grep -E '^(predicted step|communication|overlap):'

mpi=(mpirun --oversubscribe -np 2)
if [ "$(id -u)" = 0 ]; then
  mpi+=(--allow-run-as-root)
fi
rm -rf "$out/run"
"${mpi[@]}" "$bin/tailor" train "$out/zero3.tplan" \
  --data "$root/examples/data/counting.jsonl" --max-steps 3 --output-dir "$out/run" \
  --trace "$out/measured.json" --trace-steps 2 | grep -E '^step'

what="tiny Llama, full fine-tuning, ZeRO-3 over 2 CPU ranks, overlap_comm"
"$python" "$root/scripts/trace_to_svg.py" "$out/predicted.json" \
  --title "Predicted step: $what" -o "$root/docs/timeline-predicted.svg"
"$python" "$root/scripts/trace_to_svg.py" "$out/measured.json" \
  --title "Measured steps 1 and 2: $what" -o "$root/docs/timeline-measured.svg"
echo "wrote $root/docs/timeline-predicted.svg and $root/docs/timeline-measured.svg"
