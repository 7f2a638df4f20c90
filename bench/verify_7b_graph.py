#!/usr/bin/env python3
"""Times tailor-opt on the forward graph of a 32-layer 7B Llama shape.

Parse + verify + canonicalize + parameter inventory + print of a graph with
6.7B parameters at sequence 2048: guards against quadratic verifiers and
symbol lookups (the target for a whole compile of this shape is seconds).

  bench/verify_7b_graph.py [--build build] [--runs 3]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))
import gen_tg_llama  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    text = gen_tg_llama.generate(**gen_tg_llama.PRESETS["7b"])
    ops = sum(1 for line in text.splitlines() if " = tg." in line)
    tool = os.path.join(args.build, "bin", "tailor-opt")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "llama7b.mlir")
        with open(model, "w") as f:
            f.write(text)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            run = subprocess.run(
                [tool, model, "--canonicalize", "--tailor-summarize-params",
                 "-o", os.path.join(work, "out.mlir")],
                capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            if run.returncode != 0:
                sys.stderr.write(run.stderr)
                return 1
    print(run.stderr.splitlines()[0])
    print(f"verify_7b_graph: {ops} tg ops, {len(text)} bytes of IR, "
          f"best of {args.runs}: {min(times):.3f} s "
          f"(parse + verify + canonicalize + inventory + print)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
