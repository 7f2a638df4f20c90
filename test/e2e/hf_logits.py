#!/usr/bin/env python3
"""End-to-end numerics: tailor's CPU forward pass on real Hugging Face exports.

For every export in the HF import matrix (hf_common.CASES: Llama, Mistral,
Qwen2, GPT-2, Phi, Gemma-2, Falcon, BLOOM; TorchScript opsets 14 and 17,
dynamo opset 18, one export
with external data; the same cached exports hf_import.py uses), compiles a
plan with `tailor compile X.onnx -o X.tplan --batch 2 --seq 8`, runs
`tailor-run X.tplan --input input_ids=... --output-dir DIR` on the seeded
reference input_ids [2, 8] stored in X.ref.npz, and compares the logits with

  (a) the PyTorch logits in X.ref.npz (the eager model the export came from);
  (b) onnxruntime (CPU execution provider, fp32) on the same .onnx and inputs.

Every graph input the export declares is fed: input_ids from the reference,
attention_mask as ones and position_ids as arange(seq) should an export
declare them (the current exports take input_ids only). A model passes when
the max abs error is <= --tol (1e-4) against both references and the compile
raised every attention (no "attention left as matmul" warning).

  hf_logits.py --tailor build/bin/tailor --tailor-run build/bin/tailor-run \\
      --cache build/test/hf-exports
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

from hf_common import case_name, export_all

BATCH, SEQ = 2, 8


def graph_feeds(model_path, ref):
    """Returns {name: array} for every graph input of the model (initializers
    listed as inputs excluded)."""
    import numpy as np
    import onnx

    model = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    ids = ref["input_ids"]
    feeds = {}
    for v in model.graph.input:
        if v.name in inits:
            continue
        if v.name == "input_ids":
            feeds[v.name] = ids
        elif v.name == "attention_mask":
            feeds[v.name] = np.ones_like(ids)
        elif v.name == "position_ids":
            feeds[v.name] = np.broadcast_to(
                np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
        else:
            raise ValueError(f"do not know what to feed graph input '{v.name}'")
    return feeds


def ort_logits(model_path, feeds):
    """Runs onnxruntime on the CPU EP with graph optimizations disabled.

    ORT_DISABLE_ALL makes ORT evaluate the graph node by node as exported:
    its default level would fuse the same subgraphs tailor raises (attention,
    layer norm, GELU, ...) into contrib kernels with their own approximations,
    and then the reference would be one more implementation of the fused op
    rather than the graph's ONNX semantics.
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    out = sess.run(None, feeds)
    return out[names.index("logits")] if "logits" in names else out[0]


def first_line(text, n=300):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "(no message)")[:n]


def run_tailor(args, model, work, feeds):
    """Compiles and runs one export; returns (logits, None) or (None, error)."""
    import numpy as np

    plan = os.path.join(work, "model.tplan")
    proc = subprocess.run([args.tailor, "compile", model, "-o", plan,
                           "--batch", str(BATCH), "--seq", str(SEQ)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, "compile failed: " + first_line(proc.stderr + proc.stdout)
    if "attention left as matmul" in proc.stderr:
        return None, "attention not raised: " + first_line(proc.stderr)
    cmd = [args.tailor_run, plan]
    for name, value in feeds.items():
        path = os.path.join(work, f"in.{name}.npy")
        np.save(path, value)
        cmd += ["--input", f"{name}={path}"]
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    cmd += ["--output-dir", out_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"tailor-run exit {proc.returncode}: " + first_line(proc.stderr + proc.stdout)
    path = os.path.join(out_dir, "logits.npy")
    if not os.path.exists(path):
        return None, f"no logits.npy in --output-dir (wrote {sorted(os.listdir(out_dir))})"
    return np.load(path), None


def max_err(a, b):
    import numpy as np

    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--tailor", required=True, help="the tailor driver")
    ap.add_argument("--tailor-run", required=True, help="the tailor-run binary")
    ap.add_argument("--cache", required=True,
                    help="the HF export cache (shared with hf_import.py)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel exports")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="max abs logits error allowed against each reference")
    ap.add_argument("--keep", action="store_true",
                    help="keep plans and outputs of passing models")
    args = ap.parse_args()
    import numpy as np

    results = export_all(args.cache, args.jobs)
    failures = 0
    print(f"{'model':<18} {'result':<6} {'vs PyTorch':>11} {'vs ORT':>11} "
          f"{'ORT vs PyTorch':>15}")
    for (family, exporter, opset, external, out_dir), (model, err) in results:
        name = case_name(family, exporter, opset, external)
        if err:
            failures += 1
            print(f"{name:<18} FAIL   export failed: {first_line(err.splitlines()[-1])}")
            continue
        ref = np.load(os.path.join(out_dir, "model.ref.npz"))
        meta = json.load(open(os.path.join(out_dir, "model.json")))
        feeds = graph_feeds(model, ref)
        if sorted(feeds) != sorted(meta.get("inputs", feeds)):
            print(f"    note: sidecar inputs {meta['inputs']}, graph feeds {sorted(feeds)}")
        ort_out = ort_logits(model, feeds)
        work = os.path.join(out_dir, "logits-run")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        got, problem = run_tailor(args, model, work, feeds)
        e_ref = max_err(ort_out, ref["logits"])
        if problem:
            failures += 1
            print(f"{name:<18} FAIL   {'-':>11} {'-':>11} {e_ref:>15.2e}  {problem}")
            continue
        e_pt, e_ort = max_err(got, ref["logits"]), max_err(got, ort_out)
        same_type = got.dtype == ort_out.dtype
        ok = e_pt <= args.tol and e_ort <= args.tol and same_type
        failures += not ok
        shape = ("" if got.shape == ref["logits"].shape else
                 f"  shape {list(got.shape)}, expected {list(ref['logits'].shape)}")
        if not same_type:
            shape += f"  dtype {got.dtype}, expected {ort_out.dtype}"
        print(f"{name:<18} {'ok' if ok else 'FAIL':<6} {e_pt:>11.2e} {e_ort:>11.2e} "
              f"{e_ref:>15.2e}{shape}")
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    n = len(results)
    print(f"summary: {n - failures}/{n} models match PyTorch and onnxruntime "
          f"to {args.tol:g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
