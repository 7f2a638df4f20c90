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
     compares the logits with PyTorch's to --tol (1e-4).

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

# (exporter, opset, dynamic)
MATRIX = [("torchscript", 14, False), ("torchscript", 17, True),
          ("dynamo", 18, False), ("dynamo", 18, True)]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_case(args, style, exporter, opset, dynamic):
    import numpy as np

    name = f"{style}-{exporter}-{opset}-{'dynamic' if dynamic else 'static'}"
    model = os.path.join(args.cache, name + ".onnx")
    if not os.path.exists(model + ".ref.npz"):
        hw.export(style, exporter, opset, model, dynamic)
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
        for exporter, opset, dynamic in MATRIX:
            problem = check_case(args, style, exporter, opset, dynamic)
            if problem:
                print("FAIL " + problem)
                failures.append(problem)
    total = len(args.styles.split(",")) * len(MATRIX)
    print(f"handwritten models: {total - len(failures)} of {total} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
