#!/usr/bin/env python3
"""Step time with and without each kind of offload on the CPU.

The seeded Llama of cpu_forward_100m.py (default hidden 512, 8 layers, the
parameter count is printed), LoRA r=8 on q,k,v,o (QLoRA's NF4 bytes with
--qlora, every weight with --full), one rank, compiled for `--hardware cpu`
with no offload and with each of --kinds: `param` (offload_param: cpu),
`optimizer` (offload_optimizer: cpu: AdamW's state and update on the host),
`optimizer-overlap` (the same with overlap_comm: the gradient copies, and
without clipping -- --max-grad-norm 0 -- the host updates themselves, run
during backward, a layer at a time, on the host stream's own thread),
`activations` (enable_activation_offloading) and `all`. On the CPU target
"device" and host memory are the same DRAM, so the copies cost memcpy time:
what this measures is each offload's cost in a step against the cost
model's prediction (hardware `cpu`: host_link_gbs 10), and the device bytes
it frees (inspect --json).

  cpu_offload.py [--steps 6] [--batch 2] [--seq 128] [--threads 2]
                 [--qlora | --full] [--max-grad-norm N]
                 [--kinds param,optimizer,optimizer-overlap,activations,all]

Prints per run: measured ms/step (steps 2..S), predicted ms, device and host
bytes, bytes copied per step (counted by the runtime) and predicted.
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


KINDS = {
    "none": [],
    "param": ["offload_param: cpu"],
    "optimizer": ["offload_optimizer: cpu"],
    "optimizer-overlap": ["offload_optimizer: cpu", "overlap_comm: true"],
    "activations": ["enable_activation_offloading: true"],
    "all": ["offload_param: cpu", "offload_optimizer: cpu",
            "enable_activation_offloading: true"],
}


def adapter_of(args):
    return "full" if args.full else "qlora" if args.qlora else "lora"


def run(args, onnx_path, data, offload):
    tag = adapter_of(args) + "-" + offload
    work = os.path.join(args.build, "bench", "cpu_offload", tag)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    recipe = os.path.join(work, "recipe.yaml")
    with open(recipe, "w") as f:
        adapter = ([f"adapter: {adapter_of(args)}"] if args.full else
                   [f"adapter: {adapter_of(args)}", "lora_r: 8",
                    "lora_target_modules: [q_proj, k_proj, v_proj, o_proj]"])
        f.write("\n".join(adapter + [
            f"sequence_len: {args.seq}", f"micro_batch_size: {args.batch}",
            "learning_rate: 1e-4", f"max_steps: {args.steps}",
            f"save_steps: {args.steps}", "shuffle: false"] +
            ([f"max_grad_norm: {args.max_grad_norm}"]
             if args.max_grad_norm is not None else []) +
            # Full fine-tuning has no frozen weights to offload.
            [k for k in KINDS[offload]
             if not (args.full and k.startswith("offload_param"))]) + "\n")
    tailor = os.path.join(args.build, "bin", "tailor")
    plan = os.path.join(work, "plan.tplan")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--threads", str(args.threads), "-o", plan], check=True,
                   capture_output=True)
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json"],
                                    check=True, capture_output=True,
                                    text=True).stdout)
    out = os.path.join(work, "out")
    subprocess.run([tailor, "train", plan, "--data", data, "--output-dir", out,
                    "--threads", str(args.threads)], check=True,
                   capture_output=True)
    rows = [json.loads(line) for line in open(os.path.join(out,
                                                           "metrics.jsonl"))]
    timed = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
    rank = doc["ranks"][0]
    return dict(tag=tag, ms=sum(timed) / len(timed),
                predicted=rank["predicted_step_seconds"] * 1e3,
                device=rank["device_peak_bytes"], host=rank["host_peak_bytes"],
                copied=rows[-1].get("bytes_copied", 0),
                predicted_copied=rank.get("predicted_bytes_copied_per_step", 0),
                loss=rows[-1]["loss"],
                # tailor-overlap-host-updates gave train_step the step.
                host_in_backward=any(i["name"] == "update_step"
                                     for i in doc.get("inputs", [])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--qlora", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--max-grad-norm", type=float, default=None,
                    help="the recipe's max_grad_norm for every run (0: no "
                         "clipping, so host updates can run in backward)")
    ap.add_argument("--kinds", default="param",
                    help="comma-separated: " + ", ".join(list(KINDS)[1:]))
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=1376)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    onnx_path = fwd.exported_model(args, args.build)
    data = os.path.join(args.build, "bench", "cpu_offload", "data.jsonl")
    os.makedirs(os.path.dirname(data), exist_ok=True)
    with open(data, "w") as f:
        for i in range(args.steps * args.batch * 2):
            ids = [(i * 7 + j * 13) % args.vocab for j in range(args.seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    kinds = ["none"] + [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        ap.error(f"unknown offload kinds {unknown}")
    results = [run(args, onnx_path, data, o) for o in kinds]
    for r in results:
        print(f"{r['tag']:>12}: {r['ms']:8.2f} ms/step (predicted "
              f"{r['predicted']:.2f}); device {r['device'] / 2**20:7.2f} MiB, "
              f"host {r['host'] / 2**20:7.2f} MiB; copied "
              f"{r['copied'] / 2**20:.2f} MiB/step (predicted "
              f"{r['predicted_copied'] / 2**20:.2f}); last loss {r['loss']}"
              + ("; host updates during backward" if r["host_in_backward"]
                 else ""))
    a = results[0]
    for b in results[1:]:
        print(f"{b['tag']}: {100 * (b['ms'] / a['ms'] - 1):+.1f}% step time "
              f"(predicted {100 * (b['predicted'] / a['predicted'] - 1):+.1f}"
              f"%), {(a['device'] - b['device']) / 2**20:.2f} MiB less device "
              f"memory; same losses: {a['loss'] == b['loss']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
