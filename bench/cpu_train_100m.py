#!/usr/bin/env python3
"""Times LoRA training steps of a ~100M-parameter Llama on the CPU: tailor vs
PyTorch + PEFT.

The model is bench/cpu_forward_100m.py's (seeded random LlamaForCausalLM,
default hidden 768, 12 layers, 12 heads, intermediate 2048, vocab 32000,
untied lm_head; the exact parameter count is printed), exported once with
the TorchScript exporter at opset 17 and cached in the same place
(BUILD/bench/cpu_forward_100m/<key>/model.onnx). Both sides train LoRA
(r=8, alpha 16, dropout 0) on q_proj and v_proj with AdamW (lr 1e-4, no
weight decay, no clipping), batch B=1, sequence T=256, fp32, on the same
seeded JSONL data, each in its own subprocess started one after the other:

  - tailor: `tailor compile model.onnx --recipe R.yaml --threads N` (timed
    separately), then `tailor train PLAN --data D --max-steps S --threads N`;
    step times are metrics.jsonl's step_ms;
  - PyTorch + PEFT: this script with --worker pytorch (transformers'
    LlamaForCausalLM with its default sdpa attention, get_peft_model,
    torch.optim.AdamW, torch.set_num_threads(N)); each step (forward with
    labels, backward, optimizer step, zero_grad) is timed with
    time.perf_counter.

Reported per side: mean ms per step over steps 2..S (the first, cold step
excluded; the min is printed too) and peak memory, the maximum resident set
size of that subprocess (os.wait4's rusage; for PyTorch it includes the
interpreter, torch itself and building the model). The step-1 losses are
printed as a sanity check: the adapters start with B = 0, so both are the
base model's loss on the same tokens. Ends with one line such as

  train 134M LoRA r=8 (B=1,T=256, 2 threads): tailor X ms/step, peak Y MiB; PyTorch+PEFT X ms/step, peak Y MiB

  cpu_train_100m.py [--batch 1] [--seq 256] [--threads 2] [--steps 6]
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "test", "generators"))

import cpu_forward_100m as fwd  # noqa: E402  (the model, its export and cache)

TARGETS = ["q_proj", "v_proj"]


# Frozen-weight storage per --variants name: recipe lines added to the LoRA
# recipe (every linear weight but lm_head quantized, as QLoRA does).
VARIANTS = {
    "lora": [],
    "qlora": ["quantization: nf4", "double_quant: true"],
    "int8": ["quantization: int8"],
    "bf16": ["quantization: bf16"],
}


def add_model_args(ap):
    """The ~134M Llama's shape and LoRA flags, with this benchmark's
    defaults (shared by the benchmarks that train the same model)."""
    for flag, default in (("--rank", 8), ("--hidden", 768), ("--layers", 12),
                          ("--heads", 12), ("--kv-heads", 12),
                          ("--intermediate", 2048), ("--vocab", 32000),
                          ("--seed", 0)):
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-4)


def recipe_text(args, variant="lora"):
    lines = [
        *VARIANTS[variant],
        "adapter: lora", f"lora_r: {args.rank}", f"lora_alpha: {2 * args.rank}",
        "lora_dropout: 0.0", "lora_target_modules:",
        *[f"  - {t}" for t in TARGETS],
        f"sequence_len: {args.seq}", f"micro_batch_size: {args.batch}",
        "gradient_accumulation_steps: 1", f"learning_rate: {args.lr!r}",
        "lr_scheduler: constant", "warmup_steps: 0", f"max_steps: {args.steps}",
        "optimizer: adamw", "weight_decay: 0.0", "adam_beta1: 0.9",
        "adam_beta2: 0.999", "adam_epsilon: 1e-08", "max_grad_norm: 0.0",
        f"seed: {args.seed}", f"save_steps: {args.steps + 1000}", "shuffle: false",
    ]
    return "\n".join(lines) + "\n"


def write_data(path, args):
    """steps * batch rows of exactly seq seeded tokens."""
    import numpy as np

    rng = np.random.default_rng(args.seed + 1)
    with open(path, "w") as f:
        for _ in range(args.steps * args.batch):
            f.write(json.dumps({"input_ids": rng.integers(0, args.vocab, args.seq).tolist()})
                    + "\n")


def _vm_hwm_mib(pid):
    """The process's own peak resident set (VmHWM), or None once it exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def run_measured(cmd, env=None):
    """Runs cmd as a child; returns (returncode, peak RSS MiB, wall s,
    output). The peak is the child's VmHWM, polled while it runs: unlike
    rusage's ru_maxrss, it does not inherit this (torch-importing) parent's
    resident set through fork, and the high-water mark only grows, so the
    last reading before exit holds the peak."""
    import threading
    start = time.perf_counter()
    with open(os.devnull, "rb") as null:
        proc = subprocess.Popen(cmd, stdin=null, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
    peak = [0.0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            hwm = _vm_hwm_mib(proc.pid)
            if hwm is not None:
                peak[0] = max(peak[0], hwm)
            done.wait(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out = proc.stdout.read().decode(errors="replace")
    proc.wait()
    done.set()
    poller.join()
    proc.stdout.close()
    return proc.returncode, peak[0], time.perf_counter() - start, out


def child_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


def pytorch_worker(args):
    """The PyTorch + PEFT side (run in its own process): prints one JSON line
    {"step_ms": [...], "losses": [...]}."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.set_num_threads(args.threads)
    model = fwd.build_model(args)
    model.__class__ = type(model).__mro__[1]  # back from the logits-only wrapper
    model.train()
    torch.manual_seed(args.seed)
    pm = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank,
                                          lora_dropout=0.0, target_modules=TARGETS,
                                          bias="none", task_type="CAUSAL_LM"))
    params = [p for p in pm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    rows = [json.loads(line)["input_ids"] for line in open(args.data)]
    times, losses = [], []
    for step in range(args.steps):
        ids = torch.tensor(rows[step * args.batch:(step + 1) * args.batch],
                           dtype=torch.int64)
        start = time.perf_counter()
        out = pm(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - start) * 1e3)
        losses.append(float(out.loss))
    print(json.dumps({"step_ms": times, "losses": losses,
                      "trainable": sum(p.numel() for p in params)}))
    return 0


def stats(ms):
    timed = ms[1:] if len(ms) > 1 else ms
    return sum(timed) / len(timed), min(timed)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2, help="threads for both")
    ap.add_argument("--steps", type=int, default=6,
                    help="training steps per side; the first is not timed")
    ap.add_argument("--rank", type=int, default=8, help="LoRA r (alpha = 2r)")
    ap.add_argument("--lr", type=float, default=1e-4)
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
    ap.add_argument("--only", choices=["tailor", "pytorch"],
                    help="run one side only")
    ap.add_argument("--variants", default="lora",
                    help="tailor runs, comma-separated: lora (fp32 frozen "
                         "weights), qlora (NF4 + double quant), int8, bf16")
    ap.add_argument("--worker", choices=["pytorch"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step is not timed)")
    if args.worker == "pytorch":
        return pytorch_worker(args)
    args.tailor = args.tailor or os.path.join(args.build, "bin", "tailor")

    work = os.path.join(args.build, "bench", "cpu_forward_100m", fwd.export_key(args))
    onnx_path = os.path.join(work, "model.onnx")
    model = fwd.build_model(args)
    n_params = sum(p.numel() for p in model.parameters())
    label = f"{n_params / 1e6:.0f}M"
    print(f"model: Llama hidden {args.hidden}, {args.layers} layers, {args.heads} "
          f"heads ({args.kv_heads} kv), intermediate {args.intermediate}, vocab "
          f"{args.vocab}, untied lm_head: {n_params:,} parameters; LoRA r={args.rank} "
          f"alpha {2 * args.rank} on {', '.join(TARGETS)}")
    if not os.path.exists(os.path.join(work, "done")):
        os.makedirs(work, exist_ok=True)
        start = time.perf_counter()
        fwd.export(model, onnx_path)
        open(os.path.join(work, "done"), "w").write("ok\n")
        print(f"exported {onnx_path} in {time.perf_counter() - start:.1f} s")
    else:
        print(f"export: {onnx_path} (cached)")
    del model  # the children are measured, but keep this process small too

    run_dir = os.path.join(args.build, "bench", "cpu_train_100m")
    os.makedirs(run_dir, exist_ok=True)
    data = os.path.join(run_dir, f"data.b{args.batch}.t{args.seq}.s{args.steps}.jsonl")
    write_data(data, args)
    env = child_env(args.threads)
    print(f"load average before timing: {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} cores)")
    results = {}

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"error: unknown variant {v!r} (expected {', '.join(VARIANTS)})")
    if args.only in (None, "tailor"):
        if not os.path.exists(args.tailor):
            sys.exit(f"error: {args.tailor} not found (build tailor first)")
    for variant in variants if args.only in (None, "tailor") else []:
        key = "tailor" if variant == "lora" else f"tailor-{variant}"
        recipe = os.path.join(run_dir, f"recipe.{variant}.yaml")
        with open(recipe, "w") as f:
            f.write(recipe_text(args, variant))
        plan = os.path.join(run_dir, f"{variant}.b{args.batch}.t{args.seq}.tplan")
        start = time.perf_counter()
        proc = subprocess.run([args.tailor, "compile", onnx_path, "--recipe", recipe,
                               "--threads", str(args.threads), "-o", plan],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"error: tailor compile failed:\n{proc.stderr}{proc.stdout}")
        print(f"tailor compile ({variant}): {time.perf_counter() - start:.1f} s")
        out_dir = os.path.join(run_dir, f"out.{variant}")
        subprocess.run(["rm", "-rf", out_dir])
        rc, peak, wall, text = run_measured(
            [args.tailor, "train", plan, "--data", data, "--max-steps", str(args.steps),
             "--output-dir", out_dir, "--threads", str(args.threads)], env)
        if rc != 0:
            sys.exit(f"error: tailor train exited {rc}:\n{text[-3000:]}")
        metrics = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))
                   if line.strip()]
        ms = [float(m["step_ms"]) for m in metrics]
        mean, best = stats(ms)
        results[key] = (mean, peak)
        print(f"tailor train {variant} ({args.threads} threads): {mean:.1f} ms/step mean "
              f"over steps 2-{len(ms)} (min {best:.1f}, first {ms[0]:.1f}), peak RSS "
              f"{peak:.0f} MiB, process wall {wall:.1f} s, step-1 loss "
              f"{float(metrics[0]['loss']):.5f}")

    if args.only in (None, "pytorch"):
        import torch  # noqa: F401  (only for the version string)
        import peft
        import transformers

        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "pytorch",
               "--data", data]
        for k in ("batch", "seq", "threads", "steps", "rank", "lr", "hidden", "layers",
                  "heads", "kv_heads", "intermediate", "vocab", "seed"):
            cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
        rc, peak, wall, text = run_measured(cmd, env)
        if rc != 0:
            sys.exit(f"error: the PyTorch worker exited {rc}:\n{text[-3000:]}")
        res = json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
        mean, best = stats(res["step_ms"])
        results["pytorch"] = (mean, peak)
        print(f"PyTorch {torch.__version__} + transformers {transformers.__version__} + "
              f"PEFT {peft.__version__} ({args.threads} threads, "
              f"{res['trainable']:,} trainable): {mean:.1f} ms/step mean over steps "
              f"2-{len(res['step_ms'])} (min {best:.1f}, first {res['step_ms'][0]:.1f}), "
              f"peak RSS {peak:.0f} MiB, process wall {wall:.1f} s, step-1 loss "
              f"{res['losses'][0]:.5f}")
    print(f"load average after timing: {os.getloadavg()[0]:.2f}")

    def part(key, name):
        if key not in results:
            return f"{name} not run"
        mean, peak = results[key]
        return f"{name} {mean:.1f} ms/step, peak {peak:.0f} MiB"

    extra = "".join(f"; {part('tailor-' + v, 'tailor ' + v)}"
                    for v in variants if v != "lora")
    print(f"train {label} LoRA r={args.rank} (B={args.batch},T={args.seq}, "
          f"{args.threads} threads): {part('tailor', 'tailor')}{extra}; "
          f"{part('pytorch', 'PyTorch+PEFT')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
