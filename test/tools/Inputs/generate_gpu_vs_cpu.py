"""Generates with a CPU and a GPU plan of one model and compares them.

usage: generate_gpu_vs_cpu.py CPU.tplan GPU.tplan [--new-tokens N]

Both generators take the same prompt (through prefill when the plans have
it), then the CPU's greedy ids are fed to both, so every step compares the
logits of the same cache contents: the largest |gpu - cpu| must stay within
ATOL (the GPU plan computes its GEMMs in bf16), and the GPU's greedy id must
equal the CPU's wherever the CPU's top two logits are more than 2 * ATOL
apart (nearer ones may swap under bf16 rounding). Then the GPU generator is
reset and fed again: a reset starts the cache over on the device too, so
the logits must be the first run's (within 1e-5). Prints one line per check; exits 1
naming the first failure.
"""

import argparse
import sys

import numpy as np

import tailor

ATOL = 2e-2
PROMPT = [3, 17, 5, 9, 30, 2, 11, 7, 21, 4, 13]


def run(generator, new_tokens, forced=None):
    """Prompt, then `new_tokens` greedy steps (or the `forced` ids); the
    logits after the prompt and after each step, and the ids fed."""
    generator.prefill(PROMPT)
    logits, ids = [generator.logits()], []
    for i in range(new_tokens):
        token = int(np.argmax(logits[-1])) if forced is None else forced[i]
        ids.append(token)
        generator.decode(token)
        logits.append(generator.logits())
    return logits, ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cpu")
    parser.add_argument("gpu")
    parser.add_argument("--new-tokens", type=int, default=24)
    args = parser.parse_args()

    cpu_logits, cpu_ids = run(tailor.Generator(args.cpu), args.new_tokens)
    gpu = tailor.Generator(args.gpu)
    gpu_logits, _ = run(gpu, args.new_tokens, forced=cpu_ids)

    worst, decided, agreed = 0.0, 0, 0
    for want, got in zip(cpu_logits, gpu_logits):
        worst = max(worst, float(np.max(np.abs(got - want))))
        top = np.sort(want)[-2:]
        if top[1] - top[0] > 2 * ATOL:
            decided += 1
            agreed += int(np.argmax(got) == np.argmax(want))
    print(f"logits: {len(cpu_logits)} steps, max |gpu - cpu| {worst:.3e}")
    print(f"greedy ids: {agreed} of {decided} clear steps agree "
          f"(cpu ids {cpu_ids})")
    if not worst <= ATOL:
        sys.exit(f"error: the GPU's logits differ from the CPU's by "
                 f"{worst:.3e} > {ATOL}")
    if decided == 0 or agreed != decided:
        sys.exit(f"error: the GPU's greedy ids agree with the CPU's on "
                 f"{agreed} of {decided} clear steps")

    gpu.reset()
    again, _ = run(gpu, args.new_tokens, forced=cpu_ids)
    drift = max(float(np.max(np.abs(a - b)))
                for a, b in zip(gpu_logits, again))
    print(f"after reset: max |second run - first run| {drift:.3e}")
    if not drift <= 1e-5:
        sys.exit("error: after tailor_generator_reset the GPU's logits "
                 "differ from its first run")
    print("OK: the GPU generates as the CPU does")


if __name__ == "__main__":
    main()
