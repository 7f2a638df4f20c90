#!/usr/bin/env bash
# Makes what generate_api_test.c needs in a fresh WORK directory -- the
# tiny Hugging Face llama exported with torch.onnx and compiled for
# generation (max_seq_len 16; with a prefill entry of 3-token chunks, and
# without one) and as a forward plan, a 256-token byte-level
# BPE trained with `tokenizers`, and the ids transformers and tokenizers
# give -- then runs the test binary on them.
# Usage: RunGenerateApiTest.sh TAILOR PYTHON SOURCE_DIR TEST_BINARY WORK
set -euo pipefail
tailor=$1 python=$2 source=$3 binary=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
"$python" "$source/test/generators/export_hf.py" --family llama \
  --exporter torchscript --opset 17 -o "$work/model.onnx" > /dev/null
"$tailor" compile "$work/model.onnx" --task generate --max-seq-len 16 \
  --prefill-chunk 3 -o "$work/generate.tplan" 2> /dev/null
"$tailor" compile "$work/model.onnx" --task generate --max-seq-len 16 \
  --prefill-chunk 1 -o "$work/decode-only.tplan" 2> /dev/null
"$tailor" compile "$work/model.onnx" --batch 1 --seq 4 \
  -o "$work/forward.tplan" 2> /dev/null
"$python" - "$source" "$work" <<'PY'
import os, sys
source, work = sys.argv[1:]
sys.path.insert(0, os.path.join(source, "test", "generators"))
sys.path.insert(0, os.path.join(source, "test", "e2e"))
import torch
import export_hf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
model, _, _ = export_hf.build_model("llama", seed=0)
model.__class__ = model.__class__.__bases__[0]
with torch.no_grad():
    out = model.eval().generate(torch.tensor([[5, 17, 42, 7]]),
                                max_new_tokens=8, do_sample=False,
                                eos_token_id=None, pad_token_id=0)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(["Hi there"], trainers.BpeTrainer(
    vocab_size=256, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False))
tok.save(os.path.join(work, "tokenizer.json"))
with open(os.path.join(work, "expected.txt"), "w") as f:
    f.write(" ".join(str(int(x)) for x in out[0, 4:]) + "\n")
    f.write(" ".join(map(str, tok.encode("Hi there").ids)) + "\n")
PY
"$binary" "$work/generate.tplan" "$work/decode-only.tplan" "$work/forward.tplan" \
  "$work/tokenizer.json" "$work/expected.txt"
