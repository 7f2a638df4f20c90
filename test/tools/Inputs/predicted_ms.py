"""Prints hybrid's predicted step over ZeRO-2's from `tailor compile`'s
stderr lines: the files are ZeRO-2 and hybrid across a slow inter-node
link, then ZeRO-2 and hybrid on one link (tailor-compile-inter-node.test)."""
import re
import sys


def predicted_ms(path):
    text = open(path).read()
    return float(re.search(r"predicted step ([0-9.]+) ms", text).group(1))


z2, h, z2f, hf = (predicted_ms(p) for p in sys.argv[1:5])
print(f"hybrid / zero2 across 1 Gb/s: {h / z2:.3f} ({h} / {z2} ms)")
print(f"hybrid / zero2 on one link: {hf / z2f:.3f} ({hf} / {z2f} ms)")
