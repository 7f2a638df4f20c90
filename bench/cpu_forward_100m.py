#!/usr/bin/env python3
"""Times one CPU forward pass of a ~100M-parameter Llama: tailor vs PyTorch.

Builds a randomly initialized, seeded transformers LlamaForCausalLM (default:
hidden 768, 12 layers, 12 heads, intermediate 2048, vocab 32000, untied
lm_head; the exact parameter count is printed), exports it once with the
TorchScript exporter at opset 17 through test/generators/export_hf.py's
helpers (symbolic batch/seq dims; cached under BUILD/bench/cpu_forward_100m/),
compiles it with `tailor compile --batch B --seq T`, and then, on the same
seeded input_ids [B, T], times

  - PyTorch eager (torch.no_grad, torch.set_num_threads(N), the library's
    default sdpa attention, use_cache=False): --warmup untimed forwards,
    then --repeat timed ones, each timed;
  - `tailor-run PLAN --threads N --repeat W+R` (W = --warmup, R = --repeat),
    which times its forwards itself (plan loading, weight reading and arena
    setup excluded) and prints their mean and min; it has no warm-up of its
    own, so its mean includes the first, cold forward.

The headline compares the best (min) forward of each: the statistic least
disturbed by other load on the machine, and for tailor-run the one that a
cold first run does not enter. Means are printed too (PyTorch's over the R
warm forwards; tailor-run's over all W+R). Should tailor-run not print its
figures, the wall times of a --repeat W+R and a --repeat W process are
differenced instead. Timings on a loaded machine are noisy, PyTorch's OpenMP
threads especially; the load average is printed.

Prints ms per forward for both, the ratio tailor/PyTorch and the max abs
logits difference, ending with one line such as

  forward 134M (B=1,T=256, 2 threads): tailor 123.4 ms, PyTorch 150.2 ms, ratio 0.82 (best of 5)

  cpu_forward_100m.py [--batch 1] [--seq 256] [--threads N] [--repeat 5]
"""

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))

OPSET = 17


def build_model(args):
    """Returns the seeded, eval-mode, logits-only LlamaForCausalLM."""
    import torch
    import transformers as tf

    import export_hf

    torch.manual_seed(args.seed)
    cfg = tf.LlamaConfig(
        hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        intermediate_size=args.intermediate, vocab_size=args.vocab,
        max_position_embeddings=max(2048, args.seq), tie_word_embeddings=False)
    model = tf.LlamaForCausalLM(cfg).eval()
    # Norm weights of 1 would be deduplicated by the exporter, unlike any
    # trained checkpoint; give them the same seeded noise the tests' exports get.
    export_hf._perturb_constant_params(model)
    return export_hf._logits_wrapper(model)


def export_key(args):
    h = hashlib.sha256(open(os.path.join(ROOT, "test", "generators",
                                         "export_hf.py"), "rb").read())
    for pkg in ("torch", "transformers", "onnx"):
        h.update(f"{pkg}={md.version(pkg)}".encode())
    h.update(json.dumps([args.hidden, args.layers, args.heads, args.kv_heads,
                         args.intermediate, args.vocab, args.seed, OPSET]).encode())
    return h.hexdigest()[:16]


def export(model, path):
    """TorchScript export at opset 17 with symbolic batch and seq dims."""
    import torch

    import export_hf

    example = torch.randint(0, model.config.vocab_size, (2, 16),
                            generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), export_hf._ts_symbolics(OPSET):
        export_hf._export_torchscript(model, example, OPSET, path,
                                      external_data=False)


def exported_model(args, build):
    """The path of the cached export for `args` under BUILD/bench, exported
    first when it is not there yet."""
    work = os.path.join(build, "bench", "cpu_forward_100m", export_key(args))
    onnx_path = os.path.join(work, "model.onnx")
    if not os.path.exists(os.path.join(work, "done")):
        os.makedirs(work, exist_ok=True)
        export(build_model(args), onnx_path)
        open(os.path.join(work, "done"), "w").write("ok\n")
    return onnx_path


def time_pytorch(model, ids, args):
    """Returns (mean ms, min ms, logits) over --repeat forwards."""
    import torch

    torch.set_num_threads(args.threads)
    times = []
    with torch.no_grad():
        for _ in range(args.warmup):
            model(ids)
        for _ in range(args.repeat):
            start = time.perf_counter()
            logits = model(ids)
            times.append((time.perf_counter() - start) * 1e3)
    return sum(times) / len(times), min(times), logits.float().numpy()


def run_tailor(args, plan, ids_path, out_dir, repeat):
    """Runs tailor-run once; returns (wall seconds, its stdout+stderr)."""
    cmd = [args.tailor_run, plan, "--input", f"input_ids={ids_path}",
           "--output-dir", out_dir, "--threads", str(args.threads),
           "--repeat", str(repeat)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}:\n"
                 f"{proc.stdout}{proc.stderr}")
    return wall, proc.stdout + proc.stderr


def reported_ms(text):
    """tailor-run's own figures for --repeat: (mean, min) ms per run, or None."""
    m = re.search(r"mean ([0-9.]+) ms/run \(min ([0-9.]+)\)", text)
    return (float(m.group(1)), float(m.group(2))) if m else None


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads for both (default: all cores, %(default)s)")
    ap.add_argument("--repeat", type=int, default=5, help="timed forwards")
    ap.add_argument("--warmup", type=int, default=1, help="untimed forwards first")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="build tree (binaries, export cache); default %(default)s")
    ap.add_argument("--tailor", help="default BUILD/bin/tailor")
    ap.add_argument("--tailor-run", help="default BUILD/bin/tailor-run")
    args = ap.parse_args()
    args.tailor = args.tailor or os.path.join(args.build, "bin", "tailor")
    args.tailor_run = args.tailor_run or os.path.join(args.build, "bin", "tailor-run")
    import numpy as np
    import torch

    model = build_model(args)
    n_params = sum(p.numel() for p in model.parameters())
    label = f"{n_params / 1e6:.0f}M"
    print(f"model: Llama hidden {args.hidden}, {args.layers} layers, {args.heads} "
          f"heads ({args.kv_heads} kv), intermediate {args.intermediate}, vocab "
          f"{args.vocab}, untied lm_head: {n_params:,} parameters")

    work = os.path.join(args.build, "bench", "cpu_forward_100m", export_key(args))
    onnx_path = os.path.join(work, "model.onnx")
    if not os.path.exists(os.path.join(work, "done")):
        os.makedirs(work, exist_ok=True)
        start = time.perf_counter()
        export(model, onnx_path)
        open(os.path.join(work, "done"), "w").write("ok\n")
        print(f"exported {onnx_path} in {time.perf_counter() - start:.1f} s")
    else:
        print(f"export: {onnx_path} (cached)")

    ids = torch.randint(0, args.vocab, (args.batch, args.seq),
                        generator=torch.Generator().manual_seed(args.seed + 1))
    ids_path = os.path.join(work, f"input_ids.b{args.batch}.t{args.seq}.npy")
    np.save(ids_path, ids.numpy())

    if not (os.path.exists(args.tailor) and os.path.exists(args.tailor_run)):
        sys.exit(f"error: {args.tailor} or {args.tailor_run} not found "
                 "(build tailor first)")
    plan = os.path.join(work, f"model.b{args.batch}.t{args.seq}.tplan")
    start = time.perf_counter()
    # The plan sizes per-worker workspaces for --threads workers.
    proc = subprocess.run([args.tailor, "compile", onnx_path, "-o", plan,
                           "--batch", str(args.batch), "--seq", str(args.seq),
                           "--threads", str(args.threads)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: tailor compile failed:\n{proc.stderr}{proc.stdout}")
    print(f"tailor compile: {time.perf_counter() - start:.1f} s")

    print(f"load average before timing: {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} cores)")
    pt_ms, pt_min, pt_logits = time_pytorch(model, ids, args)
    print(f"PyTorch {torch.__version__} eager ({torch.get_num_threads()} threads): "
          f"best {pt_min:.1f} ms per forward (mean {pt_ms:.1f} ms over "
          f"{args.repeat} after {args.warmup} warm-up)")

    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    wall, text = run_tailor(args, plan, ids_path, out_dir, args.warmup + args.repeat)
    own = reported_ms(text)
    if own:
        tailor_mean, tailor_best = own
        how = f"mean {tailor_mean:.1f} ms over all {args.warmup + args.repeat}, cold first included"
    else:
        base_wall, _ = run_tailor(args, plan, ids_path, out_dir, args.warmup)
        tailor_mean = tailor_best = (wall - base_wall) * 1e3 / args.repeat
        how = (f"no figures printed: process wall times of --repeat "
               f"{args.warmup + args.repeat} and --repeat {args.warmup}, differenced")
    print(f"tailor-run ({args.threads} threads): best {tailor_best:.1f} ms per forward "
          f"({how})")
    print(f"load average after timing: {os.getloadavg()[0]:.2f}")

    got = np.load(os.path.join(out_dir, "logits.npy"))
    diff = (float(np.abs(got.astype(np.float64) - pt_logits).max())
            if got.shape == pt_logits.shape else float("nan"))
    print(f"max abs logits difference tailor vs PyTorch: {diff:.3g}")
    print(f"forward {label} (B={args.batch},T={args.seq}, {args.threads} threads): "
          f"tailor {tailor_best:.1f} ms, PyTorch {pt_min:.1f} ms, "
          f"ratio {tailor_best / pt_min:.2f} (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
