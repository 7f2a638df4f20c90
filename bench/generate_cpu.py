#!/usr/bin/env python3
"""Greedy decoding on the CPU per weight format: `tailor generate` against
transformers' `generate` (KV cache, do_sample=False) on the same random-init
Llama.

The model is a Llama built from a config (no hub access), its nn.Linear
weights rounded to fp16 values (as test/e2e/generate_quantized.py does, so
bitsandbytes, which quantizes an fp16 copy of the weight, and tailor, which
quantizes the exported fp32 one, start from the same numbers), exported with
torch.onnx's TorchScript exporter by test/generators/export_hf.py with its
sizes overridden (--hidden, --layers, ...). For each of --formats it is
compiled with `tailor compile --task generate --max-seq-len (longest prompt
+ new) --recipe R.yaml` (fp32: no recipe; bf16: `quantization: bf16`; int8:
`load_in_8bit: true`; nf4: `load_in_4bit: true` with double quant; gptq:
`quantization: gptq` on a checkpoint `tailor quantize --scheme gptq`
writes, 4 bits, group 128, calibrated on random token ids) with the prefill
entry (`--prefill-chunk`, default 64: the prompt in ceil(P / C) chunks); for
fp32 also with `--prefill-chunk 1` (no prefill entry: the prompt runs
through the decode step a token at a time, as plans before the prefill
entry do). Every linear weight but lm_head takes the format; embeddings
and lm_head stay fp32. The plans run under `tailor generate --json`.

transformers runs the matching format where it can on the CPU: fp32; bf16
as `model.to(torch.bfloat16)` (every tensor and all arithmetic in bf16,
where tailor keeps bf16 weights and computes in fp32, so the ids may
differ); bitsandbytes `load_in_8bit` (LLM.int8: its CPU path also
quantizes the activations, so the ids may differ) and `load_in_4bit` NF4
with double quant and fp32 compute (the same codes as tailor's, so the ids
should agree, unless bitsandbytes' CPU dequantize_4bit reads them back
otherwise: in 0.50.2 it does for rows that are not whole 64-blocks, such
as down_proj's 1376, and the script names such layers). transformers loads
GPTQ checkpoints only through gptqmodel, so gptq is tailor's alone unless
that is installed. Each quantized format is also checked against its exact
reference, the fp32 model carrying the format's weights as tailor computes
with them (bf16-rounded; bnb's dequantized Int8Params; bnb's NF4 codes
dequantized over the flattened weight; the checkpoint's dequantized GPTQ
weights): those ids must agree.

Both sides use the same threads. Reported per format and prompt length:
time to first token (the whole prompt and the first token's choice) and
decode tokens/s (the tokens after the first over their time), both from
one call (`tailor generate --json`'s own figures; a streamer noting when
generate hands out each token), median of --repeats runs, the sides
interleaved; and whether the greedy ids agree.

  generate_cpu.py [--hidden 512 --layers 8 --heads 8 --kv-heads 8
                   --inter 1376 --vocab 32000] [--prompt 32[,200...]]
                  [--new 64] [--prefill-chunk 64] [--threads 2]
                  [--repeats 3] [--formats fp32,bf16,int8,nf4,gptq]
"""

import argparse
import copy
import gc
import importlib.util
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

FORMATS = ("fp32", "bf16", "int8", "nf4", "gptq")
RECIPES = {
    "bf16": "quantization: bf16\n",
    "int8": "load_in_8bit: true\n",
    "nf4": "load_in_4bit: true\nbnb_4bit_use_double_quant: true\n",
    "gptq": "quantization: gptq\ngptq_checkpoint: {checkpoint}\n",
}
GPTQ_BITS, GPTQ_SAMPLES, GPTQ_SEQ = 4, 16, 128


def export(args, work):
    """(fp32 model, save_pretrained directory, onnx path)."""
    import export_hf
    import generate_quantized
    export_hf.HIDDEN, export_hf.LAYERS = args.hidden, args.layers
    export_hf.HEADS, export_hf.KV_HEADS = args.heads, args.kv_heads
    export_hf.INTER, export_hf.VOCAB = args.inter, args.vocab
    export_hf.MAXPOS = max(export_hf.MAXPOS, max(args.prompt) + args.new)
    model, hf_dir, onnx_path = generate_quantized.export_rounded("llama", work)
    # Without config.json beside the model the plan has no eos id, and
    # transformers is told none either: both always make --new tokens.
    os.remove(os.path.join(os.path.dirname(onnx_path), "config.json"))
    return model, hf_dir, onnx_path


class Clock:
    """A generate streamer that notes when each token comes: put() gets
    the prompt, then every generated token as it is chosen."""

    def __init__(self):
        self.times = []

    def put(self, _):
        self.times.append(time.perf_counter())

    def end(self):
        pass


def greedy_ids(model, prompt, new, streamer=None):
    import torch
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model.generate(torch.tensor([prompt]), max_new_tokens=new,
                             do_sample=False, eos_token_id=None,
                             pad_token_id=0, streamer=streamer)
    return [int(x) for x in out[0, len(prompt):]]


def transformers_run(model, prompt, new):
    """(ttft seconds, decode tokens/s, ids) of one model.generate, timed
    from the call to each token as `tailor generate` times itself."""
    clock = Clock()
    start = time.perf_counter()
    ids = greedy_ids(model, prompt, new, clock)
    first, last = clock.times[1], clock.times[-1]
    return first - start, (new - 1) / max(last - first, 1e-9), ids


def tailor_run(tailor, plan, prompt, new, threads):
    proc = subprocess.run(
        [tailor, "generate", plan, "--prompt-ids", ",".join(map(str, prompt)),
         "--max-new-tokens", str(new), "--threads", str(threads), "--json"],
        capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout)
    return (got["time_to_first_token_s"], got["tokens_per_second"],
            got["generated_ids"])


def gptq_checkpoint(args, onnx_path, work):
    """`tailor quantize --scheme gptq` on random calibration ids: (path,
    seconds)."""
    import numpy as np
    rng = np.random.default_rng(1)
    data = os.path.join(work, "calib.jsonl")
    with open(data, "w") as f:
        for _ in range(GPTQ_SAMPLES):
            ids = rng.integers(0, args.vocab, GPTQ_SEQ).tolist()
            f.write(json.dumps({"input_ids": ids}) + "\n")
    os.makedirs(os.path.join(work, "gptq"))
    path = os.path.join(work, "gptq", "model.safetensors")
    start = time.perf_counter()
    subprocess.run([args.tailor, "quantize", onnx_path, "--scheme", "gptq",
                    "--calib", data, "--samples", str(GPTQ_SAMPLES), "--seq",
                    str(GPTQ_SEQ), "--bits", str(GPTQ_BITS), "-o", path,
                    "--threads", str(args.threads)],
                   check=True, capture_output=True)
    return path, time.perf_counter() - start


def compile_plans(args, onnx_path, fmt, work, checkpoint):
    """{side: plan path}: the prefill plan, and for fp32 the 1 by 1 one."""
    extra = []
    if fmt in RECIPES:
        recipe = os.path.join(work, fmt + ".yaml")
        with open(recipe, "w") as f:
            f.write(RECIPES[fmt].format(checkpoint=checkpoint))
        extra = ["--recipe", recipe]
    chunks = {"tailor prefill": args.prefill_chunk}
    if fmt == "fp32":
        chunks["tailor 1 by 1"] = 1
    plans = {}
    for side, chunk in chunks.items():
        plans[side] = os.path.join(work, f"{fmt}-generate{chunk}.tplan")
        proc = subprocess.run(
            [args.tailor, "compile", onnx_path, "--task", "generate",
             "--max-seq-len", str(max(args.prompt) + args.new),
             "--prefill-chunk", str(chunk), "--threads", str(args.threads),
             "-o", plans[side], *extra], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{fmt}: tailor compile failed: {proc.stderr[-1500:]}")
    return plans


def linear_copy(model, weight_of):
    """A copy of float `model` whose linear weights but lm_head are
    weight_of(name, module)."""
    import torch
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, module in out.named_modules():
            if isinstance(module, torch.nn.Linear) and name != "lm_head":
                module.weight.copy_(weight_of(name, module))
    return out


def nf4_weight_only(model, quantized):
    """(A copy of float `model` whose linear weights are `quantized`'s NF4
    codes dequantized over the flattened weight, blocks of 64 running on
    across rows as bitsandbytes quantizes them (and its CUDA kernels and
    tailor read them); the layers whose weights bitsandbytes' own CPU
    dequantize_4bit, which the bnb model computes with, makes otherwise)."""
    import torch
    from bitsandbytes import functional
    modules = dict(quantized.named_modules())
    wrong = []

    def weight_of(name, module):
        param = modules[name].weight
        state = copy.copy(param.quant_state)
        state.shape = torch.Size([1, module.weight.numel()])
        flat = functional.dequantize_4bit(param.data, state)
        flat = flat.reshape(module.weight.shape)
        if not torch.equal(flat, functional.dequantize_4bit(
                param.data, param.quant_state)):
            wrong.append(f"{name} (in {module.in_features})")
        return flat

    return linear_copy(model, weight_of), wrong


def references(fmt, model, hf_dir, checkpoint):
    """(transformers model timed or None, why not, exact reference or None
    when the timed model is one, whether the timed model's ids are expected
    to equal tailor's, and why)."""
    import torch
    import generate_quantized
    if fmt == "fp32":
        return model, "", None, True, "the same fp32 model"
    if fmt == "bf16":
        exact = linear_copy(model, lambda _, m: m.weight.bfloat16().float())
        return (copy.deepcopy(model).to(torch.bfloat16).eval(), "", exact,
                False, "model.to(bfloat16) computes in bf16, tailor in fp32 "
                "on bf16 weights")
    if fmt == "gptq":
        import gptq_quantize
        from safetensors.numpy import load_file
        tensors = load_file(checkpoint)
        exact = linear_copy(model, lambda name, m: torch.from_numpy(
            gptq_quantize.dequantize(tensors, name, GPTQ_BITS,
                                     *m.weight.shape)))
        missing = [m for m in ("gptqmodel", "optimum")
                   if importlib.util.find_spec(m) is None]
        why = (f"transformers loads GPTQ checkpoints through gptqmodel and "
               f"optimum; {' and '.join(missing)} not installed" if missing
               else "this benchmark does not drive gptqmodel")
        return None, why, exact, False, ""
    exact, wrong = None, []
    try:
        bnb = generate_quantized.bnb_model(hf_dir, fmt)
        # Before any forward: the first moves the Int8Params' scales into
        # the layer's state.
        if fmt == "int8":
            exact, _ = generate_quantized.int8_weight_only(model, bnb)
        else:
            exact, wrong = nf4_weight_only(model, bnb)
        greedy_ids(bnb, [1, 2, 3], 2)
    except Exception as e:  # any failure of bitsandbytes' CPU backend
        return None, f"bitsandbytes {fmt} failed on this CPU: {e}", exact, \
            False, ""
    if fmt == "int8":
        return bnb, "", exact, False, ("bitsandbytes' CPU LLM.int8 also "
                                       "quantizes the activations (fp16, "
                                       "then int8 per row)")
    if wrong:
        return bnb, "", exact, False, (
            f"bitsandbytes' CPU dequantize_4bit, which its CPU matmul "
            f"uses, does not read back the weights its quantize_4bit "
            f"blocked over the flattened weight on {len(wrong)} layers, "
            f"e.g. {wrong[0]}")
    return bnb, "", exact, True, ("bitsandbytes NF4, double quant, fp32 "
                                  "compute: tailor's codes")


def agreement(got, want):
    """'yes', or where the ids part."""
    if got == want:
        return "yes"
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                 min(len(got), len(want)))
    return f"no@{first}"


def parameter_mib(tailor, plan):
    out = subprocess.run([tailor, "inspect", plan], capture_output=True,
                         text=True).stdout
    found = re.search(r"^\s*parameters\s+(\d+) B", out, re.M) or \
        re.search(r"^parameters: \d+ tensors, (\d+) B", out, re.M)
    return int(found.group(1)) / 2**20 if found else float("nan")


def bench_format(args, fmt, model, hf_dir, onnx_path, work, prompts, notes):
    """Table rows of one format, one per prompt."""
    checkpoint = None
    if fmt == "gptq":
        checkpoint, seconds = gptq_checkpoint(args, onnx_path, work)
        notes.append(f"gptq: `tailor quantize --scheme gptq --bits "
                     f"{GPTQ_BITS}` (group 128, {GPTQ_SAMPLES} x {GPTQ_SEQ} "
                     f"random calibration ids) took {seconds:.1f} s")
    plans = compile_plans(args, onnx_path, fmt, work, checkpoint)
    timed, why, exact, expected, reason = references(fmt, model, hf_dir,
                                                     checkpoint)
    mib = parameter_mib(args.tailor, plans["tailor prefill"])
    if timed is None:
        notes.append(f"{fmt}: transformers not run: {why}")
    else:
        notes.append(f"{fmt}: transformers ids expected to agree: "
                     f"{'yes' if expected else 'no'} ({reason})")
    rows = []
    for prompt in prompts:
        sides = list(plans) + (["transformers"] if timed is not None else [])
        runs = {side: [] for side in sides}
        ids = {}
        for _ in range(args.repeats):
            for side in sides:
                if side in plans:
                    r = tailor_run(args.tailor, plans[side], prompt, args.new,
                                   args.threads)
                else:
                    r = transformers_run(timed, prompt, args.new)
                runs[side].append(r[:2])
                ids[side] = r[2]
        medians = {side: (statistics.median(v[0] for v in values),
                          statistics.median(v[1] for v in values))
                   for side, values in runs.items()}
        ours = ids["tailor prefill"]
        if any(ids[side] != ours for side in plans):
            notes.append(f"{fmt} prompt {len(prompt)}: the 1 by 1 plan's ids "
                         f"differ from the prefill plan's")
        vs_hf = agreement(ours, ids["transformers"]) if timed is not None \
            else "-"
        vs_exact = agreement(ours, greedy_ids(exact, prompt, args.new)) \
            if exact is not None else vs_hf
        rows.append((fmt, len(prompt), mib, medians, vs_hf,
                     ("yes" if expected else "no") if timed is not None
                     else "-", vs_exact))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", default=os.path.join(ROOT, "build", "bin",
                                                         "tailor"))
    for name, value in (("hidden", 512), ("layers", 8), ("heads", 8),
                        ("kv-heads", 8), ("inter", 1376), ("vocab", 32000),
                        ("new", 64), ("prefill-chunk", 64), ("threads", 2),
                        ("repeats", 3)):
        parser.add_argument("--" + name, type=int, default=value)
    parser.add_argument("--prompt", default="32",
                        help="prompt lengths, comma-separated")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="weight formats, comma-separated")
    args = parser.parse_args()
    args.prompt = [int(p) for p in args.prompt.split(",")]
    formats = args.formats.split(",")
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        parser.error(f"unknown formats {unknown} (expected {FORMATS})")
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    # LLM.int8 says on every call that it casts its inputs to fp16.
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    load = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    prompts = [[int(x) for x in rng.integers(0, args.vocab, n)]
               for n in args.prompt]
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as work:
        model, hf_dir, onnx_path = export(args, work)
        for fmt in formats:
            rows += bench_format(args, fmt, model, hf_dir, onnx_path, work,
                                 prompts, notes)
            gc.collect()
    params = sum(p.numel() for p in model.parameters())
    chunk = min(args.prefill_chunk, max(args.prompt) + args.new)
    print(f"llama {params / 1e6:.1f}M parameters (hidden {args.hidden}, "
          f"{args.layers} layers, vocab {args.vocab}), {args.new} new "
          f"tokens, prefill chunk {chunk}, max seq len "
          f"{max(args.prompt) + args.new}, {args.threads} threads, median of "
          f"{args.repeats}, load {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    sides = ("tailor prefill", "tailor 1 by 1", "transformers")
    print(f"{'':20s}" + "".join(f"{s:>21s}" for s in sides))
    print(f"{'format':6s} {'prompt':>6s} {'MiB':>6s}" +
          f"{'TTFT ms':>12s} {'tok/s':>8s}" * len(sides) +
          f" {'ids=hf':>7s} {'expect':>6s} {'=exact':>6s}")
    for fmt, prompt, mib, medians, vs_hf, expected, vs_exact in rows:
        cells = ""
        for side in sides:
            if side in medians:
                ttft, tps = medians[side]
                cells += f"{ttft * 1e3:12.1f} {tps:8.1f}"
            else:
                cells += f"{'-':>12s} {'-':>8s}"
        print(f"{fmt:6s} {prompt:6d} {mib:6.1f}{cells} {vs_hf:>7s} "
              f"{expected:>6s} {vs_exact:>6s}")
    print("MiB: the plan's parameter bytes (tailor inspect). ids=hf: tailor's "
          "greedy ids equal transformers' (no@k: from token k); expect: "
          "whether they should; =exact: equal to the fp32 model carrying "
          "the format's weights as tailor computes with them")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
