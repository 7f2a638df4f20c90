"""Checks qlora-7b-bytes.test's plan: `tailor inspect --json` parameter
bytes against the analytic count from the tg module's parameter shapes."""

import json
import re
import sys

mlir, inspect = sys.argv[1], json.load(open(sys.argv[2]))
shapes = {}
for m in re.finditer(r"tg\.param @(\S+) : tensor<([0-9x]+)x(f32|bf16|f16)>", open(mlir).read()):
    dims = [int(d) for d in m.group(2).split("x")]
    n = 1
    for d in dims:
        n *= d
    shapes[m.group(1)] = (n, {"f32": 4, "bf16": 2, "f16": 2}[m.group(3)])

params = inspect["parameters"]
quant = [p for p in params if "quantization" in p]
print(f"quantized nf4: {len(quant)} tensors, "
      f"{sum(p['quantization']['rows'] * p['quantization']['cols'] for p in quant)} weights")

# NF4 with double quantization at block 64, nested block 256: every shape
# here divides evenly, so the per-weight cost is exact.
weights = 0
for p in quant:
    n = shapes[p["name"]][0]
    assert n % (64 * 256) == 0, p["name"]
    weights += n
per_weight = weights // 2 + weights // 64 + 4 * (weights // (64 * 256))
assert per_weight * 8 == weights * (4 + 8 / 64 + 32 / (64 * 256))
offsets = 4 * len(quant)
groups = {"embeddings": 0, "norms": 0, "lm_head": 0, "adapters": 0}
quantized_names = {p["name"] for p in quant}
for p in params:
    if p["name"] in quantized_names:
        continue
    numel = 1
    for d in p["shape"]:
        numel *= d
    size = numel * (4 if p["dtype"] == "f32" else 2)
    if "lora_" in p["name"]:
        groups["adapters"] += size
    elif "embed" in p["name"]:
        groups["embeddings"] += size
    elif "lm_head" in p["name"]:
        groups["lm_head"] += size
    elif "norm" in p["name"]:
        groups["norms"] += size
    else:
        raise SystemExit(f"unexpected unquantized parameter {p['name']}")
analytic = per_weight + offsets + sum(groups.values())
print(f"analytic: {per_weight + offsets} B quantized ({weights} weights x "
      f"{(4 + 8 / 64 + 32 / (64 * 256)):.3f} bits = {per_weight} B + {len(quant)} x 4 B offsets) + "
      + " + ".join(f"{v} B {k}" for k, v in groups.items()) + f" = {analytic} B")
plan = inspect["parameter_summary"]["bytes"]
print(f"plan parameter bytes: {plan} B")
print("equal to the byte" if plan == analytic else f"DIFFERENT by {plan - analytic} B")
