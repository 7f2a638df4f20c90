#!/usr/bin/env python3
"""Layer split on CPU ranks: naive vs 1F1B against one rank, measured.

Seed 000's "auto split" (Hugging Face's device_map="auto") puts consecutive
layers on different devices and runs one micro-batch through them at a
time, so only one device works at once. 1F1B keeps every stage busy once
the pipeline is full. This bench measures both on CPU ranks (one process
per stage, mpirun on loopback, --threads per rank) against the same plan on
one rank with as many threads as one stage has, on cpu_forward_100m.py's
seeded Llama (default hidden 256, 8 layers, vocab 4096), LoRA on every
linear layer, the same global batch (--micro-batches x --batch x --seq):

  tailor compile model.onnx --recipe R.yaml [pipeline_stages=S
      pipeline_schedule=naive|1f1b] --hardware Sxcpu -o P.tplan
  [mpirun -np S] tailor train P.tplan --data D --threads T

Reported per run: mean ms per step over steps 2..N next to the cost
model's prediction (inspect --json: the pipeline's simulated schedule for
the split plans), tokens/s, the speedup over one rank, and each rank's
planned device bytes. With
S stages each rank has 1/S of the layers; every stage but the last replays
its forward in backward (it keeps only its input per micro-batch in
flight), so 1F1B's best case over one rank is about S / (1 + 1/3 (S-1)/S)
less the fill and drain bubble ((S - 1) of M + S - 1 slots). Ranks share
the machine's cores: S x T above the core count measures contention, and
the line says so.

  pipeline_cpu.py [--stages 2] [--micro-batches 8] [--steps 6] [--batch 2]
                  [--seq 64] [--threads 1] [--layers 8] [--hidden 256]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))

import cpu_forward_100m as fwd  # noqa: E402  (the model, its export and cache)
from cpu_ranks import mpirun  # noqa: E402


def write_data(path, args):
    import numpy as np

    rng = np.random.default_rng(args.seed + 1)
    rows = args.steps * args.micro_batches * args.batch
    with open(path, "w") as f:
        for _ in range(rows):
            f.write(json.dumps({"input_ids": rng.integers(
                0, args.vocab, args.seq).tolist()}) + "\n")


def write_recipe(path, args, stages, schedule):
    lines = ["adapter: lora", "lora_r: 8", "lora_alpha: 16",
             "lora_target_modules: all-linear", f"sequence_len: {args.seq}",
             f"micro_batch_size: {args.batch}",
             f"gradient_accumulation_steps: {args.micro_batches}",
             "learning_rate: 1e-4", "optimizer: adamw", "max_grad_norm: 1.0",
             f"max_steps: {args.steps}", f"save_steps: {args.steps}",
             "shuffle: false"]
    if stages > 1:
        lines += [f"pipeline_stages: {stages}",
                  f"pipeline_schedule: {schedule}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(args, onnx_path, data, stages, schedule):
    name = f"stages{stages}-{schedule}" if stages > 1 else "one-rank"
    work = os.path.join(args.build, "bench", "pipeline_cpu", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    recipe = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, args, stages, schedule)
    plan = os.path.join(work, "plan.tplan")
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", f"{stages}xcpu" if stages > 1 else "cpu",
                    "--threads", str(args.threads), "-o", plan],
                   check=True, capture_output=True)
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json"],
                                    check=True, capture_output=True,
                                    text=True).stdout)
    out = os.path.join(work, "out")
    cmd = [tailor, "train", plan, "--data", data, "--output-dir", out,
           "--threads", str(args.threads)]
    if stages > 1:
        cmd = mpirun(stages) + cmd
    subprocess.run(cmd, check=True, capture_output=True)
    rows = [json.loads(line) for line in open(os.path.join(out,
                                                           "metrics.jsonl"))]
    timed = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
    ms = sum(timed) / len(timed)
    tokens = args.micro_batches * args.batch * args.seq
    predicted = (doc["pipeline"]["predicted_step_seconds"] if stages > 1
                 else doc["ranks"][0]["predicted_step_seconds"]) or 0
    return dict(name=name, ms=ms, tokens_per_s=tokens / (ms / 1e3),
                loss=rows[-1]["loss"], predicted_ms=predicted * 1e3,
                device=[r["device_peak_bytes"] for r in doc["ranks"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=688)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    onnx_path = fwd.exported_model(args, args.build)
    data = os.path.join(args.build, "bench", "pipeline_cpu", "data.jsonl")
    os.makedirs(os.path.dirname(data), exist_ok=True)
    write_data(data, args)
    cores = os.cpu_count()
    print(f"Llama hidden {args.hidden}, {args.layers} layers, vocab "
          f"{args.vocab}, LoRA r=8 all-linear; step = {args.micro_batches} "
          f"micro-batches x {args.batch} x {args.seq} tokens; "
          f"{args.threads} thread(s) per rank, {cores} cores"
          + (" (ranks oversubscribe the cores)"
             if args.stages * args.threads > cores else ""))
    results = [run(args, onnx_path, data, 1, "")]
    for schedule in ("naive", "1f1b"):
        results.append(run(args, onnx_path, data, args.stages, schedule))
    base = results[0]["ms"]
    for r in results:
        device = ", ".join(f"{b / 2**20:.1f}" for b in r["device"])
        print(f"{r['name']:>14}: {r['ms']:8.1f} ms/step (predicted "
              f"{r['predicted_ms']:.1f})  "
              f"{r['tokens_per_s']:8.0f} tok/s  x{base / r['ms']:.2f} vs one "
              f"rank  device MiB per rank [{device}]  last loss "
              f"{r['loss']:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
