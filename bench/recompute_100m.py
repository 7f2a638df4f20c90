#!/usr/bin/env python3
"""Recomputation policies on the ~134M Llama of bench/cpu_train_100m.sh.

For each policy (none, full, selective, budget 0.5) it compiles the LoRA
plan of cpu_train_100m (same model, data and recipe, `--variant` lora or
qlora), reads the activation arena and the recompute note from `tailor
inspect --json`, trains `--steps` steps on the CPU, and reports per policy:
activation arena (MiB and fraction of none), recompute GFLOP per step,
ms/step (mean over steps 2..N) and its overhead over none, peak RSS, and
whether the losses and the final adapter are identical to none's.

  bench/recompute_100m.py [--seq 256] [--threads 2] [--steps 6] [--variant qlora]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cpu_forward_100m as fwd  # noqa: E402
import cpu_train_100m as trn  # noqa: E402

POLICIES = [
    ("none", "gradient_checkpointing: false"),
    ("full", "gradient_checkpointing: true"),
    ("selective", "gradient_checkpointing: selective"),
    ("budget 0.5", "activation_memory_budget: 0.5"),
]


def inspect(tailor, plan):
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json"],
                                    capture_output=True, text=True,
                                    check=True).stdout)
    note = next((n["message"] for n in doc.get("notes", [])
                 if n["kind"] == "recompute"), "")
    gflop = re.search(r"([0-9.]+) GFLOP", note)
    return doc["memory"]["activations"], float(gflop.group(1)) if gflop else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--variant", default="lora", choices=["lora", "qlora"])
    ap.add_argument("--compile-only", action="store_true",
                    help="memory figures only, no training")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    trn.add_model_args(ap)  # the model of cpu_train_100m
    args = ap.parse_args()
    tailor = os.path.join(args.build, "bin", "tailor")

    onnx_path = fwd.exported_model(args, args.build)
    run_dir = os.path.join(args.build, "bench", "recompute_100m")
    os.makedirs(run_dir, exist_ok=True)
    data = os.path.join(run_dir, f"data.b{args.batch}.t{args.seq}.s{args.steps}.jsonl")
    trn.write_data(data, args)
    env = trn.child_env(args.threads)
    print(f"model: 134M Llama ({args.layers} layers, hidden {args.hidden}), "
          f"{args.variant} r={args.rank}, B={args.batch} T={args.seq}, "
          f"{args.threads} threads; load {os.getloadavg()[0]:.2f}")

    rows = []
    for name, key in POLICIES:
        tag = name.replace(" ", "")
        recipe = os.path.join(run_dir, f"recipe.{args.variant}.{tag}.yaml")
        with open(recipe, "w") as f:
            f.write(trn.recipe_text(args, args.variant) + key + "\n")
        plan = os.path.join(run_dir, f"{args.variant}.{tag}.t{args.seq}.tplan")
        start = time.perf_counter()
        subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                        "--threads", str(args.threads), "-o", plan], check=True)
        compile_s = time.perf_counter() - start
        activations, gflop = inspect(tailor, plan)
        row = dict(name=name, activations=activations, gflop=gflop,
                   compile_s=compile_s)
        if not args.compile_only:
            out = os.path.join(run_dir, f"out.{tag}")
            subprocess.run(["rm", "-rf", out])
            rc, peak, _, text = trn.run_measured(
                [tailor, "train", plan, "--data", data, "--max-steps",
                 str(args.steps), "--output-dir", out, "--threads",
                 str(args.threads)], env)
            if rc != 0:
                sys.exit(f"tailor train ({name}) exited {rc}:\n{text[-2000:]}")
            metrics = [json.loads(line) for line in
                       open(os.path.join(out, "metrics.jsonl")) if line.strip()]
            row["ms"] = trn.stats([float(m["step_ms"]) for m in metrics])[0]
            row["peak"] = peak
            row["losses"] = [m["loss"] for m in metrics]
            with open(os.path.join(out, "adapter_model.safetensors"), "rb") as f:
                row["adapter"] = f.read()
        rows.append(row)

    base = rows[0]
    print(f"{'policy':12s} {'activations':>12s} {'of none':>8s} {'GFLOP/step':>11s}"
          f" {'ms/step':>9s} {'overhead':>9s} {'peak RSS':>9s}  identical")
    for row in rows:
        line = (f"{row['name']:12s} {row['activations'] / 2**20:9.1f} MiB "
                f"{row['activations'] / base['activations']:8.2f} "
                f"{row['gflop']:11.2f}")
        if "ms" in row:
            same = (row["losses"] == base["losses"] and
                    row["adapter"] == base["adapter"])
            line += (f" {row['ms']:9.1f} {row['ms'] / base['ms'] - 1:+9.1%} "
                     f"{row['peak']:6.0f} MiB  {'yes' if same else 'NO'}")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
