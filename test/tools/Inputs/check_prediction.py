"""Checks `tailor inspect --json` prediction contract and a predicted trace.

  check_prediction.py INSPECT.json TRACE.json

The JSON must carry, per rank, device_peak_bytes, host_peak_bytes, bytes
per category, predicted_step_seconds and predicted_tokens_per_second. The
trace must parse as Chrome trace JSON with one complete ("X") slice per
launch of a step (train_step once per accumulation step, optimizer_step
once), whose durations sum to the predicted step time, counter ("C") events
for the activations arena that never exceed its size, and a peak marker.
Prints "ok" or what failed, and exits 0 or 1.
"""

import json
import sys


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def main():
    doc = json.load(open(sys.argv[1]))
    trace = json.load(open(sys.argv[2]))
    ranks = doc["ranks"]
    if len(ranks) != 1:
        fail(f"expected one rank, got {len(ranks)}")
    rank = ranks[0]
    for key in ("rank", "device_peak_bytes", "host_peak_bytes", "bytes",
                "predicted_step_seconds", "predicted_tokens_per_second"):
        if key not in rank:
            fail(f"ranks[0] has no {key}")
    for category in ("parameters", "activations", "gradients",
                     "optimizer_state", "workspace"):
        if category not in rank["bytes"]:
            fail(f"ranks[0].bytes has no {category}")
    accumulation = doc["training"]["gradient_accumulation_steps"]
    runs = {"train_step": accumulation, "optimizer_step": 1}
    expected = sum(e["launches"] * runs[e["name"]] for e in doc["entries"])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    if len(slices) != expected:
        fail(f"{len(slices)} launch slices, expected {expected}")
    total_s = sum(e["dur"] for e in slices) / 1e6
    predicted = doc["prediction"]["step_seconds"]
    if abs(total_s - predicted) > 1e-6 * max(1.0, predicted) + 1e-9:
        fail(f"slices sum to {total_s} s, prediction says {predicted} s")
    size = next(a["size"] for a in doc["arenas"] if a["category"] == "activations")
    counters = [e for e in trace["traceEvents"]
                if e["ph"] == "C" and e["name"] == "activations bytes"]
    if not counters:
        fail("no activations counter")
    top = max(e["args"]["bytes"] for e in counters)
    if top > size or top <= 0:
        fail(f"activations counter peaks at {top}, arena is {size}")
    if not any(e["ph"] == "i" and e["name"].startswith("peak activations")
               for e in trace["traceEvents"]):
        fail("no peak marker")
    print(f"ok: {len(slices)} slices, {total_s * 1e3:.3f} ms, activations "
          f"peak {top} of {size} bytes")


if __name__ == "__main__":
    main()
