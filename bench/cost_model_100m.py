#!/usr/bin/env python3
"""How well the cost model predicts a step of the ~134M Llama on this CPU.

1. Compiles the LoRA plan of bench/cpu_train_100m.sh at --calibrate-seq with
   --calibrate-threads and runs `tailor calibrate` on it (hardware file in
   BUILD/bench/cost_model_100m/calibrated.R.yaml, R the repeat).
2. For every (threads, seq) in --threads x --seqs, compiles the plan for that
   hardware file, reads the predicted step time from `tailor inspect --json
   --hardware FILE`, trains --steps steps and takes the median ms/step over
   steps 2..N, and reports the error.
3. Repeats 1-2 --repeats times (each repeat calibrates afresh, so a noisy
   calibration weighs on one repeat only) and prints each column's median
   over the repeats.
Every timed command (calibrate, each training run) waits until the
machine is quiet (other processes under 10% of a CPU over 2 s) and runs
again when other processes used over 8% of a CPU while it ran, up to
--retries times: on a 2-core machine another process's load slows a
2-thread run by up to 2x and leaves a 1-thread run alone, which reads as a
thread-scaling error.
Also, for comparison, the same calibration with one GEMM speedup for every
size (cpu_parallel_half_mflop 0 and the speedup of all the plan's GEMMs
together: the model before shape-aware scaling) and the uncalibrated
built-in `cpu` prediction.

  bench/cost_model_100m.py [--threads 1,2] [--seqs 128,256] [--steps 6]
                           [--repeats 3] [--retries 5]
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cpu_forward_100m as fwd  # noqa: E402
import cpu_train_100m as trn  # noqa: E402


def busy_cpus():
    """(CPU jiffies not idle, in seconds) since boot, over all CPUs."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def wait_quiet(limit=0.1, longest=900):
    """Waits (up to `longest` s) until other processes use under `limit`
    of a CPU over 2 s."""
    start = time.time()
    while time.time() - start < longest:
        before = busy_cpus()
        time.sleep(2)
        if (busy_cpus() - before) / 2 < limit:
            return
    print(f"machine still busy after {longest} s: measuring anyway",
          flush=True)


def run_quiet(run, args):
    """Calls run() on a quiet machine; again while other processes used
    over 8% of a CPU during it (at most args.retries times). Returns its
    result."""
    for attempt in range(args.retries + 1):
        wait_quiet()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        b0, w0 = busy_cpus(), time.time()
        result = run()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        mine = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        foreign = (busy_cpus() - b0 - mine) / (time.time() - w0)
        if foreign < 0.08:
            return result
        print(f"  (other processes used {foreign:.2f} CPU: measuring again)",
              flush=True)
    return result


def predicted_seconds(tailor, plan, hardware):
    doc = json.loads(subprocess.run(
        [tailor, "inspect", plan, "--json", "--hardware", hardware],
        capture_output=True, text=True, check=True).stdout)
    return doc["ranks"][0]["predicted_step_seconds"]


def compile_plan(tailor, onnx_path, args, run_dir, seq, threads, hardware):
    args.seq = seq
    recipe = os.path.join(run_dir, f"recipe.t{seq}.yaml")
    with open(recipe, "w") as f:
        f.write(trn.recipe_text(args, "lora"))
    plan = os.path.join(run_dir, f"lora.t{seq}.th{threads}.tplan")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe,
                    "--threads", str(threads), "--hardware", hardware,
                    "-o", plan], check=True, capture_output=True)
    return plan


def measured_ms(tailor, plan, data, run_dir, args, threads):
    """The median step of steps 2..N: one slow step (the shared machine's
    neighbours) does not move it as it moves a mean."""
    out = os.path.join(run_dir, "out")
    subprocess.run(["rm", "-rf", out])
    rc, _, _, text = trn.run_measured(
        [tailor, "train", plan, "--data", data, "--max-steps", str(args.steps),
         "--output-dir", out, "--threads", str(threads)], trn.child_env(threads))
    if rc != 0:
        sys.exit(f"tailor train exited {rc}:\n{text[-2000:]}")
    metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))
               if line.strip()]
    timed = [float(m["step_ms"]) for m in metrics][1:]
    return statistics.median(timed)


def calibrate(tailor, onnx_path, args, run_dir, repeat):
    """Calibrates on the plan at --calibrate-seq / --calibrate-threads;
    returns (the calibrated file, its one-speedup variant)."""
    calibrated = os.path.join(run_dir, f"calibrated.{repeat}.yaml")
    plan = compile_plan(tailor, onnx_path, args, run_dir, args.calibrate_seq,
                        args.calibrate_threads, "cpu")
    log = run_quiet(lambda: subprocess.run(
        [tailor, "calibrate", plan, "--threads", str(args.calibrate_threads),
         "-o", calibrated], check=True, capture_output=True, text=True).stderr,
        args)
    text = open(calibrated).read()
    if repeat == 0:
        print(log.strip())
        print(text.strip())
    else:
        print("recalibrated: " + ", ".join(
            line.strip() for line in text.splitlines()
            if line.startswith(("cpu_gflops_per_thread", "cpu_parallel_",
                                "cpu_pool_"))))
    # The size-blind variant of the same calibration.
    blind = os.path.join(run_dir, f"calibrated-one-speedup.{repeat}.yaml")
    found = re.search(r"would be [0-9.]+x: cpu_parallel_efficiency ([0-9.]+)",
                      log)
    if not found:
        sys.exit("tailor calibrate printed no size-blind speedup (calibrate "
                 "with --calibrate-threads above 1)")
    text = re.sub(r"cpu_parallel_efficiency: .*",
                  f"cpu_parallel_efficiency: {found.group(1)}", text)
    text = re.sub(r"cpu_parallel_half_mflop: .*", "cpu_parallel_half_mflop: 0",
                  text)
    with open(blind, "w") as f:
        f.write(text)
    return calibrated, blind


def measure_row(tailor, onnx_path, args, run_dir, threads, seq, calibrated,
                blind):
    """(measured, calibrated, one speedup, built-in) milliseconds."""
    plan = compile_plan(tailor, onnx_path, args, run_dir, seq, threads,
                        calibrated)
    args.seq = seq
    data = os.path.join(run_dir, f"data.t{seq}.jsonl")
    trn.write_data(data, args)
    measured = run_quiet(
        lambda: measured_ms(tailor, plan, data, run_dir, args, threads), args)
    return (measured, 1e3 * predicted_seconds(tailor, plan, calibrated),
            1e3 * predicted_seconds(tailor, plan, blind),
            1e3 * predicted_seconds(tailor, plan, "cpu"))


def print_row(label, threads, seq, row):
    measured, ours, one, builtin = row
    print(f"{label:>6s} {threads:7d} {seq:5d} {measured:8.1f}ms "
          f"{ours:9.1f}ms {ours / measured - 1:+7.1%} {one:10.1f}ms "
          f"{one / measured - 1:+7.1%} {builtin:11.1f}ms "
          f"{builtin / measured - 1:+7.1%}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seqs", default="128,256")
    ap.add_argument("--calibrate-threads", type=int, default=2)
    ap.add_argument("--calibrate-seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    trn.add_model_args(ap)  # the model of cpu_train_100m
    args = ap.parse_args()
    tailor = os.path.join(args.build, "bin", "tailor")
    args.seq = args.calibrate_seq
    onnx_path = fwd.exported_model(args, args.build)
    run_dir = os.path.join(args.build, "bench", "cost_model_100m")
    os.makedirs(run_dir, exist_ok=True)
    configs = [(int(t), int(s)) for t in args.threads.split(",")
               for s in args.seqs.split(",")]
    rows = {config: [] for config in configs}
    header = (f"{'repeat':>6s} {'threads':>7s} {'seq':>5s} {'measured':>10s} "
              f"{'calibrated':>11s} {'error':>7s} {'one speedup':>12s} "
              f"{'error':>7s} {'built-in cpu':>13s} {'error':>7s}")
    for repeat in range(args.repeats):
        calibrated, blind = calibrate(tailor, onnx_path, args, run_dir, repeat)
        print(f"load average: {os.getloadavg()[0]:.2f}")
        print(header)
        for threads, seq in configs:
            row = measure_row(tailor, onnx_path, args, run_dir, threads, seq,
                              calibrated, blind)
            rows[(threads, seq)].append(row)
            print_row(str(repeat + 1), threads, seq, row)
    # Each column's median over the repeats (each repeat calibrated afresh).
    print(f"median of {args.repeats} repeats:")
    print(header)
    for (threads, seq), got in rows.items():
        print_row("median", threads, seq,
                  tuple(statistics.median(r[i] for r in got) for i in range(4)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
