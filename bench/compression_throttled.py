#!/usr/bin/env python3
"""Gradient compression measured over a throttled link, next to the cost
model's prediction.

The link: CPU ranks on one machine talk through MPI's TCP transport over
the loopback interface only (`--mca btl tcp,self`, `btl_tcp_if_include
lo`), and the loopback is shaped by a Linux token-bucket filter (`tc qdisc
add dev lo root tbf rate R`), removed again when the script ends. One
bucket serves every rank, so when all ranks send at once (a ring's steps)
each gets R / ranks: the hardware file the plans are predicted with says
so (`link_gbs` = R / 8 / ranks). Needs root (CAP_NET_ADMIN) and `tc`; it
shapes all loopback traffic of its network namespace while it runs, so on a
shared machine give it a namespace of its own:

  unshare -n sh -c 'ip link set lo up && bench/compression_throttled.py'

The model is cpu_ranks.py's seeded Llama (default 5.3M parameters, full
fine-tuning with AdamW: about 21 MB of f32 gradients a step), the compute
figures come from `tailor calibrate` on its one-rank plan, and each
method trains --steps steps at world --world (steps 2.. timed), one thread
per rank:

  none      DDP's all-reduce of every gradient
  powersgd  PowerSGD of rank --rank, compressed from step 1
  acp-sgd   ACP-SGD of rank --rank
  topk      top-k of ratio --ratio, error feedback
  signsgd   EF-SignSGD

  compression_throttled.py [--rates-mbit 100,1000] [--world 2] [--steps 5]
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

import cpu_forward_100m as fwd  # noqa: E402
import cpu_ranks  # noqa: E402

METHODS = ("none", "powersgd", "acp-sgd", "topk", "signsgd")


def shape_loopback(mbit):
    """A token bucket of `mbit` Mbit/s on lo (the bucket holds at least a
    64 KiB loopback frame, or a 4 ms burst)."""
    unshape_loopback()
    burst = max(256 * 1024, int(mbit * 1e6 / 8 / 250))
    subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                    f"{mbit}mbit", "burst", str(burst), "latency", "200ms"],
                   check=True)


def unshape_loopback():
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"],
                   capture_output=True)


def write_recipe(path, args, method, world):
    lines = ["adapter: full", f"sequence_len: {args.seq}",
             f"micro_batch_size: {args.batch}",
             f"gradient_accumulation_steps: "
             f"{cpu_ranks.GLOBAL_MICRO_BATCHES // world}",
             "learning_rate: 1e-4", "optimizer: adamw", "max_grad_norm: 1.0",
             f"max_steps: {args.steps}", f"save_steps: {args.steps}",
             "shuffle: false", "zero_stage: 0", "overlap_comm: false"]
    if method != "none":
        lines += [f"gradient_compression: {method}",
                  "compression_start_step: 0"]
    if method in ("powersgd", "acp-sgd"):
        lines.append(f"compression_rank: {args.rank}")
    if method == "topk":
        lines.append(f"compression_ratio: {args.ratio:g}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def calibrate(args, onnx_path, work):
    """The calibrated CPU figures (one thread) of the one-rank plan."""
    recipe = os.path.join(work, "one.yaml")
    write_recipe(recipe, args, "none", 1)
    plan = os.path.join(work, "one.tplan")
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--threads", "1", "-o", plan], check=True,
                   capture_output=True)
    out = os.path.join(work, "calibrated.yaml")
    subprocess.run([tailor, "calibrate", plan, "--threads", "1", "-o", out],
                   check=True, capture_output=True)
    with open(out) as f:
        return [l for l in f.read().splitlines()
                if l and not l.startswith("#") and not l.startswith("name")]


def write_hardware(path, calibrated, world, mbit, latency_us):
    # The bucket passes exactly its rate (TCP/IP headers aside): the link's
    # efficiency is 1, not the default that stands for MPI and NCCL on
    # real networks.
    lines = [f"name: lo-{mbit}mbit", *calibrated, f"gpus: {world}",
             f"link_gbs: {mbit / 8e3 / world:g}",
             f"link_latency_us: {latency_us:g}", "efficiency_comm: 1.0"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run_method(args, onnx_path, data, work, hardware, method):
    recipe = os.path.join(work, f"{method}.yaml")
    write_recipe(recipe, args, method, args.world)
    plan = os.path.join(work, f"{method}.tplan")
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", hardware, "--threads", "1", "-o", plan],
                   check=True, capture_output=True)
    # The plan records the target's name, not a file's figures: inspect
    # reads them again.
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json",
                                     "--hardware", hardware],
                                    check=True, capture_output=True,
                                    text=True).stdout)
    out = os.path.join(work, f"{method}-out")
    shutil.rmtree(out, ignore_errors=True)
    mpi = cpu_ranks.mpirun(args.world) + [
        "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
        "--mca", "oob_tcp_if_include", "lo"]
    subprocess.run(mpi + [tailor, "train", plan, "--data", data,
                          "--output-dir", out, "--threads", "1"],
                   check=True, capture_output=True, timeout=1800)
    rows = [json.loads(line)
            for line in open(os.path.join(out, "metrics.jsonl"))]
    timed = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
    rank = doc["ranks"][0]
    return dict(ms=sum(timed) / len(timed),
                predicted_ms=rank["predicted_step_seconds"] * 1e3,
                sent=rows[-1].get("bytes_sent", 0),
                predicted_sent=rank.get("predicted_bytes_sent_per_step", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates-mbit", default="100,1000")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--latency-us", type=float, default=50)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=688)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if shutil.which("tc") is None or os.geteuid() != 0:
        print("compression_throttled.py needs root and tc (iproute2)")
        return 1
    onnx_path = fwd.exported_model(args, args.build)
    work = os.path.join(args.build, "bench", "compression_throttled")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data.jsonl")
    cpu_ranks.write_data(data, args)
    calibrated = calibrate(args, onnx_path, work)
    print(f"world {args.world}, one thread a rank, MPI over TCP on a "
          f"token-bucket-shaped loopback; {args.steps} steps, 2.. timed")
    print(f"{'link':>10} {'method':>9} {'ms/step':>9} {'predicted':>10} "
          f"{'speedup':>8} {'predicted':>10} {'MiB sent':>9} "
          f"{'predicted':>10}")
    try:
        for mbit in (int(r) for r in args.rates_mbit.split(",")):
            hardware = os.path.join(work, f"lo-{mbit}.yaml")
            write_hardware(hardware, calibrated, args.world, mbit,
                           args.latency_us)
            shape_loopback(mbit)
            base = None
            for method in args.methods.split(","):
                r = run_method(args, onnx_path, data, work, hardware, method)
                base = base or r
                print(f"{mbit:>6}Mb/s {method:>9} {r['ms']:9.1f} "
                      f"{r['predicted_ms']:10.1f} "
                      f"{base['ms'] / r['ms']:7.2f}x "
                      f"{base['predicted_ms'] / r['predicted_ms']:9.2f}x "
                      f"{r['sent'] / 2**20:9.3f} "
                      f"{r['predicted_sent'] / 2**20:10.3f}", flush=True)
    finally:
        unshape_loopback()
    return 0


if __name__ == "__main__":
    sys.exit(main())
