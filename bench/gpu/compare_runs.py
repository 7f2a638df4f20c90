#!/usr/bin/env python3
"""Compares the losses of two tailor training runs step by step: the same
plan compiled for the CPU and for a GPU, trained on the same data.

Reads each run's metrics.jsonl (a file or its run directory), requires the
same steps in both (all of them: --steps N limits the check to the first
N), and compares every step's loss at relative tolerance --rtol (default
2e-2: the GPU plan computes in bf16, the CPU one in f32). Prints one line
per run, the worst step and a verdict; exits 1 on a mismatch or a missing
or non-finite loss. Runs with fp16 loss scaling also print each side's
scales and skipped steps (informational: the two may round an overflow
differently).

  bench/gpu/compare_runs.py CPU_RUN GPU_RUN [--rtol 2e-2] [--steps N]
"""

import argparse
import json
import math
import os
import sys


def read_losses(path):
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    rows, scaling = {}, {}
    if not os.path.isfile(path):
        raise SystemExit(f"error: {path}: no such file (did the run start?)")
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                loss = row["loss"]
                rows[int(row["step"])] = math.nan if loss is None else float(loss)
                if "loss_scale" in row:
                    scaling[int(row["step"])] = (row["loss_scale"],
                                                 bool(row.get("skipped")))
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"error: {path}:{n}: not a metrics row ({e})")
    if not rows:
        raise SystemExit(f"error: {path} has no steps")
    return path, rows, scaling


def describe_scaling(path, scaling):
    skipped = [s for s in sorted(scaling) if scaling[s][1]]
    scales = []
    for s in sorted(scaling):
        if not scales or scales[-1] != scaling[s][0]:
            scales.append(scaling[s][0])
    print(f"{path}: loss scale {' -> '.join(f'{x:g}' for x in scales)}, "
          f"skipped steps {skipped or 'none'}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("reference", help="metrics.jsonl (or run dir) of the CPU run")
    ap.add_argument("candidate", help="metrics.jsonl (or run dir) of the GPU run")
    ap.add_argument("--rtol", type=float, default=2e-2)
    ap.add_argument("--steps", type=int, help="compare the first N steps only")
    a = ap.parse_args()

    ref_path, ref, ref_scaling = read_losses(a.reference)
    got_path, got, got_scaling = read_losses(a.candidate)
    for path, scaling in ((ref_path, ref_scaling), (got_path, got_scaling)):
        if scaling:
            describe_scaling(path, scaling)
    steps = sorted(ref)
    if a.steps:
        steps = [s for s in steps if s <= a.steps]
    missing = [s for s in steps if s not in got]
    extra = sorted(set(got) - set(ref)) if not a.steps else []
    for path, rows in ((ref_path, ref), (got_path, got)):
        print(f"{path}: {len(rows)} steps, loss {rows[min(rows)]:.4f} (step "
              f"{min(rows)}) -> {rows[max(rows)]:.4f} (step {max(rows)})")
    if missing or extra:
        print(f"MISMATCH: steps differ (missing in the candidate: "
              f"{missing[:5]}, only in the candidate: {extra[:5]})")
        return 1
    worst, worst_step, bad = 0.0, steps[0], []
    for s in steps:
        r, g = ref[s], got[s]
        if not (math.isfinite(r) and math.isfinite(g)):
            bad.append(s)
            worst, worst_step = math.inf, s
            continue
        rel = abs(g - r) / max(abs(r), 1e-12)
        if rel > worst:
            worst, worst_step = rel, s
        if rel > a.rtol:
            bad.append(s)
    print(f"worst: step {worst_step}: {ref[worst_step]:.6f} vs "
          f"{got[worst_step]:.6f}, relative difference {worst:.2e} "
          f"(rtol {a.rtol:g}, {len(steps)} steps)")
    if bad:
        print(f"MISMATCH: {len(bad)} of {len(steps)} steps beyond rtol "
              f"(first: step {bad[0]})")
        return 1
    print("OK: every step's loss agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
