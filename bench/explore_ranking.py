#!/usr/bin/env python3
"""Does `tailor explore`'s ranking hold when the plans run? (the ~134M Llama
on this CPU)

1. Compiles the LoRA plan of bench/cpu_train_100m.sh and runs `tailor
   calibrate` on it (a hardware file for this machine, as
   bench/cost_model_100m.py does), unless --hardware names one.
2. `tailor explore` on that hardware (one CPU rank, seq --seq, --global-batch
   sequences a step) with --fix pins for a quicker search (default: LoRA
   r=8 on q_proj and v_proj as the recipe has it, weights fp32 or nf4).
3. Takes the --top fastest rows explore predicts, trains each for --steps
   steps with `tailor train` (mean ms/step over steps 2..N) and prints
   predicted against measured, the pairs ranked differently and Kendall's
   tau between the two orders.

  bench/explore_ranking.py [--top 5] [--steps 4] [--seq 128] [--threads 2]
"""

import argparse
import itertools
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cost_model_100m as cm  # noqa: E402
import cpu_forward_100m as fwd  # noqa: E402
import cpu_train_100m as trn  # noqa: E402


def kendall_tau(a, b):
    pairs = list(itertools.combinations(range(len(a)), 2))
    agree = sum((a[i] - a[j]) * (b[i] - b[j]) > 0 for i, j in pairs)
    disagree = sum((a[i] - a[j]) * (b[i] - b[j]) < 0 for i, j in pairs)
    return (agree - disagree) / len(pairs) if pairs else 1.0, [
        (i, j) for i, j in pairs if (a[i] - a[j]) * (b[i] - b[j]) < 0]


def explore(tailor, onnx_path, recipe, hardware, args):
    cmd = [tailor, "explore", onnx_path, "--recipe", recipe, "--hardware",
           hardware, "--threads", str(args.threads), "--global-batch",
           str(args.global_batch), "--json", "--all"]
    for fix in args.fix:
        cmd += ["--fix", fix]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                    check=True).stdout)
    rows = sorted((r for r in doc["rows"] if "error" not in r),
                  key=lambda r: r["predicted_step_seconds"])
    return doc, rows[:args.top]


def measure(tailor, onnx_path, recipe, hardware, row, data, run_dir, args, i):
    plan = os.path.join(run_dir, f"rank{i}.tplan")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", hardware, "--threads", str(args.threads),
                    "-o", plan] + [f"{k}={v}" for k, v in row["recipe"].items()],
                   check=True, capture_output=True)
    return cm.measured_ms(tailor, plan, data, run_dir, args, args.threads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=4)
    ap.add_argument("--hardware", default="",
                    help="a hardware file (default: calibrate this machine)")
    ap.add_argument("--fix", action="append",
                    default=["adapter=lora", "offload=none"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    trn.add_model_args(ap)  # the model of cpu_train_100m
    args = ap.parse_args()
    tailor = os.path.join(args.build, "bin", "tailor")
    onnx_path = fwd.exported_model(args, args.build)
    run_dir = os.path.join(args.build, "bench", "explore_ranking")
    os.makedirs(run_dir, exist_ok=True)
    hardware = args.hardware
    if not hardware:
        hardware = os.path.join(run_dir, "calibrated.yaml")
        plan = cm.compile_plan(tailor, onnx_path, args, run_dir, args.seq,
                               args.threads, "cpu")
        subprocess.run([tailor, "calibrate", plan, "--threads",
                        str(args.threads), "-o", hardware], check=True,
                       capture_output=True)
    recipe = os.path.join(run_dir, f"recipe.t{args.seq}.yaml")
    with open(recipe, "w") as f:
        f.write(trn.recipe_text(args, "lora"))
    data = os.path.join(run_dir, f"data.t{args.seq}.jsonl")
    trn.write_data(data, args)
    doc, rows = explore(tailor, onnx_path, recipe, hardware, args)
    print(f"explore: {doc['evaluated']} configurations in "
          f"{doc['seconds']:.1f} s on {os.path.basename(hardware)}; the "
          f"{len(rows)} fastest predicted, trained {args.steps} steps each:")
    predicted, measured = [], []
    for i, row in enumerate(rows):
        ms = measure(tailor, onnx_path, recipe, hardware, row, data, run_dir,
                     args, i)
        predicted.append(row["predicted_step_seconds"] * 1e3)
        measured.append(ms)
        knobs = ", ".join(f"{k} {v}" for k, v in sorted(row["knobs"].items()))
        print(f"  {i + 1}. predicted {predicted[-1]:8.1f} ms, measured "
              f"{ms:8.1f} ms ({ms / predicted[-1] - 1:+.0%})  {knobs}")
    tau, disagree = kendall_tau(predicted, measured)
    print(f"Kendall tau {tau:+.2f} over {len(rows)} configurations; pairs "
          f"ranked differently: "
          + (", ".join(f"{i + 1}-{j + 1}" for i, j in disagree) or "none"))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
