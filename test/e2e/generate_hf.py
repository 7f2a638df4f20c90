#!/usr/bin/env python3
"""`tailor generate` against transformers' greedy `generate`.

For each family (tiny random-init Hugging Face models exported by
torch.onnx's TorchScript exporter, opset 17, fp32; the exports hf_common
caches), compiles a generation plan (`tailor compile --task generate
--max-seq-len 64`) and checks that:
  - `tailor generate --prompt-ids ... --max-new-tokens 20 --json` gives the
    ids `model.generate(input_ids, max_new_tokens=20, do_sample=False)`
    gives, token for token, for several prompts (the model's config.json
    beside the model gives both the same eos id);
  - the logits after the prompt's last decode step (the plan's decode entry
    run once per prompt token through the Python binding) match the
    model's last-position logits to 1e-4;
  - a prompt longer than the cache, an id outside the vocabulary and a
    forward (non-generation) plan are refused with exit code 1.

  generate_hf.py --tailor build/bin/tailor --cache build/test/hf-exports \
      --runtime-lib build/lib/libtailor_runtime.so [--families llama,gpt2]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from hf_common import cache_key, case_name, export_case  # noqa: E402

MAX_SEQ_LEN = 64
NEW_TOKENS = 20
ATOL = 1e-4


def hf_model(family, sidecar):
    """The exported model in PyTorch, as a Hugging Face causal LM again."""
    import export_hf
    model, _, _ = export_hf.build_model(
        family, seed=0, attn_implementation=sidecar.get("attn_implementation"))
    # build_model swaps in a logits-only subclass; generate needs the real one.
    model.__class__ = model.__class__.__bases__[0]
    return model.eval()


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_family(args, family, work):
    import numpy as np
    import torch
    import tailor

    out_dir = os.path.join(args.cache, cache_key(),
                           case_name(family, "torchscript", 17, False))
    model_path, err = export_case((family, "torchscript", 17, False, out_dir))
    if err:
        return [f"{family}: export failed: {err[-500:]}"]
    sidecar = json.load(open(os.path.join(out_dir, "model.json")))
    model = hf_model(family, sidecar)
    vocab = model.config.vocab_size
    eos = model.generation_config.eos_token_id
    # The model and its config.json side by side, as tailor reads them.
    family_dir = os.path.join(work, family)
    os.makedirs(family_dir)
    onnx_path = os.path.join(family_dir, "model.onnx")
    shutil.copy(model_path, onnx_path)
    model.config.to_json_file(os.path.join(family_dir, "config.json"))
    plan = os.path.join(family_dir, "generate.tplan")
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN), "-o", plan])
    if proc.returncode != 0:
        return [f"{family}: compile failed: {proc.stderr[-1500:]}"]

    failures = []
    rng = np.random.default_rng(22)
    prompts = [[int(x) for x in rng.integers(0, vocab, n)] for n in (1, 5, 12)]
    for prompt in prompts:
        with torch.no_grad():
            want = model.generate(torch.tensor([prompt]),
                                  max_new_tokens=NEW_TOKENS, do_sample=False,
                                  pad_token_id=eos if eos is not None else 0)
        want = [int(x) for x in want[0, len(prompt):]]
        proc = run([args.tailor, "generate", plan, "--prompt-ids",
                    ",".join(map(str, prompt)), "--max-new-tokens",
                    str(NEW_TOKENS), "--json"])
        if proc.returncode != 0:
            failures.append(f"{family}: generate failed: {proc.stderr[-800:]}")
            continue
        got = json.loads(proc.stdout)
        if got["prompt_ids"] != prompt or got["generated_ids"] != want:
            failures.append(f"{family}: prompt {prompt}: tailor "
                            f"{got['generated_ids']} != transformers {want}")
        else:
            print(f"{family}: prompt of {len(prompt)}: {len(want)} ids equal "
                  f"(ttft {got['time_to_first_token_s'] * 1e3:.1f} ms, "
                  f"{got['tokens_per_second']:.0f} tokens/s)")

    # The first decode step's logits: the prompt run token by token.
    prompt = prompts[-1]
    session = tailor.InferenceSession(plan)
    for i, token in enumerate(prompt):
        session.set_input("input_ids", np.array([[token]], dtype=np.int64))
        session.set_input("position", np.array(i, dtype=np.int64))
        session.run_entry("decode")
    got = session.output("logits").reshape(-1)
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0, -1].numpy()
    diff = float(np.max(np.abs(got - want)))
    print(f"{family}: last-step logits max |diff| {diff:.2e}")
    if not diff <= ATOL:
        failures.append(f"{family}: logits differ by {diff:.2e} > {ATOL}")

    # Refusals, each exit 1 with a message.
    too_long = ",".join(["1"] * (MAX_SEQ_LEN + 1))
    for ids, expect in ((too_long, "KV cache holds"),
                        (f"1,{vocab}", "outside the vocabulary")):
        proc = run([args.tailor, "generate", plan, "--prompt-ids", ids])
        if proc.returncode != 1 or expect not in proc.stderr:
            failures.append(f"{family}: --prompt-ids {ids[:20]}...: expected "
                            f"exit 1 with '{expect}', got "
                            f"{proc.returncode}: {proc.stderr[-300:]}")
    return failures


def check_forward_plan_refused(args, work):
    """A plan that is not a generation plan is refused."""
    llama = os.path.join(work, "llama", "model.onnx")
    if not os.path.exists(llama):
        return []
    plan = os.path.join(work, "forward.tplan")
    proc = run([args.tailor, "compile", llama, "--batch", "1", "--seq", "8",
                "-o", plan])
    if proc.returncode != 0:
        return [f"forward compile failed: {proc.stderr[-500:]}"]
    proc = run([args.tailor, "generate", plan, "--prompt-ids", "1,2"])
    if proc.returncode != 1 or "not a generation plan" not in proc.stderr:
        return [f"forward plan: expected exit 1 'not a generation plan', got "
                f"{proc.returncode}: {proc.stderr[-300:]}"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--runtime-lib", required=True)
    parser.add_argument("--families", default="llama,mistral,qwen2,gpt2")
    args = parser.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.runtime_lib
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for family in args.families.split(","):
            failures += check_family(args, family, work)
        failures += check_forward_plan_refused(args, work)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("generate_hf: all checks passed")


if __name__ == "__main__":
    main()
