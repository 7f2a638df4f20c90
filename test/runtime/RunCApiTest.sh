#!/usr/bin/env bash
# Makes the plans c_api_test.c needs -- make_tiny_lm.py's model compiled for
# inference and for full fine-tuning -- in a fresh WORK directory, then runs
# the test binary on them.
# Usage: RunCApiTest.sh TAILOR PYTHON SOURCE_DIR TEST_BINARY WORK
set -euo pipefail
tailor=$1 python=$2 source=$3 binary=$4 work=$5
inputs=$source/test/tools/Inputs
rm -rf "$work" && mkdir -p "$work"
"$python" "$inputs/make_tiny_lm.py" "$work/lm.onnx"
"$tailor" compile "$work/lm.onnx" --batch 2 --seq 5 -o "$work/forward.tplan"
"$tailor" compile "$work/lm.onnx" --recipe "$inputs/tiny-lm-full.yaml" \
  gradient_accumulation_steps=1 max_steps=6 -o "$work/train.tplan" > /dev/null
"$binary" "$work/forward.tplan" "$work/train.tplan" "$work"
