#!/usr/bin/env python3
"""bf16 mixed precision on the CPU backend against PyTorch's bf16 autocast.

The tiny Llama of train_common (hidden 64, 2 layers, vocab 256), LoRA r=8
on q_proj and v_proj, SGD with momentum (AdamW's per-element normalization
turns any rounding difference on a near-zero gradient into a whole step,
so after a few steps two correct bf16 runs differ by O(1) of the adapter;
SGD's update is proportional to the gradient, so the adapter keeps the
gradients' agreement), STEPS steps of B=2 x T=16 tokens, trained five ways
from PEFT's initial adapter:

  - torch bf16 autocast: the HF model (f32 parameters) with PEFT, forward under
    torch.autocast("cpu", dtype=torch.bfloat16): autocast rounds every
    linear's input and weight to bf16 (so the frozen weights compute with
    exactly the bf16 values tailor stores them as) and keeps the LoRA
    parameters, the optimizer and the gradients f32; the backward's GEMMs
    run on the bf16 copies. We chose the f32 base under autocast over a
    `torch_dtype=torch.bfloat16` base: the latter also stores the norms,
    embeddings and every activation in bf16, which tailor does not do;
  - tailor bf16: `bf16: true` (axolotl's spelling) on `--hardware cpu`:
    frozen linear weights stored as bf16, every GEMM (forward, backward,
    LoRA) rounds its operands to bf16 and sums in f32, as tailor's CUDA
    bf16 GEMMs do;
  - torch bf16 GEMMs: the f32 model with every F.linear replaced by one
    that rounds its operands with torch's own `.to(torch.bfloat16)` and
    multiplies in f32, forward and backward (dx = bf16(dy) bf16(W),
    dW = bf16(dy)^T bf16(x)): the semantics of tailor's CUDA bf16 GEMMs
    (and of this CPU plan) without autocast's extra rounding of every
    linear's output to bf16, which tailor does not do (the GPU's GEMMs
    write f32). Attention (SDPA) stays f32 here as in tailor's CPU
    kernels (tailor's CUDA attention rounds q, k, v, dO, P and dS to bf16;
    the CPU's does not yet);
  - tailor f32 and torch f32: the same recipe in full precision.

Autocast's output rounding is independent noise of the same size as the
operand rounding both sides share, so against autocast alone an f32 run
is hardly further than a bf16 one (measured 1.3x on losses): the
tolerance check against autocast shows agreement within bf16 error, and
the check against torch bf16 GEMMs shows the test can fail.

Checks:
  - tailor bf16 vs torch bf16 autocast over all STEPS: losses within
    LOSS_TOL relative, grad norms within GNORM_TOL, the final adapter
    within WEIGHT_TOL of max|ref|;
  - tailor bf16 vs torch bf16 GEMMs over the first EARLY steps (after
    which any two bf16 runs drift apart, see EARLY): within EXACT_* (f32
    summation order only), and tailor f32 is more than SEPARATIONS times
    further from it (worst loss, worst grad norm, adapter after EARLY
    steps); over all steps tailor bf16 differs from tailor f32 by more
    than SEPARATION times the f32-vs-f32 noise;
  - the plan records precision bf16 (inspect text and --json) and its
    GEMMs are the `*_bf16` kernels;
  - bf16 DDP on two ranks (mpirun) gives one rank's losses and grad norms
    at the same global batch (DDP_TOL);
  - recipe combinations bf16 cannot do on the CPU are refused by name.

  train_bf16_autocast.py --bin BUILD/bin --work DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_common as tc  # noqa: E402

STEPS = 15
# Against autocast over all STEPS: tailor and autocast round the same GEMM
# operands to bf16, but autocast also rounds every linear's output (q, k,
# v, LoRA's output, the logits) to bf16, which tailor (like its CUDA
# GEMMs) keeps f32. Measured 3.6e-5, 1.6e-3 and 9.9e-3 (the adapter: about
# 2.5 bf16 ulps of its largest element); bounds with margin.
LOSS_TOL = 2e-4
GNORM_TOL = 1e-2
WEIGHT_TOL = 4e-2
# Against torch bf16 GEMMs (the same roundings) over the first EARLY
# steps: f32 summation order only (measured 1.7e-7, 4.6e-6 and 4.3e-4: the
# adapter already carries a few flipped roundings, see below; the grad
# norm 5.4e-5 on an AMD EPYC VM whose OpenBLAS runs its Haswell kernels,
# a few more flips from their order of sums, still 37x closer than
# tailor f32 is). Later the two drift apart as any two bf16 runs do: an
# f32 difference of one ulp flips the bf16 rounding of a few elements
# (each a 2^-9 change), and the flips compound; torch bf16 GEMMs itself,
# started from an adapter perturbed by 1e-7, drifts by 1e-5 in loss from
# step 7 on.
EARLY = 4
EXACT_LOSS_TOL = 1e-6
EXACT_GNORM_TOL = 1.5e-4
EXACT_WEIGHT_TOL = 1.5e-3
# Over those steps tailor f32 must be this many times further from torch
# bf16 GEMMs than tailor bf16 is, on the worst loss error, the worst grad
# norm error and the adapter error (measured 142x, 430x, 15x); over all
# steps tailor bf16 SEPARATION times further from tailor f32 than torch f32
# is (the f32 noise floor; measured 398x).
SEPARATION = 10.0
SEPARATIONS = (SEPARATION, SEPARATION, 5.0)
# bf16 DDP at world 2 against one rank at the same global batch.
DDP_TOL = 1e-5


def recipe(bf16):
    r = tc.recipe_defaults()
    r.update(max_steps=STEPS, save_steps=0, optimizer="sgd", momentum=0.9,
             weight_decay=0.0, learning_rate=0.1, max_grad_norm=1.0)
    if bf16:
        r["bf16"] = True
    return r


def bf16_linear():
    """F.linear computing as a bf16 tensor core with f32 accumulation and
    output: operands rounded by torch's float -> bfloat16 conversion, in the
    forward and in both backward GEMMs."""
    import torch

    def r(t):
        return t.to(torch.bfloat16).to(torch.float32)

    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            ctx.bias = b is not None
            y = r(x) @ r(w).t()
            return y + b if b is not None else y

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            dyr = r(dy)
            dx = dyr @ r(w)
            dw = dyr.reshape(-1, dy.shape[-1]).t() @ r(x).reshape(-1, x.shape[-1])
            db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.bias else None
            return dx, dw, db

    return lambda x, w, b=None: Linear.apply(x, w, b)


def torch_run(base, rows, r, init_adapter, mode):
    """PEFT LoRA from `init_adapter`; mode "autocast" (CPU bf16 autocast),
    "gemms" (bf16_linear for every F.linear) or "f32". Returns (records,
    final adapter, adapter after EARLY steps)."""
    import torch
    import torch.nn.functional as F
    from peft import PeftModel

    model = PeftModel.from_pretrained(tc.fresh_copy(base), init_adapter,
                                      is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = tc.make_optimizer(params, r)
    sched = tc.make_scheduler(opt, r)
    records = []
    linear = F.linear
    if mode == "gemms":
        F.linear = bf16_linear()
    try:
        for step in range(1, STEPS + 1):
            ids, labels = tc.micro_batch(rows, step - 1, r["micro_batch_size"])
            with torch.autocast("cpu", dtype=torch.bfloat16,
                                enabled=mode == "autocast"):
                out = model(input_ids=ids, labels=labels, use_cache=False)
            out.loss.float().backward()
            norm = float(torch.nn.utils.clip_grad_norm_(params,
                                                        r["max_grad_norm"]))
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            records.append(dict(step=step, loss=out.loss.item(), grad_norm=norm))
            if step == EARLY:
                early = tc.peft_tensors(model)
    finally:
        F.linear = linear
    return records, tc.peft_tensors(model), early


def distances(ref, ref_adapter, metrics, adapter, last):
    """(worst loss rel err, worst grad_norm rel err) over steps 1..last and
    the adapter error."""
    steps = [r for r in ref if r["step"] <= last]
    loss = max(tc.rel_err(float(metrics[r["step"]]["loss"]), r["loss"])
               for r in steps)
    norm = max(tc.rel_err(float(metrics[r["step"]]["grad_norm"]),
                          r["grad_norm"]) for r in steps)
    worst = max(tc.tensor_err(adapter[k], v) for k, v in ref_adapter.items())
    return loss, norm, worst


def table(refs, runs):
    """Per-step losses of every run, side by side."""
    names = list(refs) + list(runs)
    print("  step " + " ".join(f"{n:>19}" for n in names))
    for i in range(STEPS):
        vals = [refs[n][0][i]["loss"] for n in refs]
        vals += [float(runs[n]["metrics"][i + 1]["loss"]) for n in runs]
        print(f"  {i + 1:>4} " + " ".join(f"{v:>19.7f}" for v in vals))


def as_records(metrics):
    return [dict(step=s, loss=float(m["loss"]), grad_norm=float(m["grad_norm"]))
            for s, m in sorted(metrics.items())]


def pair(d, run, ref, figures):
    loss, norm, weight = figures
    d[run, ref] = figures
    print(f"  {run:>11} vs {ref:<22}: worst loss rel {loss:.2e}, grad_norm rel "
          f"{norm:.2e}, adapter max|diff|/max|ref| {weight:.2e}")


def bound(problems, run, ref, figures, tols):
    for what, got, tol in zip(("losses", "grad norms", "adapter"), figures, tols):
        if not got <= tol:
            problems.append(f"{run} {what} differ from {ref} by {got:.2e} "
                            f"(bound {tol:g})")


def check_distances(refs, runs):
    """Every pair's distances, printed; the bounds and separations."""
    problems = []
    d = {}
    print(f"  all {STEPS} steps, final adapters:")
    for run in runs:
        for ref in refs:
            pair(d, run, ref, distances(refs[ref][0], refs[ref][1],
                                        runs[run]["metrics"], runs[run]["adapter"],
                                        STEPS))
    other = {"tailor bf16": "tailor f32", "tailor f32": "tailor bf16"}
    for run in runs:
        pair(d, run, other[run], distances(
            as_records(runs[other[run]]["metrics"]), runs[other[run]]["adapter"],
            runs[run]["metrics"], runs[run]["adapter"], STEPS))
    print(f"  steps 1..{EARLY}, adapters after step {EARLY}:")
    for run in runs:
        figures = distances(refs["torch bf16 GEMMs"][0], refs["torch bf16 GEMMs"][2],
                            runs[run]["metrics"], runs[run]["early"], EARLY)
        pair(d, run, f"torch bf16 GEMMs ({EARLY})", figures)
    bound(problems, "tailor bf16", "torch bf16 autocast",
          d["tailor bf16", "torch bf16 autocast"], (LOSS_TOL, GNORM_TOL, WEIGHT_TOL))
    gemms = f"torch bf16 GEMMs ({EARLY})"
    bound(problems, "tailor bf16", gemms, d["tailor bf16", gemms],
          (EXACT_LOSS_TOL, EXACT_GNORM_TOL, EXACT_WEIGHT_TOL))
    near, far = d["tailor bf16", gemms], d["tailor f32", gemms]
    for i, what in enumerate(("worst loss error", "worst grad_norm error",
                              "adapter error")):
        ratio = far[i] / max(near[i], 1e-30)
        print(f"  separation ({what}, steps 1..{EARLY}): tailor f32 is "
              f"{ratio:.3g}x further from torch bf16 GEMMs than tailor bf16 "
              f"(need > {SEPARATIONS[i]:g})")
        if not ratio > SEPARATIONS[i]:
            problems.append(f"tailor f32 is not distinguishable from tailor bf16 "
                            f"by {what} ({ratio:.3g}x; vacuous test)")
    floor = d["tailor f32", "torch f32"][0]
    gap = d["tailor bf16", "tailor f32"][0]
    print(f"  bf16 vs f32 in tailor: worst loss rel {gap:.2e}, "
          f"{gap / max(floor, 1e-30):.3g}x the f32-vs-f32 noise {floor:.2e}")
    if not gap > SEPARATION * floor:
        problems.append(f"tailor bf16 is within {SEPARATION:g}x of the f32 noise "
                        f"({gap:.2e} vs {floor:.2e}): not computing in bf16")
    return problems


def early_adapter(bin_dir, plan, data, work, init_adapter):
    """The adapter after EARLY steps of `plan` from `init_adapter`, or an
    error."""
    out = os.path.join(work, "early")
    shutil.rmtree(out, ignore_errors=True)
    ok, msg = tc.run([os.path.join(bin_dir, "tailor"), "train", plan, "--data",
                      data, "--max-steps", str(EARLY), "--output-dir", out,
                      "--threads", "2", "--init-adapter", init_adapter], 600,
                     os.path.join(work, "early.log"))
    if not ok:
        return None, msg
    return tc.load_safetensors(os.path.join(out, "adapter_model.safetensors")), None


def plan_checks(bin_dir, plan):
    """The plan says bf16 and its GEMMs are the bf16 kernels."""
    problems = []
    text = subprocess.run([os.path.join(bin_dir, "tailor"), "inspect", plan],
                          capture_output=True, text=True).stdout
    target = [ln.strip() for ln in text.splitlines() if ln.startswith("target:")]
    print("  inspect: " + (target[0] if target else "(no target line)"))
    if not target or "bf16 GEMMs emulated" not in target[0]:
        problems.append("tailor inspect does not show the bf16 precision")
    info = tc.inspect_json(bin_dir, plan)
    precision = info.get("target", {}).get("precision")
    if precision != "bf16":
        problems.append(f"inspect --json precision is {precision!r}, not bf16")
    kernels = info.get("kernels", {})
    gemms = {k: n for k, n in kernels.items()
             if k.split("_bf16")[0] in ("linear", "matmul", "linear_weight_grad",
                                        "linear_quantized")}
    print(f"  inspect --json: precision {precision}; GEMM kernels (launches) {gemms}")
    if set(gemms) != {"linear_bf16", "linear_weight_grad_bf16"}:
        problems.append(f"the bf16 plan's GEMM kernels are {sorted(gemms)}, "
                        "expected linear_bf16 and linear_weight_grad_bf16 only")
    return problems


def ddp_check(bin_dir, onnx_path, data, work):
    """bf16 DDP on two ranks (mpirun) gives one rank's numbers at the same
    global batch (2 micro-batches a step): per-step losses and grad norms
    over EARLY steps within DDP_TOL (the gradients are summed in another
    order: f32 last bits)."""
    problems, metrics = [], {}
    for name, hardware, ranks, accumulation in (("world1", "cpu", 1, 2),
                                                ("ddp2", "2xcpu", 2, 1)):
        r = recipe(True)
        r.update(gradient_accumulation_steps=accumulation, max_steps=EARLY)
        sub = os.path.join(work, name)
        plan, err = tc.compile_plan(bin_dir, onnx_path, r, sub, hardware)
        out = None
        if not err:
            out, err = tc.train_plan(bin_dir, plan, sub, ranks, data, EARLY)
        if err:
            return [f"bf16 {name}: {err}"]
        metrics[name] = tc.read_metrics(out)
        info = tc.inspect_json(bin_dir, plan)
        if (info.get("world_size"), info["target"].get("precision")) != (ranks, "bf16"):
            problems.append(f"bf16 {name}: the plan is for {info.get('world_size')} "
                            f"ranks in {info['target'].get('precision')}")
    sent = [m.get("bytes_sent", 0) for m in metrics["ddp2"].values()]
    print(f"  bf16 DDP: rank 0 sent {sent} bytes in steps 1..{EARLY}")
    if not all(b > 0 for b in sent):
        problems.append("bf16 DDP sent no gradients (vacuous)")
    worst = 0.0
    for step in range(1, EARLY + 1):
        a, b = metrics["world1"][step], metrics["ddp2"][step]
        for key in ("loss", "grad_norm"):
            worst = max(worst, tc.rel_err(float(b[key]), float(a[key])))
    print(f"  bf16 DDP on 2 ranks vs 1 rank (same global batch, {EARLY} steps): "
          f"worst loss / grad_norm rel err {worst:.2e} (bound {DDP_TOL:g})")
    if not worst <= DDP_TOL:
        problems.append(f"bf16 DDP differs from one rank by {worst:.2e}")
    return problems


def refusals(bin_dir, onnx_path, work):
    base = tc.recipe_defaults()
    cases = [
        ("nf4", dict(base, bf16=True, adapter="qlora"), "cpu",
         "mixed_precision: bf16 with 'quantization: nf4' is not supported yet "
         "on the CPU backend"),
        ("int8", dict(base, bf16=True, load_in_8bit=True), "cpu",
         "mixed_precision: bf16 with 'quantization: int8' is not supported yet"),
        ("fp16-weights", dict(base, mixed_precision="bf16", quantization="fp16"),
         "cpu", "mixed_precision: bf16 with 'quantization: fp16'"),
    ]
    return tc.check_refusals(bin_dir, onnx_path, work, cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join("build", "bin"))
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, _ = tc.build_and_export(onnx_path, family="llama")
    rows = tc.make_rows(n_rows=STEPS * tc.B)
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    init_adapter = os.path.join(args.work, "init_adapter")
    tc.make_peft(base, recipe(True)).save_pretrained(init_adapter)

    refs = {name: torch_run(base, rows, recipe(mode != "f32"), init_adapter, mode)
            for name, mode in (("torch bf16 autocast", "autocast"),
                               ("torch bf16 GEMMs", "gemms"),
                               ("torch f32", "f32"))}
    runs, problems = {}, []
    for name, bf16 in (("tailor bf16", True), ("tailor f32", False)):
        work = os.path.join(args.work, name.replace(" ", "-"))
        os.makedirs(work)
        out, err = tc.tailor_compile_train(args.bin, onnx_path, recipe(bf16),
                                           work, data, init_adapter=init_adapter)
        plan = os.path.join(work, "plan.tplan")
        early = None
        if not err:
            early, err = early_adapter(args.bin, plan, data, work, init_adapter)
        if err:
            problems.append(f"{name}: {err}")
            continue
        runs[name] = dict(
            metrics=tc.read_metrics(out), early=early, plan=plan,
            adapter=tc.load_safetensors(os.path.join(out, "adapter_model.safetensors")))
    if len(runs) == 2:
        table(refs, runs)
        problems += check_distances(refs, runs)
        init = tc.load_safetensors(os.path.join(init_adapter, "adapter_model.safetensors"))
        moved = tc.movement(refs["torch bf16 autocast"][1], init)
        print(f"  training moved the adapter {moved:.2e} of max|final|")
        if not moved > 10 * WEIGHT_TOL:
            problems.append(f"the adapter moved only {moved:.2e} (vacuous)")
        problems += plan_checks(args.bin, runs["tailor bf16"]["plan"])
    problems += ddp_check(args.bin, onnx_path, data, os.path.join(args.work, "ddp"))
    problems += refusals(args.bin, onnx_path, os.path.join(args.work, "refuse"))
    if problems:
        print("FAIL:")
        for p in problems[:30]:
            print(f"  {p}")
        print("summary: bf16 on the CPU does NOT match PyTorch bf16 autocast")
        return 1
    print(f"summary: bf16 on the CPU matches PyTorch bf16 autocast over {STEPS} "
          f"steps (loss rel {LOSS_TOL:g}, grad norm {GNORM_TOL:g}, adapter "
          f"{WEIGHT_TOL:g}) and torch bf16 GEMMs (loss {EXACT_LOSS_TOL:g}, adapter "
          f"{EXACT_WEIGHT_TOL:g}; f32 tailor > {SEPARATION:g}x further); "
          "refusals named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
