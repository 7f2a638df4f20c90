#!/usr/bin/env python3
"""Predicted speedup of gradient compression over plain DDP on slow links.

The cost model (tailor inspect --json --hardware FILE) on the 7B-shaped
graph of bench/gen_llama7b_onnx.py (cached under build/bench/llama7b),
full fine-tuning with AdamW (every weight's gradient all-reduced: the
setting of the seed's study, which trained whole models), one micro-batch
of --batch x --seq per rank, at 8 to 64 ranks over 1, 10 and 100 Gb/s
links, for each method of --methods: none (S-SGD: DDP's bucketed
all-reduce, overlapping backward as well-optimized S-SGD does, unless
--no-overlap), powersgd and acp-sgd (rank --rank), topk (--ratio of each
bucket's entries, values and i32 positions all-gathered) and signsgd (a
bit an entry and a scale per tensor, all-gathered), all compressed from
step 1 (compressed collectives run in the optimizer step: tailor does not
overlap them yet). The cost model counts each method's compute (top-k's
selection and scatter-add, sign-SGD's packing and averaging, PowerSGD's
products) and its collectives' sizes: an all-gather's bytes grow with
the ranks, an all-reduce's do not.

Compression's kernels are CPU kernels today (the planner refuses them on a
CUDA target), so the target is a CPU-backend hardware file given a GPU's
figures: --tflops of compute per rank (cpu_gflops_per_thread, one thread),
--memory-gbs of memory bandwidth, and the link's rate (link_gbs = Gb/s / 8)
and --latency-us per hop. Each (world, method) plan is compiled once; the
links are predicted from it with inspect's --hardware. Speedups are of
predicted step time (ACP-SGD's the mean of its P and Q steps), printed
next to the seed's published ratios for ACP-SGD (4.06x over S-SGD and
1.43x over PowerSGD, 8 to 64 GPUs, 1 Gb/s Ethernet to 100 Gb/s
InfiniBand, in its study; for Sign-SGD and top-k it reports no single
ratio, only that they often lose to well-optimized S-SGD, since their
all-gathers grow with the ranks and they give up all-reduce, pipelining
and tensor fusion).

  compression_links.py [--onnx build/bench/llama7b/llama7b.onnx]
      [--worlds 8,16,32,64] [--gbps 1,10,100]
      [--methods none,powersgd,acp-sgd,topk,signsgd]
      [--rank 4] [--ratio 0.01] [--batch 1] [--seq 512] [--tflops 100] [--memory-gbs 900]
      [--latency-us 10] [--no-overlap] [--json OUT.json]
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PUBLISHED = {"acp-sgd over none": 4.06, "acp-sgd over powersgd": 1.43}


def run(cmd, log):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        f.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} {cmd[1]} failed ({proc.returncode}); see {log}:\n"
                 + proc.stdout[-2000:])
    return proc.stdout


def ensure_onnx(args):
    if os.path.exists(args.onnx):
        return
    out = os.path.dirname(args.onnx)
    print(f"generating the 7B-shaped graph into {out} (about a minute)")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench",
                                                 "gen_llama7b_onnx.py"),
                    "-o", out], check=True)


def write_hardware(path, args, world, gbps):
    gpus = min(world, 8)
    lines = [f"name: bench-{world}r-{gbps:g}gbps", "backend: cpu",
             f"gpus: {gpus}", f"nodes: {world // gpus}",
             f"cpu_gflops_per_thread: {args.tflops * 1000:g}",
             f"bandwidth_gbs: {args.memory_gbs:g}",
             f"link_gbs: {gbps / 8:g}",
             f"link_latency_us: {args.latency_us:g}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_recipe(path, args, method):
    lines = ["adapter: full", f"sequence_len: {args.seq}",
             f"micro_batch_size: {args.batch}",
             "gradient_accumulation_steps: 1", "learning_rate: 1e-5",
             "optimizer: adamw", "max_steps: 10", "zero_stage: 0",
             f"overlap_comm: {'true' if method == 'none' and args.overlap else 'false'}"]
    if method != "none":
        lines += [f"gradient_compression: {method}",
                  "compression_start_step: 0"]
    if method in ("powersgd", "acp-sgd"):
        lines.append(f"compression_rank: {args.rank}")
    if method == "topk":
        lines.append(f"compression_ratio: {args.ratio:g}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def predict(args, work, world, method):
    """{gbps: (step seconds, bytes sent per step)} of one plan."""
    tailor = os.path.join(args.bin, "tailor")
    name = f"w{world}-{method}"
    log = os.path.join(work, "bench.log")
    recipe = os.path.join(work, name + ".yaml")
    write_recipe(recipe, args, method)
    hardware = os.path.join(work, f"{name}-{args.gbps[-1]:g}.hw.yaml")
    write_hardware(hardware, args, world, args.gbps[-1])
    plan = os.path.join(work, name + ".tplan")
    run([tailor, "compile", args.onnx, "--recipe", recipe, "--hardware",
         hardware, "--threads", "1", "-o", plan], log)
    got = {}
    for gbps in args.gbps:
        hardware = os.path.join(work, f"{name}-{gbps:g}.hw.yaml")
        write_hardware(hardware, args, world, gbps)
        doc = json.loads(run([tailor, "inspect", plan, "--json",
                              "--hardware", hardware], log))
        rank0 = doc["ranks"][0]
        got[gbps] = (rank0["predicted_step_seconds"],
                     rank0["predicted_bytes_sent_per_step"])
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench",
                                                   "compression_links"))
    ap.add_argument("--onnx", default=os.path.join(
        ROOT, "build", "bench", "llama7b", "llama7b.onnx"))
    ap.add_argument("--worlds", default="8,16,32,64")
    ap.add_argument("--gbps", default="1,10,100")
    ap.add_argument("--methods",
                    default="none,powersgd,acp-sgd,topk,signsgd")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--tflops", type=float, default=100.0)
    ap.add_argument("--memory-gbs", type=float, default=900.0)
    ap.add_argument("--latency-us", type=float, default=10.0)
    ap.add_argument("--no-overlap", dest="overlap", action="store_false",
                    help="S-SGD's all-reduces in the optimizer step, not "
                    "behind backward")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.worlds = [int(w) for w in args.worlds.split(",")]
    args.gbps = [float(g) for g in args.gbps.split(",")]
    args.methods = args.methods.split(",")
    if "none" not in args.methods:
        sys.exit("--methods needs none (the baseline)")
    os.makedirs(args.work, exist_ok=True)
    ensure_onnx(args)

    results = {}
    for world in args.worlds:
        for method in args.methods:
            results[(world, method)] = predict(args, args.work, world, method)

    compressed = [m for m in args.methods if m != "none"]
    head = f"{'ranks':>5} {'link':>8} {'S-SGD ms':>10}"
    for m in compressed:
        head += f" {m + ' ms':>13} {'x S-SGD':>8}"
    if "acp-sgd" in compressed and "powersgd" in compressed:
        head += f" {'acp/psgd':>9}"
    print(f"7B-shaped graph, full fine-tuning, micro-batch {args.batch} x "
          f"{args.seq}, {args.tflops:g} TFLOP/s and {args.memory_gbs:g} GB/s "
          f"per rank, rank {args.rank}, top-k ratio {args.ratio:g}")
    print(head)
    rows = []
    for world in args.worlds:
        for gbps in args.gbps:
            base, base_bytes = results[(world, "none")][gbps]
            line = f"{world:>5} {gbps:>5g}Gb/s {base * 1e3:>10.1f}"
            row = dict(ranks=world, gbps=gbps, none_s=base,
                       none_bytes=base_bytes)
            for m in compressed:
                s, sent = results[(world, m)][gbps]
                line += f" {s * 1e3:>13.1f} {base / s:>7.2f}x"
                row[m + "_s"] = s
                row[m + "_bytes"] = sent
                row[m + "_speedup"] = base / s
            if "acp-sgd" in compressed and "powersgd" in compressed:
                ratio = (results[(world, "powersgd")][gbps][0] /
                         results[(world, "acp-sgd")][gbps][0])
                line += f" {ratio:>8.2f}x"
                row["acp_over_powersgd"] = ratio
            print(line)
            rows.append(row)
    print("bytes sent per rank per step (MiB): " + ", ".join(
        f"{m} {results[(args.worlds[0], m)][args.gbps[0]][1] / 2**20:.1f}"
        for m in args.methods) + f" (at {args.worlds[0]} ranks)")
    print("the seed's published ratios (8-64 GPUs, 1-100 Gb/s): ACP-SGD "
          f"{PUBLISHED['acp-sgd over none']}x over S-SGD, "
          f"{PUBLISHED['acp-sgd over powersgd']}x over PowerSGD")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, published=PUBLISHED), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
