#!/usr/bin/env python3
"""End-to-end: hand-written models in the styles people publish.

For every style of test/generators/export_handwritten.py (meta, nanogpt,
litgpt, sdpa, maskfill) and every export of the matrix below (TorchScript at
opsets 14 and 17, the dynamo exporter at opset 18; static and dynamic
shapes), this

  1. exports the model (cached in --cache),
  2. compiles it to the graph stage and checks that attention was raised to
     tg.attention in every layer (and no tg.band_mask is left: each mask
     became the causal flag),
  3. compiles a plan, runs it with tailor-run on the seeded input_ids and
     compares the logits with PyTorch's to --tol (1e-4);
     the dynamic TorchScript export is also saved with every initializer in
     external data (as torch.onnx does past 2 GB), so a mask buffer there
     (nanoGPT's tril `bias`) is still read as a mask and raised;
  4. for the dynamic TorchScript export of each style, trains LoRA (r 4 on
     the query and value projections, AdamW, 3 steps) with `tailor train`
     from the same initial PEFT adapter as PyTorch + PEFT on the module
     itself, and compares every step's loss and gradient norm (the first
     step's is the LoRA gradient of torch autograd) to 1e-4 relative.

  handwritten_models.py --tailor build/bin/tailor \\
      --tailor-run build/bin/tailor-run --cache build/test/handwritten
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import export_handwritten as hw  # noqa: E402
import train_common as tc  # noqa: E402

LORA_TARGETS = {"nanogpt": ["c_attn"]}  # the rest: ["wq", "wv"]
LORA_STEPS = 3

# (exporter, opset, dynamic, every initializer in external data)
MATRIX = [("torchscript", 14, False, False), ("torchscript", 17, True, False),
          ("torchscript", 17, True, True), ("dynamo", 18, False, False),
          ("dynamo", 18, True, False)]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def externalize(model, out):
    """`model` saved again with every initializer (buffers too, however
    small) in one external data file beside `out`."""
    import shutil

    import onnx

    proto = onnx.load(model)
    onnx.save(proto, out, save_as_external_data=True,
              all_tensors_to_one_file=True,
              location=os.path.basename(out) + ".data", size_threshold=0)
    shutil.copyfile(model + ".ref.npz", out + ".ref.npz")


def check_case(args, style, exporter, opset, dynamic, external):
    import numpy as np

    name = f"{style}-{exporter}-{opset}-{'dynamic' if dynamic else 'static'}"
    model = os.path.join(args.cache, name + ".onnx")
    if not os.path.exists(model + ".ref.npz"):
        hw.export(style, exporter, opset, model, dynamic)
    if external:
        name += "-external"
        inline, model = model, os.path.join(args.cache, name + ".onnx")
        if not os.path.exists(model + ".ref.npz"):
            externalize(inline, model)
    shape = ["--batch", str(hw.BATCH), "--seq", str(hw.SEQ)]
    graph = os.path.join(args.cache, name + ".mlir")
    r = run([args.tailor, "compile", model, "--compile-to=graph", *shape,
             "-o", graph])
    if r.returncode != 0:
        return f"{name}: compile failed: {r.stderr.strip()}"
    text = open(graph).read()
    attention = text.count(" = tg.attention ")
    if attention != hw.LAYERS or "tg.band_mask" in text:
        return (f"{name}: {attention} of {hw.LAYERS} layers raised to "
                f"tg.attention, band_mask left: {'tg.band_mask' in text}")
    # Rotary embeddings on q and k of every layer (nanoGPT has none): the
    # rotate-half layout, or Meta's interleaved pairs.
    ropes = text.count(" = tg.rope ")
    want = 0 if style == "nanogpt" else 2 * hw.LAYERS
    if ropes != want:
        return f"{name}: {ropes} tg.rope raised, expected {want}"
    plan = os.path.join(args.cache, name + ".tplan")
    r = run([args.tailor, "compile", model, *shape, "-o", plan])
    if r.returncode != 0:
        return f"{name}: plan failed: {r.stderr.strip()}"
    ref = np.load(model + ".ref.npz")
    ids = os.path.join(args.cache, name + ".ids.npy")
    out = os.path.join(args.cache, name + ".logits.npy")
    np.save(ids, ref["input_ids"])
    r = run([args.tailor_run, plan, "--input", f"input_ids={ids}",
             "--output", f"logits={out}"])
    if r.returncode != 0:
        return f"{name}: tailor-run failed: {r.stderr.strip()}"
    err = float(np.abs(np.load(out) - ref["logits"]).max())
    print(f"{name}: attention {attention}/{hw.LAYERS}, max |tailor - PyTorch| "
          f"= {err:.2e}")
    if not err <= args.tol:
        return f"{name}: logits differ by {err:.3e} (tolerance {args.tol})"
    return None


def torch_lora_steps(style, rows, recipe, init_dir):
    """PEFT's LoRA on the hand-written module, trained as tailor trains:
    HF's causal-LM loss (labels shifted, -100 ignored), AdamW. Saves the
    initial adapter to `init_dir`; returns [(loss, grad_norm)] per step."""
    import torch
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(7)
    config = LoraConfig(r=recipe["lora_r"], lora_alpha=recipe["lora_alpha"],
                        lora_dropout=0.0,
                        target_modules=recipe["lora_target_modules"],
                        bias="none")
    model = get_peft_model(hw.build(style), config)
    model.save_pretrained(init_dir)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = tc.make_optimizer(params, recipe)
    records = []
    for step in range(recipe["max_steps"]):
        ids, labels = tc.micro_batch(rows, step, recipe["micro_batch_size"])
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               labels[:, 1:].reshape(-1), ignore_index=-100)
        loss.backward()
        norm = float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(p.grad.double()) for p in params])))
        opt.step()
        opt.zero_grad(set_to_none=True)
        records.append((loss.item(), norm))
    return records


def check_lora_step(args, style):
    """Problems (a list) of tailor's LoRA steps against PyTorch + PEFT."""
    name = f"{style}-torchscript-17-dynamic"
    model = os.path.join(args.cache, name + ".onnx")
    work = os.path.join(args.cache, name + "-lora")
    os.makedirs(work, exist_ok=True)
    rows = tc.make_rows(n_rows=2 * LORA_STEPS, seq=hw.SEQ, vocab=hw.VOCAB)
    data = os.path.join(work, "data.jsonl")
    tc.write_jsonl(rows, data)
    recipe = tc.recipe_defaults()
    recipe.update(lora_r=4, lora_alpha=8, max_steps=LORA_STEPS, save_steps=0,
                  sequence_len=hw.SEQ, micro_batch_size=2, weight_decay=0.0,
                  lora_target_modules=LORA_TARGETS.get(style, ["wq", "wv"]))
    init_dir = os.path.join(work, "init_adapter")
    ref = torch_lora_steps(style, rows, recipe, init_dir)
    out, error = tc.tailor_compile_train(os.path.dirname(args.tailor), model,
                                         recipe, work, data,
                                         init_adapter=init_dir)
    if error:
        return [f"{name} LoRA: {error}"]
    got = tc.read_metrics(out)
    problems = []
    for step, (loss, norm) in enumerate(ref, start=1):
        m = got.get(step, {})
        el = tc.rel_err(m.get("loss"), loss)
        en = tc.rel_err(m.get("grad_norm"), norm)
        print(f"{name} LoRA step {step}: loss tailor {m.get('loss')} PyTorch "
              f"{loss:.6f} (rel {el:.1e}), grad_norm tailor "
              f"{m.get('grad_norm')} PyTorch {norm:.6f} (rel {en:.1e})")
        if not (el <= 1e-4 and en <= 1e-4):
            problems.append(f"{name} LoRA step {step}: loss rel {el:.1e}, "
                            f"grad_norm rel {en:.1e} (tolerance 1e-4)")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--tailor-run", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--styles", default=",".join(hw.STYLES))
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    failures = []
    for style in args.styles.split(","):
        for exporter, opset, dynamic, external in MATRIX:
            problem = check_case(args, style, exporter, opset, dynamic,
                                 external)
            if problem:
                print("FAIL " + problem)
                failures.append(problem)
        for problem in check_lora_step(args, style):
            print("FAIL " + problem)
            failures.append(problem)
    total = len(args.styles.split(",")) * (len(MATRIX) + 1)
    print(f"handwritten models: {len(failures)} failures in {total} checks "
          f"(exports x matrix, plus a LoRA run per style)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
