#!/usr/bin/env python3
"""Greedy decoding on the CPU: `tailor generate` against transformers'
`generate` (KV cache, do_sample=False) on the same random-init Llama.

The model is a Llama built from a config (no hub access), exported with
torch.onnx's TorchScript exporter by test/generators/export_hf.py with its
sizes overridden (--hidden, --layers, ...), compiled with `tailor compile
--task generate --max-seq-len` twice -- with the prefill entry
(`--prefill-chunk`, default 64: the prompt in ceil(P / C) chunks) and with
`--prefill-chunk 1` (no prefill entry: the prompt runs through the decode
step a token at a time, as plans before the prefill entry do) -- and run by
`tailor generate --json`. Both sides use the same threads. Reported per
side: time to first token (the whole prompt and the first token's choice)
and decode tokens/s (the tokens after the first over their time), median
of --repeats runs; and whether the greedy ids agree.

  generate_cpu.py [--hidden 512 --layers 8 --heads 8 --kv-heads 8
                   --inter 1376 --vocab 32000] [--prompt 32] [--new 64]
                  [--prefill-chunk 64] [--threads 2] [--repeats 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))


def export(args, out):
    import export_hf
    export_hf.HIDDEN, export_hf.LAYERS = args.hidden, args.layers
    export_hf.HEADS, export_hf.KV_HEADS = args.heads, args.kv_heads
    export_hf.INTER, export_hf.VOCAB = args.inter, args.vocab
    export_hf.MAXPOS = max(export_hf.MAXPOS, args.prompt + args.new)
    export_hf.export("llama", "torchscript", 17, out)
    model, _, _ = export_hf.build_model("llama", seed=0)
    model.__class__ = model.__class__.__bases__[0]
    return model.eval()


def transformers_run(model, prompt, new):
    """(ttft seconds, decode tokens/s, ids) of model.generate."""
    import torch
    ids = torch.tensor([prompt])
    with torch.no_grad():
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=1, do_sample=False,
                       pad_token_id=0)
        ttft = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, pad_token_id=0)
        total = time.perf_counter() - start
    return ttft, (new - 1) / max(total - ttft, 1e-9), \
        [int(x) for x in out[0, len(prompt):]]


def tailor_run(tailor, plan, prompt, new, threads):
    proc = subprocess.run(
        [tailor, "generate", plan, "--prompt-ids", ",".join(map(str, prompt)),
         "--max-new-tokens", str(new), "--threads", str(threads), "--json"],
        capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout)
    return (got["time_to_first_token_s"], got["tokens_per_second"],
            got["generated_ids"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", default=os.path.join(ROOT, "build", "bin",
                                                         "tailor"))
    for name, value in (("hidden", 512), ("layers", 8), ("heads", 8),
                        ("kv-heads", 8), ("inter", 1376), ("vocab", 32000),
                        ("prompt", 32), ("new", 64), ("prefill-chunk", 64),
                        ("threads", 2), ("repeats", 3)):
        parser.add_argument("--" + name, type=int, default=value)
    args = parser.parse_args()
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "model.onnx")
        model = export(args, onnx_path)
        plans = {}
        for side, chunk in (("tailor prefill", args.prefill_chunk),
                            ("tailor 1 by 1", 1)):
            plans[side] = os.path.join(work, f"generate{chunk}.tplan")
            subprocess.run([args.tailor, "compile", onnx_path, "--task",
                            "generate", "--max-seq-len",
                            str(args.prompt + args.new), "--prefill-chunk",
                            str(chunk), "--threads", str(args.threads), "-o",
                            plans[side]], check=True, capture_output=True)
        rng = np.random.default_rng(0)
        prompt = [int(x) for x in rng.integers(0, args.vocab, args.prompt)]
        runs = {side: [] for side in (*plans, "transformers")}
        ids = {}
        for _ in range(args.repeats):
            for side in runs:
                if side in plans:
                    r = tailor_run(args.tailor, plans[side], prompt, args.new,
                                   args.threads)
                else:
                    r = transformers_run(model, prompt, args.new)
                runs[side].append(r[:2])
                ids[side] = r[2]
    params = sum(p.numel() for p in model.parameters())
    print(f"llama {params / 1e6:.1f}M parameters (hidden {args.hidden}, "
          f"{args.layers} layers, vocab {args.vocab}), fp32, prompt "
          f"{args.prompt}, {args.new} new tokens, prefill chunk "
          f"{min(args.prefill_chunk, args.prompt + args.new)}, "
          f"{args.threads} threads, median of {args.repeats}, load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'':16s} {'TTFT ms':>9s} {'decode tok/s':>13s}")
    for side, values in runs.items():
        ttft = statistics.median(v[0] for v in values)
        tps = statistics.median(v[1] for v in values)
        print(f"{side:16s} {ttft * 1e3:9.1f} {tps:13.1f}")
    print("greedy ids agree:",
          all(ids[side] == ids["transformers"] for side in plans))


if __name__ == "__main__":
    main()
