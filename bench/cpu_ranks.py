#!/usr/bin/env python3
"""Step time of full fine-tuning at world 1, 2 and 4 on the CPU, and how much
of the communication is hidden behind compute.

The model is cpu_forward_100m.py's seeded LlamaForCausalLM at a size four
CPU ranks can train on a small machine (default hidden 256, 4 layers, 4
heads, intermediate 688, vocab 4096; the parameter count is printed),
exported once and cached as that script does. Every world trains the same
global batch (micro-batch B x T per rank, gradient accumulation
4 / world), full fine-tuning with AdamW, each strategy of --strategies at
every world size of --worlds, one rank per process with --threads threads:

  tailor compile model.onnx --recipe R.yaml --hardware Nxcpu -o P.tplan
  mpirun --oversubscribe -np N tailor train P.tplan --data D --trace T.json

Reported per run: mean ms per step over steps 2..S (metrics.jsonl's
step_ms, the first step excluded), tokens/s, the bytes each rank sent per
step (counted by the communicator) next to the plan's prediction, the share
of the measured step spent in collectives (rank 0's --trace of steps 2..3),
and the share of that hidden behind compute: collectives overlapping a
kernel on another stream. Ranks oversubscribing the cores (world x threads
> cores) slow each other; the line says so.

PowerSGD runs as a strategy: `powersgd:R` is DDP with gradient_compression
powersgd of rank R, compressed from step 2 (so every timed step is).

  cpu_ranks.py [--worlds 1,2,4] [--strategies ddp,zero2,powersgd:1] [--steps 8]
               [--overlap false,true] [--bucket-mb 1]
               [--batch 2] [--seq 64] [--threads 1]
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

GLOBAL_MICRO_BATCHES = 4


def mpirun(n):
    cmd = ["mpirun", "--oversubscribe", "-np", str(n)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def write_data(path, args):
    import numpy as np

    rng = np.random.default_rng(args.seed + 1)
    rows = args.steps * GLOBAL_MICRO_BATCHES * args.batch
    with open(path, "w") as f:
        for _ in range(rows):
            f.write(json.dumps({"input_ids": rng.integers(
                0, args.vocab, args.seq).tolist()}) + "\n")


def write_recipe(path, args, world, strategy, overlap):
    # "powersgd[:R]": DDP with PowerSGD of rank R (1), compressed from step 2.
    base, _, rank = strategy.partition(":")
    compress = base == "powersgd"
    stage = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}.get(
        "ddp" if compress else base)
    lines = ["adapter: full", f"sequence_len: {args.seq}",
             f"micro_batch_size: {args.batch}",
             f"gradient_accumulation_steps: {GLOBAL_MICRO_BATCHES // world}",
             "learning_rate: 1e-4", "optimizer: adamw", "max_grad_norm: 1.0",
             f"max_steps: {args.steps}", f"save_steps: {args.steps}",
             "shuffle: false", f"overlap_comm: {overlap}",
             f"ddp_bucket_cap_mb: {args.bucket_mb}"]
    lines.append(f"zero_stage: {stage}" if stage is not None else
                 "fsdp_sharding_strategy: HYBRID_SHARD")
    if compress:
        lines += ["gradient_compression: powersgd",
                  f"compression_rank: {rank or 1}",
                  "compression_start_step: 1"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def comm_shares(trace_path):
    """(share of the step in collectives, share of those hidden)."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        return 0.0, 0.0
    collective = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"}
    comm = [e for e in events if e["name"] in collective]
    compute = [e for e in events if e["name"] not in collective]
    span = (max(e["ts"] + e["dur"] for e in events) -
            min(e["ts"] for e in events))
    comm_time = sum(e["dur"] for e in comm)
    hidden = 0.0
    for c in comm:
        for k in compute:
            if k["tid"] != c["tid"]:
                lo = max(c["ts"], k["ts"])
                hi = min(c["ts"] + c["dur"], k["ts"] + k["dur"])
                hidden += max(0.0, hi - lo)
    return (comm_time / span if span else 0.0,
            hidden / comm_time if comm_time else 0.0)


def run(args, onnx_path, data, world, strategy, overlap):
    work = os.path.join(args.build, "bench", "cpu_ranks",
                        f"{strategy.replace(':', '-r')}-{world}-overlap-"
                        f"{overlap}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    recipe = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, args, world, strategy, overlap)
    plan = os.path.join(work, "plan.tplan")
    hardware = f"{world}xcpu" if strategy != "hybrid" else f"2x{world // 2}xcpu"
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", hardware, "--threads", str(args.threads),
                    "-o", plan], check=True, capture_output=True)
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json"],
                                    check=True, capture_output=True,
                                    text=True).stdout)
    out = os.path.join(work, "out")
    trace = os.path.join(work, "trace.json")
    cmd = [tailor, "train", plan, "--data", data, "--output-dir", out,
           "--threads", str(args.threads), "--trace", trace,
           "--trace-steps", "2"]
    if world > 1:
        cmd = mpirun(world) + cmd
    subprocess.run(cmd, check=True, capture_output=True)
    rows = [json.loads(line) for line in open(os.path.join(out,
                                                           "metrics.jsonl"))]
    timed = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
    ms = sum(timed) / len(timed)
    tokens = GLOBAL_MICRO_BATCHES * args.batch * args.seq
    comm, hidden = comm_shares(trace)
    rank = doc["ranks"][0]
    return dict(world=world, strategy=strategy, overlap=overlap, ms=ms,
                tokens_per_s=tokens / (ms / 1e3),
                predicted_ms=rank.get("predicted_step_seconds", 0) * 1e3,
                sent=rows[-1].get("bytes_sent", 0),
                predicted_sent=rank.get("predicted_bytes_sent_per_step", 0),
                peak=rank.get("device_peak_bytes", 0) or
                rank.get("host_peak_bytes", 0),
                predicted_hidden=doc["prediction"].get("hidden_seconds", 0) /
                max(doc["prediction"].get("comm_seconds", 0), 1e-12),
                comm=comm, hidden=hidden)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--strategies", default="ddp,zero2")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--overlap", default="false,true",
                    help="overlap_comm values to run (false, true, auto)")
    ap.add_argument("--bucket-mb", type=float, default=1.0,
                    help="ddp_bucket_cap_mb (several buckets, so some overlap)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=688)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    onnx_path = fwd.exported_model(args, args.build)
    import onnx

    params = sum(
        int(__import__("numpy").prod(t.dims))
        for t in onnx.load(onnx_path, load_external_data=False).graph.initializer)
    data = os.path.join(args.build, "bench", "cpu_ranks", "data.jsonl")
    os.makedirs(os.path.dirname(data), exist_ok=True)
    write_data(data, args)
    cores = os.cpu_count()
    print(f"model: {params / 1e6:.1f}M parameters (Llama, hidden "
          f"{args.hidden}, {args.layers} layers), full fine-tuning, AdamW; "
          f"global batch {GLOBAL_MICRO_BATCHES} x {args.batch} x {args.seq} "
          f"tokens; {args.threads} thread(s) per rank, {cores} cores")
    for strategy in args.strategies.split(","):
        for world in (int(w) for w in args.worlds.split(",")):
            for overlap in args.overlap.split(","):
                if world == 1 and (strategy != "ddp" or overlap != "false"):
                    continue
                report(run(args, onnx_path, data, world, strategy, overlap),
                       args, cores)
    return 0


def report(r, args, cores):
    """One line per run."""
    over = (" (oversubscribed)" if r["world"] * args.threads > cores
            else "")
    print(f"{r['strategy']:>10} world {r['world']} overlap "
          f"{r['overlap']:>5}: {r['ms']:8.2f} "
          f"ms/step, {r['tokens_per_s']:8.0f} tok/s (predicted "
          f"{r['predicted_ms']:.2f} ms){over}; sent "
          f"{r['sent'] / 2**20:.2f} MiB/step/rank (predicted "
          f"{r['predicted_sent'] / 2**20:.2f}); communication "
          f"{100 * r['comm']:.0f}% of the step, "
          f"{100 * r['hidden']:.0f}% of it hidden (predicted "
          f"{100 * r['predicted_hidden']:.0f}%); peak "
          f"{r['peak'] / 2**20:.1f} MiB/rank")


if __name__ == "__main__":
    sys.exit(main())
