#!/usr/bin/env python3
"""`tailor generate` with NF4 and int8 weights against bitsandbytes on the
CPU, and with bf16 and GPTQ weights against transformers.

Tiny random Llama and Qwen2 (hidden 64, 2 layers, vocab 256, the models of
the HF test matrix) have their nn.Linear weights rounded to fp16 values
(so bitsandbytes' Linear8bitLt, which quantizes the fp16 weight, and tailor,
which quantizes the exported fp32 one, start from the same numbers), are
exported by torch.onnx's TorchScript exporter (opset 17) and compiled with
`tailor compile --task generate --max-seq-len 64 --prefill-chunk 8
--recipe R.yaml` (the prompt runs through the prefill entry in chunks of
8, the tail padded):

NF4 (`load_in_4bit: true`, `bnb_4bit_use_double_quant: true`): the reference
is transformers' `from_pretrained(..., quantization_config=
BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=float32))` on the
CPU: every linear layer but lm_head is a bnb Linear4bit, computing with
bitsandbytes' dequantization of its NF4 codes in fp32. tailor quantizes the
same weights to the same codes (ctest -R e2e.nf4_bitsandbytes checks them
bit for bit) and dequantizes them on use, so:
  - greedy ids of `tailor generate` equal the bnb model's `generate` token
    for token (4 prompts of 1, 5, 12 and 8 tokens, 20 new tokens each:
    shorter than, equal to and longer than a prefill chunk);
  - the logits after the prompt match the bnb model's last-position
    logits to NF4_ATOL = 1e-4 (fp32 summation order only), both through
    the prefill entry and through decode run a token at a time.

int8 (`load_in_8bit: true`): bitsandbytes' CPU inference path for
Linear8bitLt (MatMul8bitLt in eval mode) is LLM.int8: it also quantizes the
*activations* (cast to fp16, int8 per row, int8 matmul, rescaled), which
tailor does not (its int8 is weight-only: W' = CB * SCB / 127, the
activations stay fp32). So two references:
  - weight-only: the float model with every linear weight replaced by
    bitsandbytes' own dequantization of its Int8Params (CB * SCB / 127, as
    `int8_vectorwise_dequant` computes it). Greedy ids must be equal, and
    the logits after the prompt within INT8_ATOL = 1e-6: the bound codes
    and scales are bnb's CB and SCB bit for bit (ctest -R
    e2e.int8_bitsandbytes) and dequantize with bnb's roundings, so what
    is left is fp32 summation order (1.5e-7 seen, as for NF4). One code
    off by one is far above that: when tailor's row multiplier was the
    correctly rounded 127 / absmax instead of bnb's (1 / absmax) * 127,
    12 of 73728 codes differed and the logits sat 1.5e-4 (qwen2) to
    2.2e-4 (llama) away, v_proj alone 2.1e-4, gate_proj 7e-5, up_proj
    1.5e-6;
  - LLM.int8 itself (the bnb model's forward): its logits differ from the
    weight-only reference by its activation quantization; tailor must be no
    further from it than the weight-only reference is plus INT8_ATOL, and
    the greedy ids must agree up to the first step where LLM.int8's top-two
    logit margin is below twice that distance (after that, activation
    rounding may legitimately flip the argmax). Both figures are printed.

bf16 (`quantization: bf16` in the recipe): tailor stores every linear
weight but lm_head (those tailor-quantize selects; embeddings, norms and
biases stay fp32) as bf16, rounded to nearest even as torch's
`.to(torch.bfloat16)` does, and computes in fp32. The reference is
transformers' `generate` on the float model with those weights rounded to
bf16 and back: greedy ids equal, logits after the prompt (token by token
and through prefill) within BF16_ATOL = 1e-6, and the rounding must move
the fp32 model's logits by more than ten times that (so a plan that kept
fp32 weights, or rounded other tensors, would fail); `tailor inspect`
counts as many bf16 tensors as the reference rounds.

GPTQ: `tailor quantize --scheme gptq` (4 bits, groups of 32, act-order,
32 calibration sequences of 16 random tokens) writes an AutoGPTQ
checkpoint, and `--task generate quantization=gptq gptq_checkpoint=...`
(key=value overrides) binds it. The reference is transformers on the
float model whose linear weights are the checkpoint's, dequantized by
gptq_quantize.py's own unpacking of AutoGPTQ's layout (which also checks
the layout): ids equal, logits within GPTQ_ATOL = 1e-6 (the dequantization
scale * (q - zero) is one fp32 product on both sides), the same
distance-from-fp32 and inspect-count checks.

Also checked: `tailor inspect` shows parameter bytes nf4 < int8 < fp32; a
PEFT LoRA adapter (q_proj, v_proj, non-zero lora_B) bound at compile time
on the NF4 plan (kept unmerged, LoRA weights in f32) generates the ids of
PEFT on the bnb NF4 model, and on the int8 plan those of PEFT on the
weight-only int8 reference; `tailor generate --adapter` on the plain NF4
and int8 plans is refused (merging would change the quantized weights); a
recipe asking for what a generation plan cannot do (zero_stage) is refused
and training keys (optimizer, lora_r) are ignored with a note naming them.

  generate_quantized.py --tailor build/bin/tailor \
      --runtime-lib build/lib/libtailor_runtime.so [--families llama,qwen2]
"""

import argparse
import contextlib
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

MAX_SEQ_LEN = 64
NEW_TOKENS = 20
NF4_ATOL = 1e-4
INT8_ATOL = 1e-6
# bf16 and GPTQ weights dequantize exactly (a bf16 is a float's upper half;
# GPTQ's scale * (q - zero) is one fp32 product, as the reference computes
# it), so what is left is fp32 summation order, as for int8.
BF16_ATOL = 1e-6
GPTQ_ATOL = 1e-6
# GPTQ: 4 bits, groups of 32 columns, act-order (g_idx not c / 32), on 32
# calibration sequences of 16 random tokens.
GPTQ_FLAGS = ("--bits", "4", "--group-size", "32", "--act-order",
              "--samples", "32", "--seq", "16")
# 8 last: the prompts before it are those the test always drew.
PROMPT_LENGTHS = (1, 5, 12, 8)
PREFILL_CHUNK = 8
RECIPES = {
    "nf4": "load_in_4bit: true\nbnb_4bit_use_double_quant: true\n",
    "int8": "load_in_8bit: true\n",
    "bf16": "quantization: bf16\n",
}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def export_rounded(family, work):
    """The family's tiny model with fp16-valued linear weights, exported
    (TorchScript, opset 17) next to its config.json. Returns (hf model,
    directory of save_pretrained, onnx path)."""
    import torch
    import export_hf

    model, ess, _ = export_hf.build_model(family, seed=0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(module.weight.half().float())
    out = os.path.join(work, family)
    os.makedirs(out)
    onnx_path = os.path.join(out, "model.onnx")
    example = torch.randint(0, ess["vocab"], (1, 8),
                            generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), export_hf._ts_symbolics(17):
        export_hf._export_torchscript(model, example, 17, onnx_path, False)
    model.__class__ = model.__class__.__bases__[0]  # the real causal LM
    model.config.to_json_file(os.path.join(out, "config.json"))
    hf_dir = os.path.join(out, "hf")
    model.save_pretrained(hf_dir)
    return model.eval(), hf_dir, onnx_path


def bnb_model(hf_dir, scheme):
    import bitsandbytes as bnb
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    if scheme == "nf4":
        config = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.float32)
    else:
        config = BitsAndBytesConfig(load_in_8bit=True)
    with warnings.catch_warnings(), contextlib.redirect_stderr(
            open(os.devnull, "w")):
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(
            hf_dir, quantization_config=config, dtype=torch.float32,
            device_map="cpu")
    if scheme == "nf4":
        # bnb_4bit_compute_dtype=float32: on a CPU with AVX512-BF16,
        # Linear4bit's eval forward would repack the weight for a bf16 GEMM
        # (inputs rounded to bf16); keep its fp32 path (dequantize_4bit,
        # then F.linear), the one every other CPU takes.
        for module in model.modules():
            if isinstance(module, bnb.nn.Linear4bit):
                module.support_avx512bf16_for_cpu = False
    return model.eval()


def int8_weight_only(model, quantized):
    """A copy of float `model` whose linear weights are bitsandbytes'
    dequantization of `quantized`'s Int8Params: CB * (SCB / 127)."""
    import bitsandbytes as bnb
    import torch

    out = copy.deepcopy(model)
    modules = dict(quantized.named_modules())
    count = 0
    with torch.no_grad():
        for name, module in out.named_modules():
            q = modules.get(name)
            if isinstance(q, bnb.nn.Linear8bitLt):
                w = bnb.functional.int8_vectorwise_dequant(q.weight.data,
                                                           q.weight.SCB)
                module.weight.copy_(w.float())
                count += 1
    return out, count


def greedy(model, prompt, scores=False):
    import torch

    with torch.no_grad(), contextlib.redirect_stdout(open(os.devnull, "w")):
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS,
                             do_sample=False, eos_token_id=None,
                             pad_token_id=0, output_scores=scores,
                             return_dict_in_generate=True)
    ids = [int(x) for x in out.sequences[0, len(prompt):]]
    return (ids, out.scores) if scores else ids


def tailor_ids(args, plan, prompt, flags=()):
    proc = run([args.tailor, "generate", plan, "--prompt-ids",
                ",".join(map(str, prompt)), "--max-new-tokens",
                str(NEW_TOKENS), "--json", *flags])
    if proc.returncode != 0:
        return None, proc.stderr[-800:]
    return json.loads(proc.stdout)["generated_ids"], ""


def prompt_logits(plan, prompt):
    """Row 0 of the logits after the prompt, decode a token at a time."""
    import numpy as np
    import tailor

    session = tailor.InferenceSession(plan)
    for i, token in enumerate(prompt):
        session.set_input("input_ids", np.array([[token]], dtype=np.int64))
        session.set_input("position", np.array(i, dtype=np.int64))
        session.run_entry("decode")
    return session.output("logits").reshape(-1)


def prefill_logits(plan, prompt):
    """The logits after the prompt through the plan's prefill entry."""
    import tailor

    generator = tailor.Generator(plan)
    assert generator.prefill_chunk == PREFILL_CHUNK, generator.prefill_chunk
    generator.prefill(prompt)
    return generator.logits()


def reference_logits(model, prompt):
    import torch

    with torch.no_grad():
        return model(torch.tensor([prompt])).logits[0, -1].float().numpy()


def compile_plan(args, onnx_path, scheme, work, extra=(), overrides=None):
    """The generation plan of `scheme`: its weight format from RECIPES'
    recipe file, or from key=value `overrides` when given."""
    if overrides is None:
        recipe = os.path.join(work, scheme + ".yaml")
        with open(recipe, "w") as f:
            f.write(RECIPES[scheme])
        extra = ("--recipe", recipe, *extra)
    else:
        extra = (*extra, *overrides)
    plan = os.path.join(os.path.dirname(onnx_path),
                        scheme + ("-adapter" if "--adapter" in extra else "")
                        + ".tplan")
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN), "--prefill-chunk",
                str(PREFILL_CHUNK), "-o", plan, *extra])
    return plan, proc


def parameter_bytes(args, plan):
    out = run([args.tailor, "inspect", plan]).stdout
    found = re.search(r"^\s*parameters\s+(\d+) B", out, re.M)
    return int(found.group(1)) if found else None


def quantized_count(args, plan, scheme):
    """How many tensors `tailor inspect` says the plan stores as `scheme`."""
    out = run([args.tailor, "inspect", plan]).stdout
    found = re.search(rf"quantized {scheme}: (\d+) tensors", out)
    return int(found.group(1)) if found else None


def float_reference(model, weights):
    """A copy of float `model` whose nn.Linear weights, but lm_head's (the
    weights tailor-quantize stores quantized: every linear layer's but
    lm_head), are weights(name, W), in fp32; and how many it replaced."""
    import torch

    out = copy.deepcopy(model)
    count = 0
    with torch.no_grad():
        for name, module in out.named_modules():
            if (isinstance(module, torch.nn.Linear) and
                    not name.endswith("lm_head")):
                module.weight.copy_(weights(name, module.weight).float())
                count += 1
    return out, count


def check_against(args, family, scheme, plan, model, ref, count, prompts,
                  atol):
    """`plan`'s greedy ids equal transformers' `generate` on `ref`, and its
    logits after the prompt (a token at a time, and through the prefill
    entry) are within `atol` of `ref`'s; `ref` must be further than `atol`
    from the float `model`, or the check could not tell the weight formats
    apart; `tailor inspect` counts `count` tensors stored as `scheme`."""
    import numpy as np

    failures = []
    for prompt in prompts:
        want = greedy(ref, prompt)
        got, err = tailor_ids(args, plan, prompt)
        if got != want:
            failures.append(f"{family} {scheme}: prompt {prompt}: tailor "
                            f"{got} != transformers {want} {err}")
    stepped = float(np.max(np.abs(prompt_logits(plan, prompts[2]) -
                                  reference_logits(ref, prompts[2]))))
    chunked = max(float(np.max(np.abs(prefill_logits(plan, prompt) -
                                      reference_logits(ref, prompt))))
                  for prompt in prompts[2:])
    moved = max(float(np.max(np.abs(reference_logits(model, prompt) -
                                    reference_logits(ref, prompt))))
                for prompt in prompts[2:])
    stored = quantized_count(args, plan, scheme)
    print(f"{family} {scheme}: {count} linear weights; greedy ids of "
          f"{len(prompts)} prompts {'equal' if not failures else 'DIFFER'}; "
          f"logits after the prompt max |diff| {stepped:.2e} token by token, "
          f"{chunked:.2e} through prefill (limit {atol}); the {scheme} "
          f"weights move the fp32 model's logits by {moved:.2e}")
    for way, diff in (("token by token", stepped), ("prefill", chunked)):
        if not diff <= atol:
            failures.append(f"{family} {scheme}: {way} logits differ by "
                            f"{diff:.2e} > {atol}")
    if not moved > 10 * atol:
        failures.append(f"{family} {scheme}: the reference is {moved:.2e} "
                        f"from the fp32 model, too close to tell {scheme} "
                        "weights from fp32 ones")
    if stored != count:
        failures.append(f"{family} {scheme}: tailor inspect shows {stored} "
                        f"tensors stored {scheme}, the reference rounds "
                        f"{count}")
    return failures


def check_bf16(args, family, model, onnx_path, prompts, work):
    """`quantization: bf16` stores every linear weight but lm_head as bf16
    (rounded to nearest even, as torch's .to(bfloat16)) and computes in
    fp32: transformers on the model whose weights are rounded alike."""
    import torch

    plan, proc = compile_plan(args, onnx_path, "bf16", work)
    if proc.returncode != 0:
        return [f"{family} bf16: compile failed: {proc.stderr[-1500:]}"]
    ref, count = float_reference(model,
                                 lambda name, w: w.to(torch.bfloat16))
    return check_against(args, family, "bf16", plan, model, ref, count,
                         prompts, BF16_ATOL)


def check_gptq(args, family, model, onnx_path, prompts, work):
    """`tailor quantize --scheme gptq`, then a generation plan binding its
    checkpoint (`quantization=gptq gptq_checkpoint=...`): transformers on
    the model whose linear weights are the checkpoint's, dequantized by
    gptq_quantize.py's own unpacking of AutoGPTQ's layout."""
    import numpy as np
    import torch
    import gptq_quantize

    calib = os.path.join(work, family + "-calib.jsonl")
    rng = np.random.default_rng(5)
    with open(calib, "w") as f:
        for _ in range(32):
            ids = [int(x) for x in rng.integers(0, model.config.vocab_size,
                                                16)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    out_dir = os.path.join(os.path.dirname(onnx_path), "gptq")
    os.makedirs(out_dir)
    checkpoint = os.path.join(out_dir, "model.safetensors")
    proc = run([args.tailor, "quantize", onnx_path, "--scheme", "gptq",
                "--calib", calib, *GPTQ_FLAGS, "--threads", "2",
                "-o", checkpoint])
    if proc.returncode != 0:
        return [f"{family} gptq: tailor quantize failed: "
                f"{proc.stderr[-1500:]}"]
    problems, weights = gptq_quantize.check_layout(checkpoint, 4, 32, True,
                                                   model)
    if problems:
        return [f"{family} gptq: checkpoint: {p}" for p in problems[:8]]
    plan, proc = compile_plan(
        args, onnx_path, "gptq", work,
        overrides=("quantization=gptq", f"gptq_checkpoint={checkpoint}"))
    if proc.returncode != 0:
        return [f"{family} gptq: compile failed: {proc.stderr[-1500:]}"]
    ref, count = float_reference(
        model, lambda name, w: torch.from_numpy(weights[name].copy()))
    return check_against(args, family, "gptq", plan, model, ref, count,
                         prompts, GPTQ_ATOL)


def check_nf4(args, family, model, hf_dir, onnx_path, prompts, work):
    import numpy as np

    plan, proc = compile_plan(args, onnx_path, "nf4", work)
    if proc.returncode != 0:
        return [f"{family} nf4: compile failed: {proc.stderr[-1500:]}"], None
    ref = bnb_model(hf_dir, "nf4")
    failures = []
    for prompt in prompts:
        want = greedy(ref, prompt)
        got, err = tailor_ids(args, plan, prompt)
        if got != want:
            failures.append(f"{family} nf4: prompt {prompt}: tailor {got} != "
                            f"bitsandbytes {want} {err}")
    diff = float(np.max(np.abs(prompt_logits(plan, prompts[2]) -
                               reference_logits(ref, prompts[2]))))
    # Through the prefill entry: one chunk exactly, and one and a half.
    chunked = max(float(np.max(np.abs(prefill_logits(plan, prompt) -
                                      reference_logits(ref, prompt))))
                  for prompt in prompts[2:])
    print(f"{family} nf4: greedy ids of {len(prompts)} prompts "
          f"{'equal' if not failures else 'DIFFER'}; logits after the "
          f"prompt max |diff| vs bitsandbytes {diff:.2e} token by token, "
          f"{chunked:.2e} through prefill (limit {NF4_ATOL})")
    if not diff <= NF4_ATOL:
        failures.append(f"{family} nf4: logits differ by {diff:.2e}")
    if not chunked <= NF4_ATOL:
        failures.append(f"{family} nf4: prefill logits differ by "
                        f"{chunked:.2e}")
    return failures, (plan, ref)


def check_int8(args, family, model, hf_dir, onnx_path, prompts, work):
    import numpy as np

    plan, proc = compile_plan(args, onnx_path, "int8", work)
    if proc.returncode != 0:
        return [f"{family} int8: compile failed: {proc.stderr[-1500:]}"], None
    llm_int8 = bnb_model(hf_dir, "int8")
    weight_only, count = int8_weight_only(model, llm_int8)
    failures = []
    agree, compared = 0, 0
    for prompt in prompts:
        got, err = tailor_ids(args, plan, prompt)
        want = greedy(weight_only, prompt)
        if got != want:
            failures.append(f"{family} int8: prompt {prompt}: tailor {got} != "
                            f"weight-only reference {want} {err}")
            continue
        # LLM.int8: equal up to the first step its margin cannot decide.
        theirs, scores = greedy(llm_int8, prompt, scores=True)
        got_logits = prompt_logits(plan, prompt)
        bound = float(np.max(np.abs(
            reference_logits(weight_only, prompt) -
            reference_logits(llm_int8, prompt)))) + INT8_ATOL
        for step, (a, b) in enumerate(zip(got, theirs)):
            top = scores[step][0].float().topk(2).values
            if float(top[0] - top[1]) < 2 * bound:
                break
            compared += 1
            if a != b:
                failures.append(f"{family} int8: prompt {prompt}: step {step} "
                                f"LLM.int8 picks {b} by a margin above "
                                f"{2 * bound:.2e}, tailor {a}")
                break
            agree += 1
        distance = float(np.max(np.abs(got_logits -
                                       reference_logits(llm_int8, prompt))))
        if not distance <= bound:
            failures.append(f"{family} int8: logits {distance:.2e} from "
                            f"LLM.int8's, beyond {bound:.2e}")
    diff = float(np.max(np.abs(prompt_logits(plan, prompts[2]) -
                               reference_logits(weight_only, prompts[2]))))
    gap = float(np.max(np.abs(reference_logits(weight_only, prompts[2]) -
                              reference_logits(llm_int8, prompts[2]))))
    print(f"{family} int8: {count} weights; greedy ids equal bitsandbytes' "
          f"weight-only int8 on {len(prompts)} prompts; logits max |diff| "
          f"{diff:.2e} (limit {INT8_ATOL}); LLM.int8's activation "
          f"quantization moves its logits by {gap:.2e}; {agree} of "
          f"{compared} decidable LLM.int8 greedy steps agree")
    if not diff <= INT8_ATOL:
        failures.append(f"{family} int8: logits differ by {diff:.2e}")
    return failures, (plan, weight_only)


def check_adapter(args, family, onnx_path, scheme, quantized, prompts, work):
    """LoRA on the quantized base, bound at compile time, equals PEFT on the
    reference of `scheme` (bitsandbytes' NF4 model; for int8 the float
    model carrying bnb's dequantized Int8Params, as tailor's int8 is
    weight-only); merging into the quantized plan is refused."""
    import torch
    from peft import LoraConfig, get_peft_model

    plan, ref = quantized
    what = {"nf4": "bitsandbytes NF4",
            "int8": "bitsandbytes' weight-only int8"}[scheme]
    peft_model = get_peft_model(
        ref if scheme == "nf4" else copy.deepcopy(ref),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                   target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in sorted(peft_model.named_parameters()):
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    adapter = os.path.join(work, f"{family}-{scheme}-adapter")
    peft_model.save_pretrained(adapter)
    peft_model.eval()
    adapted, proc = compile_plan(args, onnx_path, scheme, work,
                                 extra=("--adapter", adapter))
    if proc.returncode != 0:
        return [f"{family} {scheme} adapter: compile failed: "
                f"{proc.stderr[-800:]}"]
    failures, changed = [], 0
    for prompt in prompts:
        want = greedy(peft_model, prompt)
        with peft_model.disable_adapter():
            changed += want != greedy(peft_model, prompt)
        got, err = tailor_ids(args, adapted, prompt)
        if got != want:
            failures.append(f"{family} {scheme} adapter: prompt {prompt}: "
                            f"tailor {got} != PEFT {want} {err}")
    if not changed:
        failures.append(f"{family} {scheme} adapter: the adapter changes no "
                        "ids")
    proc = run([args.tailor, "generate", plan, "--prompt-ids", "1,2",
                "--adapter", adapter])
    if proc.returncode != 1 or "would change the quantized" not in proc.stderr:
        failures.append(f"{family}: generate --adapter on an {scheme} plan: "
                        f"expected a refusal, got {proc.returncode}: "
                        f"{proc.stderr[-300:]}")
    if not failures:
        print(f"{family} {scheme} + LoRA (unmerged, bound at compile time): "
              f"ids equal PEFT on {what} for {len(prompts)} prompts "
              f"({changed} differ from the base); generate --adapter on the "
              f"{scheme} plan refused")
    return failures


def check_recipe_keys(args, onnx_path, work):
    failures = []
    recipe = os.path.join(work, "mixed.yaml")
    with open(recipe, "w") as f:
        f.write("load_in_4bit: true\noptimizer: sgd\nlora_r: 16\n")
    base = [args.tailor, "compile", onnx_path, "--task", "generate",
            "--max-seq-len", "16", "--recipe", recipe,
            "-o", os.path.join(work, "mixed.tplan")]
    proc = run(base)
    if proc.returncode != 0 or "ignores lora_r, optimizer" not in proc.stderr:
        failures.append(f"training keys: expected a note, got "
                        f"{proc.returncode}: {proc.stderr[-300:]}")
    proc = run(base + ["zero_stage=2"])
    if proc.returncode != 1 or "asks for zero_stage" not in proc.stderr:
        failures.append(f"zero_stage: expected a refusal, got "
                        f"{proc.returncode}: {proc.stderr[-300:]}")
    return failures


def check_family(args, family, work):
    import numpy as np

    model, hf_dir, onnx_path = export_rounded(family, work)
    vocab = model.config.vocab_size
    rng = np.random.default_rng(22)
    prompts = [[int(x) for x in rng.integers(0, vocab, n)]
               for n in PROMPT_LENGTHS]
    failures, nf4 = check_nf4(args, family, model, hf_dir, onnx_path, prompts,
                              work)
    more, int8 = check_int8(args, family, model, hf_dir, onnx_path, prompts,
                            work)
    failures += more
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN),
                "-o", os.path.join(work, family + "-f32.tplan")])
    sizes = {"fp32": parameter_bytes(args, os.path.join(work, family +
                                                       "-f32.tplan"))}
    if nf4 and int8:
        sizes.update(nf4=parameter_bytes(args, nf4[0]),
                     int8=parameter_bytes(args, int8[0]))
        print(f"{family}: parameter bytes {sizes}")
        if not (sizes["nf4"] < sizes["int8"] < sizes["fp32"]):
            failures.append(f"{family}: parameter bytes {sizes} not "
                            "nf4 < int8 < fp32")
    failures += check_bf16(args, family, model, onnx_path, prompts, work)
    failures += check_gptq(args, family, model, onnx_path, prompts, work)
    if family == "llama" and nf4:
        failures += check_adapter(args, family, onnx_path, "nf4", nf4,
                                  prompts, work)
    if family == "llama" and int8:
        failures += check_adapter(args, family, onnx_path, "int8", int8,
                                  prompts, work)
    if family == "llama":
        failures += check_recipe_keys(args, onnx_path, work)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--runtime-lib", required=True)
    parser.add_argument("--families", default="llama,qwen2")
    args = parser.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.runtime_lib
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for family in args.families.split(","):
            failures += check_family(args, family, work)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("generate_quantized: all checks passed")


if __name__ == "__main__":
    main()
