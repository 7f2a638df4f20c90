#!/usr/bin/env python3
"""Recomputation changes memory, never numbers (issue: planning under a
memory budget).

For two Hugging Face Llama models exported by torch.onnx (export_hf's seeded
tiny Llama with 2 layers, and the same with 12 layers), a LoRA recipe on
every linear layer is compiled with each recomputation policy
(`gradient_checkpointing: false | true | selective` and
`activation_memory_budget: 0.5`) and trained for 20 steps on the CPU. The
2-layer recipe has lora_dropout 0.1, so recomputed dropout must redraw the
very same mask.

Checks, per policy against `none`:
  * bit-identical training: every step's loss and grad_norm as printed, and
    the final adapter_model.safetensors byte for byte;
  * memory from the plan (`tailor inspect --json`, memory.activations): full
    < selective < none; the budget plan's activation arena at most half of
    none's when its note says the budget was reached; the budget plan
    recomputes fewer FLOPs than full (the plan's recompute note).

  train_recompute.py --bin build/bin --work build/test/train-recompute
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

POLICIES = {
    "none": {"gradient_checkpointing": False},
    "full": {"gradient_checkpointing": True},
    "selective": {"gradient_checkpointing": "selective"},
    "budget": {"activation_memory_budget": 0.5},
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
           "down_proj"]
STEPS = 20


def inspect(bin_dir, plan):
    out = subprocess.run([os.path.join(bin_dir, "tailor"), "inspect", plan,
                          "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    note = next((n["message"] for n in doc.get("notes", [])
                 if n["kind"] == "recompute"), "")
    gflop = re.search(r"([0-9.]+) GFLOP", note)
    return doc["memory"]["activations"], float(gflop.group(1)) if gflop else 0.0


def run_policy(args, onnx_path, rows_path, name, layers, seq, dropout):
    recipe = tc.recipe_defaults()
    recipe.update(lora_target_modules=TARGETS, lora_dropout=dropout,
                  sequence_len=seq, max_steps=STEPS, save_steps=STEPS)
    recipe.update(POLICIES[name])
    work = os.path.join(args.work, f"llama{layers}-{name}")
    os.makedirs(work, exist_ok=True)
    out, err = tc.tailor_compile_train(args.bin, onnx_path, recipe, work,
                                       rows_path)
    if err:
        return None, err
    metrics = [(m["loss"], m["grad_norm"]) for _, m in
               sorted(tc.read_metrics(out).items())]
    with open(os.path.join(out, "adapter_model.safetensors"), "rb") as f:
        adapter = f.read()
    activations, gflop = inspect(args.bin, os.path.join(work, "plan.tplan"))
    return dict(metrics=metrics, adapter=adapter, activations=activations,
                gflop=gflop), None


def check_model(args, layers, seq, dropout):
    failures = []
    onnx_path = tc.export_llama(args.work, layers)
    rows = tc.make_rows(n_rows=STEPS * tc.B, seq=seq)
    rows_path = os.path.join(args.work, f"rows.t{seq}.jsonl")
    tc.write_jsonl(rows, rows_path)
    results = {}
    for name in POLICIES:
        result, err = run_policy(args, onnx_path, rows_path, name, layers, seq,
                                 dropout)
        if err:
            failures.append(f"llama{layers} {name}: {err}")
            continue
        results[name] = result
        print(f"llama{layers} T={seq} {name:9s}: activations "
              f"{result['activations'] / 2**20:7.3f} MiB, recompute "
              f"{result['gflop']:.3f} GFLOP/step, last loss "
              f"{result['metrics'][-1][0]}")
    if "none" not in results:
        return failures
    base = results["none"]
    for name, result in results.items():
        if name == "none":
            continue
        if result["metrics"] != base["metrics"]:
            step = next(i for i, (a, b) in enumerate(
                zip(result["metrics"], base["metrics"])) if a != b)
            failures.append(f"llama{layers} {name}: step {step + 1} loss/grad_norm "
                            f"{result['metrics'][step]} != none's "
                            f"{base['metrics'][step]}")
        if result["adapter"] != base["adapter"]:
            failures.append(f"llama{layers} {name}: final adapter differs from "
                            "none's")
    act = {name: r["activations"] for name, r in results.items()}
    if {"full", "selective"} <= act.keys() and not (
            act["full"] < act["selective"] < act["none"]):
        failures.append(f"llama{layers}: expected full < selective < none "
                        f"activations, got {act}")
    if "budget" in results and "full" in results:
        if act["budget"] > act["none"] // 2 and act["full"] <= act["none"] // 2:
            failures.append(f"llama{layers}: budget 0.5 plan holds "
                            f"{act['budget']} B of activations, above half "
                            f"of {act['none']} B")
        if not results["budget"]["gflop"] < results["full"]["gflop"]:
            failures.append(f"llama{layers}: budget recomputes "
                            f"{results['budget']['gflop']} GFLOP, not fewer "
                            f"than full's {results['full']['gflop']}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = check_model(args, layers=2, seq=tc.T, dropout=0.1)
    failures += check_model(args, layers=12, seq=64, dropout=0.0)
    for failure in failures:
        print("FAIL:", failure)
    print("summary:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
