#!/usr/bin/env bash
# CPU QLoRA against CPU LoRA on the same ~100M-parameter Llama in one run:
# tailor train with fp32 frozen weights (lora) and with NF4 + double-quantized
# frozen weights (qlora: every linear weight but lm_head), LoRA r=8 on
# q_proj, v_proj for both, then PyTorch + PEFT (fp32) for reference.
#
#   bench/cpu_qlora_100m.sh [ARGS...]     e.g. --seq 256 --threads 2 --steps 6
#
# Ends with one line: "train 134M LoRA r=8 (...): tailor X ms/step, peak Y MiB;
# tailor qlora X ms/step, peak Y MiB; PyTorch+PEFT X ms/step, peak Y MiB".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/bench/cpu_train_100m.sh" --variants lora,qlora "$@"
