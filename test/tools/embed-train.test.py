"""Compares tailor-embed-train's output (argv[1]) with a `tailor train` run
directory (argv[2]): every step's loss, lr and grad_norm, and the sum of |w|
of the trained tensor `head` against model.safetensors."""
import json
import re
import sys

import numpy as np
from safetensors.numpy import load_file

lines = open(sys.argv[1]).read().splitlines()
steps = [tuple(float(x) for x in m.groups())
         for m in (re.match(r"step \d+ loss (\S+) lr (\S+) grad_norm (\S+)", l)
                   for l in lines) if m]
rows = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
ref = [(r["loss"], r["lr"], r["grad_norm"]) for r in rows]
assert len(steps) == len(ref) == 5, (steps, ref)
for i, (got, want) in enumerate(zip(steps, ref)):
    for g, w, what in zip(got, want, ("loss", "lr", "grad_norm")):
        assert abs(g - w) <= 1e-6 * max(1.0, abs(w)), f"step {i + 1} {what}: {g} vs {w}"
head = load_file(sys.argv[2] + "/model.safetensors")["head"]
total = float(np.abs(head.astype(np.float64)).sum())
got = float(re.search(r"sum \|w\| = (\S+)", lines[-1]).group(1))
assert abs(got - total) <= 1e-6 * total, (got, total)
print(f"5 steps match tailor train; head sum |w| {got} = {total}")
