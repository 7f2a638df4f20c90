#!/usr/bin/env python3
"""End-to-end import test: real Hugging Face models, exported by torch.onnx.

For each family (Llama, Mistral, Qwen2, GPT-2, Phi) and export path
(TorchScript opsets 14 and 17, dynamo opset 18, and one export with external
data), builds a tiny randomly initialized model from its config, exports it
with test/generators/export_hf.py, compiles it with
`tailor compile --compile-to=graph --batch 2 --seq 8`, and checks:

  - the raised op counts: linear, attention, norm and rope ops as the config
    implies (e.g. Llama: 7 linear layers per block plus lm_head);
  - no shape arithmetic left: every type static, no arith op but constants,
    no integer tensor computed in the graph;
  - every linear layer knows its module path and (inside a block) its layer;
  - the external-data export imports with its data file present, and still
    imports (with a warning) when the data file is absent.

Exports are cached under BUILD/test/hf-exports, keyed by the exporter script
and library versions, so reruns only compile.

  hf_import.py --tailor build/bin/tailor --cache build/test/hf-exports
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

from hf_common import case_name, export_all

# Per family: linear layers per block, norms (kind, count per block; one
# final norm, plus `extra_norms` outside the blocks), ropes per block.
FAMILY = {
    "llama": dict(linear=7, norm="rms_norm", norms=2, rope=2),
    "mistral": dict(linear=7, norm="rms_norm", norms=2, rope=2),
    "mistral-window": dict(linear=7, norm="rms_norm", norms=2, rope=2),
    # Gemma-2: RMSNorm before and after attention and the MLP.
    "gemma2": dict(linear=7, norm="rms_norm", norms=4, rope=2),
    # Falcon: fused qkv, dense, and the MLP's two, off one LayerNorm.
    "falcon": dict(linear=4, norm="layer_norm", norms=1, rope=2),
    "qwen2": dict(linear=7, norm="rms_norm", norms=2, rope=2),
    "gpt2": dict(linear=4, norm="layer_norm", norms=2, rope=0),
    "phi": dict(linear=6, norm="layer_norm", norms=1, rope=2),
    # BLOOM: fused qkv, dense, the MLP's two; LayerNorms before attention and
    # MLP, plus one after the embedding; ALiBi instead of rope (raised as
    # tg.attention's alibi_slopes).
    "bloom": dict(linear=4, norm="layer_norm", norms=2, rope=0,
                  extra_norms=1),
}


def count(ir, op):
    return len(re.findall(rf"= tg\.{op} ", ir))


def check_graph(ir, family, layers):
    """Returns a list of problems with the raised graph `ir`."""
    spec = FAMILY[family]
    problems = []
    expect = {
        "linear": spec["linear"] * layers + 1,
        "attention": layers,
        spec["norm"]: spec["norms"] * layers + 1 + spec.get("extra_norms", 0),
        "rope": spec["rope"] * layers,
        "embedding": 1,
    }
    for op, n in expect.items():
        got = count(ir, op)
        if got != n:
            problems.append(f"expected {n} tg.{op}, got {got}")
    for op in ("matmul", "softmax"):
        if count(ir, op):
            problems.append(f"{count(ir, op)} tg.{op} left unraised")
    body = ir[ir.index("func.func"):]
    if "?" in body:
        problems.append("a dynamic dim is left")
    for line in body.splitlines():
        m = re.search(r"= (arith\.\w+|tg\.\w+)", line)
        if not m:
            continue
        op = m.group(1)
        if op.startswith("arith.") and op != "arith.constant":
            problems.append(f"shape arithmetic left: {line.strip()[:120]}")
        result_type = line.rsplit("->", 1)[-1] if "->" in line else line.rsplit(":", 1)[-1]
        if op.startswith("tg.") and re.search(r"x(i64|i32)>", result_type):
            problems.append(f"integer tensor computed: {line.strip()[:120]}")
    for line in body.splitlines():
        if "= tg.linear " not in line:
            continue
        module = re.search(r'tg.module = "([^"]+)"', line)
        if not module:
            problems.append(f"linear without module path: {line.strip()[:120]}")
            continue
        inside_block = re.search(r"\.(layers|h)\.\d+\.", module.group(1))
        if inside_block and "tg.layer" not in line:
            problems.append(f"linear without layer: {module.group(1)}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tailor", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    results = export_all(args.cache, args.jobs)
    jobs = [job for job, _ in results]
    exported = [exp for _, exp in results]

    failures = 0
    print(f"{'model':<18} {'export':<7} {'import+raise':<13} details")
    for (family, exporter, opset, external, out_dir), (model, err) in zip(jobs, exported):
        name = case_name(family, exporter, opset, external)
        if err:
            failures += 1
            print(f"{name:<18} FAIL    -             {err.strip().splitlines()[-1][:200]}")
            continue
        meta = json.load(open(os.path.join(out_dir, "model.json")))
        layers = meta.get("config", meta).get("num_layers", 2)
        out = os.path.join(out_dir, "graph.mlir")
        proc = subprocess.run([args.tailor, "compile", model, "--compile-to=graph",
                               "--batch", "2", "--seq", "8", "-o", out],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            failures += 1
            print(f"{name:<18} ok      FAIL          {proc.stderr.strip()[:300]}")
            continue
        ir = open(out).read()
        problems = check_graph(ir, family, layers)
        counts = " ".join(f"{op}={count(ir, op)}" for op in
                          ("linear", "attention", "rms_norm", "layer_norm", "rope",
                           "embedding", "silu", "gelu"))
        if external:
            data = [f for f in os.listdir(out_dir) if f.endswith(".data")]
            if "#tg.external<" not in ir or not data:
                problems.append("external-data export has no #tg.external parameters")
            else:
                # Without the data file the model still compiles for planning.
                bare = os.path.join(out_dir, "no-data")
                shutil.rmtree(bare, ignore_errors=True)
                os.makedirs(bare)
                shutil.copy(model, bare)
                p2 = subprocess.run([args.tailor, "compile",
                                     os.path.join(bare, "model.onnx"),
                                     "--compile-to=graph", "--batch", "2", "--seq", "8",
                                     "-o", os.path.join(bare, "graph.mlir")],
                                    capture_output=True, text=True)
                if p2.returncode != 0 or "is missing" not in p2.stderr:
                    problems.append("import without the data file failed: "
                                    + p2.stderr.strip()[:200])
                else:
                    counts += " (also imports without its data file)"
        status = "ok" if not problems else "FAIL"
        failures += bool(problems)
        print(f"{name:<18} ok      {status:<13} {counts}")
        for p in problems[:8]:
            print(f"    {p}")
    print(f"summary: {len(jobs) - failures}/{len(jobs)} export paths import and raise")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
