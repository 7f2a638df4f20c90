#!/usr/bin/env python3
"""int8 weights as a session binds them: tailor's bytes against bitsandbytes.

Tiny random Llama and Qwen2 (generate_quantized.py's models: nn.Linear
weights rounded to fp16 values, TorchScript export at opset 17, which
stores every Linear weight transposed, [in, out]) are compiled with
`load_in_8bit: true` twice:

  generate  `tailor compile --task generate --max-seq-len 16 --recipe R`
  train     `tailor compile --recipe R --hardware cpu`: LoRA r=8 on q_proj
            and v_proj over the frozen int8 base, AdamW (the recipe
            defaults of train_common.py, with micro_batch_size 1: the
            export traced a batch of one)

Each plan is opened in a session (tailor.InferenceSession), which binds its
weights: reads each float weight from the ONNX file, un-transposes it and
quantizes it (runtime/Session.cpp, quant::quantizeInto; the training plan
goes through the same binder). The bytes every quantized parameter then
holds (tailor_session_tensor) are split into scales f32[rows] and codes
i8[rows, cols] (runtime/quant/QuantizedWeight.h) and compared with the
Int8Params of transformers' `from_pretrained(...,
quantization_config=BitsAndBytesConfig(load_in_8bit=True))` on the CPU --
bitsandbytes' own `int8_vectorwise_quant` of the same Linear weight, per
output row:

  scales   identical fp32 bits to the module's weight.SCB
  codes    identical to the module's weight.CB (int8, [out, in])
  layout   4 * rows + rows * cols bytes (no outlier columns), and the set
           of quantized weights is the set of bnb's Linear8bitLt modules

Also printed and required: the number of codes that the correctly rounded
multiplier 127 / absmax would give differently from bitsandbytes'
(1 / absmax) * 127 -- torch evaluates `127.0 / row_stats` as
`row_stats.reciprocal() * 127` -- so the weights keep exercising the
rounding that once made tailor's codes differ (12 of the 73728 codes of
the tiny Llama, in 8 of its 14 weights, when tailor divided 127 by absmax).

  int8_bitsandbytes.py --tailor build/bin/tailor \
      --runtime-lib build/lib/libtailor_runtime.so [--families llama,qwen2]
"""

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

TRAIN_RECIPE = {"load_in_8bit": True, "micro_batch_size": 1}


def compile_plans(args, onnx_path, work):
    """{kind: plan path}, or raises with tailor's message."""
    import train_common as tc

    recipe = tc.recipe_defaults()
    recipe.update(TRAIN_RECIPE)
    recipe.pop("momentum")
    train_recipe = os.path.join(work, "train.yaml")
    tc.write_recipe(recipe, train_recipe)
    generate_recipe = os.path.join(work, "generate.yaml")
    with open(generate_recipe, "w") as f:
        f.write("load_in_8bit: true\n")
    commands = {
        "generate": ["--task", "generate", "--max-seq-len", "16",
                     "--recipe", generate_recipe],
        "train": ["--recipe", train_recipe, "--hardware", "cpu"],
    }
    plans = {}
    for kind, flags in commands.items():
        plan = os.path.join(work, kind + ".tplan")
        proc = subprocess.run([args.tailor, "compile", onnx_path, *flags,
                               "-o", plan], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} compile failed: {proc.stderr[-1500:]}")
        plans[kind] = plan
    return plans


def bnb_int8(hf_dir):
    """{module name: (CB int8 [out, in], SCB f32 [out])} of transformers'
    load_in_8bit model on the CPU."""
    import bitsandbytes as bnb
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    with warnings.catch_warnings(), contextlib.redirect_stderr(
            open(os.devnull, "w")):
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(
            hf_dir, quantization_config=BitsAndBytesConfig(load_in_8bit=True),
            dtype=torch.float32, device_map="cpu")
    return {name: (m.weight.data.numpy().copy(), m.weight.SCB.numpy().copy())
            for name, m in model.named_modules()
            if isinstance(m, bnb.nn.Linear8bitLt)}


def float_weights(model, onnx_path):
    """(HF linear weights by module name, ONNX initializers by name)."""
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper

    linear = {name: m.weight.detach().numpy().copy()
              for name, m in model.named_modules()
              if isinstance(m, torch.nn.Linear)}
    graph = onnx.load(onnx_path).graph
    inits = {t.name: np.asarray(numpy_helper.to_array(
        t, base_dir=os.path.dirname(onnx_path))) for t in graph.initializer}
    return linear, inits


def module_of(source, linear):
    """(module name, W [out, in]) whose weight is `source` or its
    transpose; (None, None) when none is."""
    import numpy as np

    for candidate in (source, source.T):
        for name, w in linear.items():
            if w.shape == candidate.shape and np.array_equal(w, candidate):
                return name, w
    return None, None


def rounded_once_differs(w):
    """Codes where round(W * (127 / absmax)), one rounding of the
    multiplier, differs from bitsandbytes' round(W * ((1 / absmax) * 127))."""
    import numpy as np

    f = np.float32
    absmax = np.abs(w).max(axis=1).astype(f)
    once = f(127) / absmax
    twice = (f(1) / absmax) * f(127)
    return int((np.rint(w * once[:, None]) != np.rint(w * twice[:, None])).sum())


def check_plan(family, kind, plan, linear, inits, reference):
    """Failures of one plan's bound int8 bytes against `reference`."""
    import numpy as np
    import tailor

    session = tailor.InferenceSession(plan)
    failures, seen = [], set()
    for param in session.plan.parameters():
        if not param.quantized:
            continue
        where = f"{family} {kind}: {param.name}"
        source = inits.get(param.name)
        if source is None:
            failures.append(f"{where}: no ONNX initializer of that name")
            continue
        module, w = module_of(source, linear)
        if module not in reference:
            failures.append(f"{where}: quantized, but no bitsandbytes "
                            f"Linear8bitLt holds its weight ({module})")
            continue
        seen.add(module)
        # The ONNX initializer is W^T [in, out]; the plan holds Linear's
        # W [out, in]: tailor_parameter_info says it is transposed.
        if not param.transposed:
            failures.append(f"{where}: stored [out, in] from a [in, out] "
                            "initializer, but not reported transposed")
        cb, scb = reference[module]
        rows, cols = w.shape
        raw = session.get_tensor(param.name).view(np.uint8).reshape(-1)
        if raw.size != 4 * rows + rows * cols:
            failures.append(f"{where} ({module}): {raw.size} bytes, expected "
                            f"{4 * rows + rows * cols} for int8 [{rows}, "
                            f"{cols}]")
            continue
        scales = raw[:4 * rows].view(np.uint32)
        codes = raw[4 * rows:].view(np.int8).reshape(rows, cols)
        bad_scales = int((scales != scb.view(np.uint32)).sum())
        bad_codes = int((codes != cb).sum())
        if bad_scales or bad_codes:
            failures.append(f"{where} ({module}): {bad_codes} codes and "
                            f"{bad_scales} scales differ from bitsandbytes' "
                            "CB / SCB")
    missing = sorted(set(reference) - seen)
    if missing:
        failures.append(f"{family} {kind}: bitsandbytes quantizes {missing}, "
                        "the plan does not")
    return failures, len(seen)


def check_family(args, family, work):
    import generate_quantized as gq

    model, hf_dir, onnx_path = gq.export_rounded(family, work)
    reference = bnb_int8(hf_dir)
    linear, inits = float_weights(model, onnx_path)
    plans = compile_plans(args, onnx_path, os.path.dirname(onnx_path))
    edge = sum(rounded_once_differs(linear[name]) for name in reference)
    elements = sum(cb.size for cb, _ in reference.values())
    failures = []
    for kind, plan in plans.items():
        more, count = check_plan(family, kind, plan, linear, inits, reference)
        failures += more
        print(f"{family} {kind}: {count} int8 weights ({elements} codes) "
              f"{'identical to' if not more else 'DIFFER from'} "
              f"bitsandbytes' Int8Params CB / SCB")
    print(f"{family}: {edge} of those codes would differ with the correctly "
          "rounded multiplier 127 / absmax")
    if edge == 0:
        failures.append(f"{family}: no code sits on the multiplier's rounding "
                        "edge; the check no longer tells the two apart")
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
    print("int8_bitsandbytes: all checks passed")


if __name__ == "__main__":
    main()
