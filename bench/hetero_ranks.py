#!/usr/bin/env python3
"""Ranks of really different speed on the CPU: the balanced plan against the even split.

Three CPU ranks are made unequal with taskset: rank 0 alone on core 0,
ranks 1 and 2 sharing core 1 (one thread each), so ranks 1 and 2 run at
about half rank 0's speed. A cluster file says so (speeds 1 : 0.5 : 0.5):

  nodes:
    - name: host
      devices:
        - {kind: cpu, count: 1, threads: 1}
        - {kind: cpu, count: 2, threads: 1, speed: 0.5}

and `tailor compile --hardware cluster.yaml` gives each rank its own count of
micro-batches per step (tailor-balance-ranks: 6 : 3 : 3 of 12). The even
split is today's plan for the same ranks at the same global batch
(`--hardware 3xcpu`, gradient_accumulation_steps 4 each). Both train the
same model (cpu_forward_100m.py's seeded Llama, default hidden 256, 4
layers, full fine-tuning with AdamW) under

  mpirun --bind-to none -np 3 sh -c 'taskset -c CORE tailor train ...'

Reported: the measured step of each plan (the median of rank 0's
metrics.jsonl step_ms over steps 2..S; with --repeat N the runs alternate
even, balanced, even, ... and each plan's best median is kept, as other
work on a shared machine only slows a run down; every run's figure and the
ratio of each even/balanced pair are printed too, to show the spread), next to the cost model's predictions (inspect
--json: the balanced plan's step and its even-split figure). The built-in
`cpu` figures are a generic core's (not this machine's), so the predicted
milliseconds are for comparison between the two plans, not absolute.
On a machine other work shares, a core is not what the pinning alone
says: by default (--speeds calibrate) the speeds are measured first, with
three one-rank trainings of the same model started together under the same
pinning (their step times, inverted and scaled to rank 0's), and the
cluster file gets those; --speeds 1,0.5,0.5 writes the nominal ones.

  hetero_ranks.py [--steps 8] [--repeat 3] [--batch 2] [--seq 64]
                  [--speeds calibrate|1,0.5,0.5]
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

RANKS = 3
PER_RANK = 4  # the even split's micro-batches per rank
CORES = [0, 1, 1]  # rank 0 alone, ranks 1 and 2 share a core


def cluster_yaml(speeds):
    lines = ["name: pinned-cores", "nodes:", "  - name: host",
             "    devices:"]
    for speed in speeds:
        lines.append(f"      - {{kind: cpu, count: 1, threads: 1, "
                     f"speed: {speed}}}")
    return "\n".join(lines) + "\n"


def write_data(path, args):
    import numpy as np

    rng = np.random.default_rng(args.seed + 1)
    with open(path, "w") as f:
        for _ in range(args.steps * RANKS * PER_RANK * args.batch):
            f.write(json.dumps({"input_ids": rng.integers(
                0, args.vocab, args.seq).tolist()}) + "\n")


def write_recipe(path, args):
    lines = ["adapter: full", f"sequence_len: {args.seq}",
             f"micro_batch_size: {args.batch}",
             f"gradient_accumulation_steps: {PER_RANK}",
             "learning_rate: 1e-4", "optimizer: adamw", "max_grad_norm: 1.0",
             f"max_steps: {args.steps}", f"save_steps: {args.steps}",
             "shuffle: false", "zero_stage: 0"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def pinned_launch(tailor_cmd, work):
    """mpirun of three ranks, each exec'd under taskset on its core."""
    script = os.path.join(work, "pinned.sh")
    cases = " ".join(f"{r}) core={c};;" for r, c in enumerate(CORES))
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                f"case $OMPI_COMM_WORLD_RANK in {cases} esac\n"
                'export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1\n'
                'exec taskset -c "$core" "$@"\n')
    os.chmod(script, 0o755)
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca",
           "mpi_yield_when_idle", "1", "-np", str(RANKS)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd + [script] + tailor_cmd


def calibrate(args, onnx_path, data):
    """Each rank's speed under the pinning, now: three one-rank trainings
    started together on the ranks' cores, step times inverted, rank 0 = 1."""
    work = os.path.join(args.build, "bench", "hetero_ranks", "calibrate")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    recipe = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, args)
    plan = os.path.join(work, "plan.tplan")
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", "cpu", "--threads", "1", "-o", plan],
                   check=True, capture_output=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    procs = []
    for rank, core in enumerate(CORES):
        out = os.path.join(work, f"out{rank}")
        procs.append((out, subprocess.Popen(
            ["taskset", "-c", str(core), tailor, "train", plan, "--data",
             data, "--output-dir", out, "--threads", "1", "--max-steps",
             str(args.steps)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)))
    medians = []
    for out, proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"calibration run failed ({out})")
        rows = [json.loads(line)
                for line in open(os.path.join(out, "metrics.jsonl"))]
        timed = sorted(r["step_ms"] for r in rows[1:])
        medians.append(timed[len(timed) // 2])
    return [f"{medians[0] / m:.3f}" for m in medians]


def run(args, onnx_path, data, name, hardware):
    work = os.path.join(args.build, "bench", "hetero_ranks", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    recipe = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, args)
    plan = os.path.join(work, "plan.tplan")
    tailor = os.path.join(args.build, "bin", "tailor")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--hardware", hardware, "--threads", "1", "-o", plan],
                   check=True, capture_output=True)
    doc = json.loads(subprocess.run([tailor, "inspect", plan, "--json"],
                                    check=True, capture_output=True,
                                    text=True).stdout)
    out = os.path.join(work, "out")
    subprocess.run(pinned_launch([tailor, "train", plan, "--data", data,
                                  "--output-dir", out, "--threads", "1"],
                                 work), check=True, capture_output=True)
    rows = [json.loads(line)
            for line in open(os.path.join(out, "metrics.jsonl"))]
    timed = sorted(r["step_ms"] for r in rows[1:]) or [rows[0]["step_ms"]]
    counts = [r.get("micro_batches", PER_RANK) for r in doc["ranks"]]
    return dict(ms=timed[len(timed) // 2], counts=counts, doc=doc,
                loss=rows[-1]["loss"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--speeds", default="calibrate",
                    help="the three ranks' speeds in the cluster file, or "
                         "calibrate: measure them under the pinning")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=688)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        print("needs two cores and taskset")
        return 1
    onnx_path = fwd.exported_model(args, args.build)
    base = os.path.join(args.build, "bench", "hetero_ranks")
    os.makedirs(base, exist_ok=True)
    data = os.path.join(base, "data.jsonl")
    write_data(data, args)
    speeds = (calibrate(args, onnx_path, data) if args.speeds == "calibrate"
              else args.speeds.split(","))
    cluster = os.path.join(base, "cluster.yaml")
    with open(cluster, "w") as f:
        f.write(cluster_yaml(speeds))
    print(f"3 CPU ranks: rank 0 on core 0, ranks 1 and 2 sharing core 1; "
          f"cluster file speeds {':'.join(speeds)} ({args.speeds}); global batch "
          f"{RANKS * PER_RANK} x {args.batch} x {args.seq} tokens; Llama "
          f"hidden {args.hidden}, {args.layers} layers, full fine-tuning")
    evens, balanceds = [], []
    for _ in range(args.repeat):
        evens.append(run(args, onnx_path, data, "even", f"{RANKS}xcpu"))
        balanceds.append(run(args, onnx_path, data, "balanced", cluster))
    even = min(evens, key=lambda r: r["ms"])
    balanced = min(balanceds, key=lambda r: r["ms"])
    ratios = sorted(e["ms"] / b["ms"] for e, b in zip(evens, balanceds))
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores (other work slows any run); each run's "
          f"ms/step, even: {[round(r['ms']) for r in evens]}, balanced: "
          f"{[round(r['ms']) for r in balanceds]}; even/balanced per pair: "
          f"{[round(x, 2) for x in ratios]}")
    balance = balanced["doc"].get("balance") or {}
    predicted = balance.get("predicted_step_seconds", 0) * 1e3
    predicted_even = balance.get("predicted_even_split_step_seconds", 0) * 1e3
    print(f"even split  {even['counts']}: measured {even['ms']:8.2f} ms/step;"
          f" predicted {predicted_even:8.2f} ms on the cluster file")
    print(f"balanced    {balanced['counts']}: measured "
          f"{balanced['ms']:8.2f} ms/step; predicted {predicted:8.2f} ms "
          f"(longest wait {balance.get('predicted_max_wait_seconds', 0) * 1e3:.2f}"
          f" ms)")
    print(f"speedup: measured {even['ms'] / balanced['ms']:.2f}x, predicted "
          f"{predicted_even / predicted if predicted else 0:.2f}x; last "
          f"losses {even['loss']:.6f} and {balanced['loss']:.6f} (same "
          f"global batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
