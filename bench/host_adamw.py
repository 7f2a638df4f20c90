#!/usr/bin/env python3
"""Host AdamW (optimizer offload's update) against torch.optim.AdamW on the CPU.

The same tensors -- by default the trainable tensors of a Llama-2-7B LoRA
(r=16 on q,k,v,o of 32 layers: 256 tensors, 16.8M elements) and of a
full fine-tune's slice (8 tensors of 4096 x 4096) -- are updated by
tailor's `adamw_multi` kernel (what a plan's host stream runs under
`offload_optimizer: cpu`, through build/bin/tailor-bench-host-adamw) and by
torch.optim.AdamW with its single-tensor, foreach and fused implementations,
at the same thread count. Checks step 1's parameters against PyTorch's
(max relative difference) and prints ms per step and the bytes streamed.

  host_adamw.py [--threads 2] [--iters 5] [--set lora7b|full|both]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
HP = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def tensor_sizes(which):
    lora = []
    for _ in range(32):
        for _ in ("q", "k", "v", "o"):
            lora += [16 * 4096, 4096 * 16]
    full = [4096 * 4096] * 8
    return {"lora7b": lora, "full": full, "both": lora + full}[which]


def make_state(sizes, seed=0):
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    return dict(param=rng.standard_normal(total, dtype=np.float32) * 0.02,
                grad=rng.standard_normal(total, dtype=np.float32) * 1e-3,
                exp_avg=np.zeros(total, np.float32),
                exp_avg_sq=np.zeros(total, np.float32))


def run_tailor(args, sizes, state):
    with tempfile.TemporaryDirectory() as d:
        for name, data in state.items():
            data.tofile(os.path.join(d, name + ".bin"))
        out = subprocess.run(
            [os.path.join(args.build, "bin", "tailor-bench-host-adamw"), d,
             ",".join(map(str, sizes)), str(args.threads), str(args.iters),
             str(HP["lr"]), str(HP["betas"][0]), str(HP["betas"][1]),
             str(HP["eps"]), str(HP["weight_decay"])],
            check=True, capture_output=True, text=True).stdout
        after = np.fromfile(os.path.join(d, "param.out.bin"), np.float32)
    ms = float(out.split("ms_per_step")[1].split()[0])
    return ms, after


def run_torch(args, sizes, state, variant):
    torch.set_num_threads(args.threads)
    flat = torch.from_numpy(state["param"].copy())
    grads = torch.from_numpy(state["grad"].copy())
    params = []
    at = 0
    for n in sizes:
        p = torch.nn.Parameter(flat[at:at + n].clone())
        p.grad = grads[at:at + n].clone()
        params.append(p)
        at += n
    kwargs = dict(HP)
    if variant == "fused":
        kwargs["fused"] = True
    else:
        kwargs["foreach"] = variant == "foreach"
    opt = torch.optim.AdamW(params, **kwargs)
    opt.step()
    after = torch.cat([p.detach() for p in params]).numpy()
    start = time.perf_counter()
    for _ in range(args.iters):
        opt.step()
    ms = (time.perf_counter() - start) * 1e3 / max(args.iters, 1)
    return ms, after


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--set", default="both", choices=["lora7b", "full", "both"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    sizes = tensor_sizes(args.set)
    total = sum(sizes)
    state = make_state(sizes)
    # Per element a step reads param, grad and both moments and writes
    # param and both moments (tailor also zeroes the gradient it read).
    streamed = total * 4 * 7
    print(f"{len(sizes)} tensors, {total / 1e6:.1f}M elements, "
          f"{args.threads} threads, {args.iters} timed steps")
    ms, ours = run_tailor(args, sizes, state)
    rows = [("tailor adamw_multi", ms)]
    reference = None
    for variant in ("single", "foreach", "fused"):
        try:
            t_ms, theirs = run_torch(args, sizes, state, variant)
        except (RuntimeError, TypeError) as e:
            print(f"torch {variant}: not available ({e})")
            continue
        rows.append((f"torch AdamW {variant}", t_ms))
        if reference is None:
            reference = theirs
    for name, t in rows:
        print(f"  {name:<22} {t:9.2f} ms/step  {streamed / t / 1e6:6.2f} GB/s")
    if reference is not None:
        diff = np.abs(ours - reference).max() / np.abs(reference).max()
        print(f"step 1 parameters vs torch: max difference {diff:.2e} of the "
              f"largest parameter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
