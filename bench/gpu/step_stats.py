#!/usr/bin/env python3
"""Throughput of a tailor training run from its metrics.jsonl: the mean
step time over the steps after --warmup, tokens/s from it (the rows'
`tokens` per step), and the first and last losses. Prints one line

  TAILOR_RESULT name=NAME steps=S warmup=W ms_per_step=X ms_min=Y
      tokens_per_s=Z loss_step1=A loss_last=B

and writes it as JSON to --json.

  bench/gpu/step_stats.py RUN_DIR|metrics.jsonl [--warmup 3] [--name N] [--json P]
"""

import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("metrics")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--name", default="tailor")
    ap.add_argument("--json")
    a = ap.parse_args()
    path = a.metrics
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise SystemExit(f"error: {path} has no steps")
    timed = rows[a.warmup:]
    if not timed:
        raise SystemExit(f"error: {path} has {len(rows)} steps, none after "
                         f"--warmup {a.warmup}")
    ms = sum(r["step_ms"] for r in timed) / len(timed)
    result = dict(name=a.name, steps=len(timed), warmup=a.warmup,
                  ms_per_step=round(ms, 3),
                  ms_min=round(min(r["step_ms"] for r in timed), 3),
                  tokens_per_s=round(timed[0]["tokens"] * 1e3 / ms, 1),
                  loss_step1=rows[0]["loss"], loss_last=rows[-1]["loss"])
    print("TAILOR_RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
