"""Compares a trainer example's output (argv[1]) and output directory
(argv[3]) with an uninterrupted `tailor train` run directory (argv[2]):
every step's loss, lr and grad_norm bit for bit (both print %.9g of the
float32 values) and the final model.safetensors byte for byte."""
import filecmp
import json
import re
import sys

lines = open(sys.argv[1]).read().splitlines()
got = [m.groups() for m in (re.match(r"step (\d+) loss (\S+) lr (\S+) "
                                     r"grad_norm (\S+)$", l) for l in lines)
       if m]
rows = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
assert [int(g[0]) for g in got] == [r["step"] for r in rows] == list(
    range(1, 7)), (got, rows)
for g, r in zip(got, rows):
    for text, key in zip(g[1:], ("loss", "lr", "grad_norm")):
        assert float(text) == r[key], f"step {g[0]} {key}: {text} vs {r[key]}"
assert filecmp.cmp(sys.argv[2] + "/model.safetensors",
                   sys.argv[3] + "/model.safetensors", shallow=False)
print("6 steps and the final weights match tailor train")
