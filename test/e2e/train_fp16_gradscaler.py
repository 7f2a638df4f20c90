#!/usr/bin/env python3
"""fp16 mixed precision with dynamic loss scaling against PyTorch's
GradScaler, step by step, skipped steps included.

The tiny Llama of train_common (hidden 64, 2 layers, vocab 256), LoRA r=8
on q_proj and v_proj, AdamW, 30 steps of B=2 x T=16 tokens, trained twice:

  - PyTorch: the HF model under torch.autocast("cpu", dtype=torch.float16)
    (its GEMMs in half: linear, matmul, and whatever else autocast lowers),
    with torch.amp.GradScaler("cpu", init_scale=2**24, growth_factor=2,
    backoff_factor=0.5, growth_interval=4): scaler.scale(loss).backward(),
    scaler.unscale_, clip_grad_norm_, scaler.step, scaler.update, and the
    LR scheduler stepped only after an applied update (as Hugging Face's
    Trainer does when GradScaler skips);
  - tailor: `mixed_precision: fp16` (written as axolotl's `fp16: true`) and
    the same four settings, starting from PEFT's initial adapter.

init_scale 2**24 overflows the half gradients at first, so the first steps
are skipped while the scale backs off, and growth_interval 4 grows it back
into an overflow every few steps: both branches of the state machine run
(see SCALER for why the factors are 4).

Checks:
  - the per-step sequence of loss scales and skipped flags is identical;
  - losses agree within LOSS_TOL relative (the two round different
    intermediates to half: autocast also runs attention in half and adds
    LoRA's output to the base output in half, tailor rounds exactly the
    GEMM operands and products, so the two differ by a few half ulps);
  - the learning rate of every step matches (the schedule counts applied
    updates), and skipped steps report a non-finite norm on both sides;
  - the final adapter matches within WEIGHT_TOL of max|ref| per tensor,
    and training moved it well beyond that;
  - a run stopped after step 6 (TAILOR_TRAIN_STOP_AFTER, as SIGINT: the
    growth tracker is then mid-interval) and
    resumed equals the uninterrupted one bit for bit: metrics (scale and
    skipped flags included), final adapter, and the checkpoint's
    loss_scaler;
  - offload (the optimizer, frozen parameters, activations): metrics and
    adapter identical to the run without, bit for bit;
  - data parallelism: 2 CPU ranks under mpirun (micro-batch 1 each, 12
    steps) with DDP and ZeRO-1/2/3 against DDP's arithmetic in PyTorch
    (each rank's scaled backward, gradients averaged before unscale_): the
    same scales and skips, losses and adapter within the tolerances above;
    and a step where rank 0's gradients overflow and rank 1's do not
    (sequences chosen by their measured overflow thresholds) skips on both
    ranks under DDP, ZeRO-2 and ZeRO-3;
  - recipe errors name the key: loss-scaling keys without fp16, a
    backoff_factor of 1 or more, a growth_factor of 1, fp16 with gradient
    compression or a layer split;
  - the plan records the precision and the settings (tailor inspect);
  - the C API's trainer (through the Python binding, libtailor_runtime)
    reports the same scales, skips and losses for the first CAPI_STEPS.

  train_fp16_gradscaler.py --bin BUILD/bin --work DIR
"""

import argparse
import filecmp
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_common as tc  # noqa: E402

STEPS = 30
# Where a batch's half gradients overflow depends on the batch: measured
# with PyTorch on this model and data, between 2**18.78 and 2**19.48 (the
# residual stream's gradient, amplified by the RMSNorm backward, past 65504
# where it enters o_proj's backward GEMM). Factors of 4 keep every scale the
# run reaches (2**24, 2**22, 2**20, 2**18) at least 2**0.5 away from those
# thresholds, so the two implementations' different roundings cannot flip
# a step: 2**20 always overflows and 2**18 never does.
SCALER = dict(init_scale=2.0 ** 24, growth_factor=4.0, backoff_factor=0.25,
              growth_interval=4)
# Losses: the two sides round different intermediates to half (see the
# file comment); measured worst 9e-6 relative, bound with margin.
LOSS_TOL = 1e-4
# The adapter after 30 steps: the same rounding differences, through 22
# AdamW updates, which turn small gradient differences on elements with
# small gradients into whole-step differences (measured worst 1.9e-2 of
# max|ref|, on a lora_A; training moves the adapter by 1.0 of max|ref|).
WEIGHT_TOL = 5e-2
LR_TOL = 1e-6
# The unscaled gradient norm of applied steps (the same rounding
# differences; measured worst 3.6e-4 relative).
GNORM_TOL = 5e-3
STOP_AT = 6
CAPI_STEPS = 9
# Data parallelism: 2 CPU ranks of micro-batch 1. One sequence's half
# gradients overflow between 2**17.58 and 2**18.67 on this data (measured
# as above), so factors of 8 from 2**26 visit 2**26, 2**23, 2**20 (always
# overflow) and 2**17 (never): every step away from the band, both
# branches run.
DDP_RANKS = 2
DDP_STEPS = 12
DDP_SCALER = dict(init_scale=2.0 ** 26, growth_factor=8.0, backoff_factor=0.125,
                  growth_interval=4)
# The step where one rank overflows and the other does not: the sequences
# with the lowest and the highest threshold go first, to ranks 0 and 1,
# and the first scale lies midway (at least MIXED_MARGIN from each, in
# log2); the scale after the back-off lies far below every threshold.
MIXED_STEPS = 4
MIXED_MARGIN = 0.4


def recipe(scaler_cfg=SCALER, steps=STEPS, micro_batch=tc.B):
    r = tc.recipe_defaults()
    r.update(max_steps=steps, save_steps=0, learning_rate=2e-3,
             max_grad_norm=1.0, fp16=True, micro_batch_size=micro_batch,
             **scaler_cfg)
    if float(scaler_cfg["init_scale"]).is_integer():
        r["init_scale"] = int(scaler_cfg["init_scale"])
    return r


def torch_reference(base, rows, r, scaler_cfg=SCALER, steps=STEPS, ranks=1,
                    save_init=True):
    """PEFT LoRA under CPU autocast fp16 with GradScaler; returns
    (records, init_adapter_dir, final adapter). With `ranks` > 1, DDP's
    arithmetic in one process: each rank's micro-batch (rank r of step s
    takes micro-batch (s-1) ranks + r, as tailor's trainer and a
    DistributedSampler without shuffling do) runs its own scaled backward,
    the gradients are averaged (DDP's all-reduce, before unscale_), and the
    record says which ranks' gradients alone were finite."""
    import torch

    model = tc.make_peft(base, r)
    init = os.path.join(r["_work"], "init_adapter")
    if save_init:
        model.save_pretrained(init)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = tc.make_optimizer(params, r)
    sched = tc.make_scheduler(opt, r)
    scaler = torch.amp.GradScaler("cpu", **scaler_cfg)
    records = []
    model.train()
    for step in range(1, steps + 1):
        lr = opt.param_groups[0]["lr"]
        scale = scaler.get_scale()
        losses, rank_finite, summed = [], [], None
        for rank in range(ranks):
            ids, labels = tc.micro_batch(rows, (step - 1) * ranks + rank,
                                         r["micro_batch_size"])
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(input_ids=ids, labels=labels, use_cache=False)
            scaler.scale(out.loss).backward()
            losses.append(out.loss.item())
            grads = [p.grad.clone() for p in params]
            rank_finite.append(all(bool(torch.isfinite(g).all()) for g in grads))
            summed = grads if summed is None else [a + b for a, b in zip(summed, grads)]
            opt.zero_grad(set_to_none=True)
        for p, g in zip(params, summed):
            p.grad = g / ranks
        scaler.unscale_(opt)
        found = sum(v.item() for v in
                    scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
        norm = float(torch.nn.utils.clip_grad_norm_(params, r["max_grad_norm"]))
        scaler.step(opt)
        scaler.update()
        skipped = found > 0
        if not skipped:
            sched.step()
        opt.zero_grad(set_to_none=True)
        records.append(dict(step=step, loss=sum(losses) / ranks, lr=lr,
                            grad_norm=norm, loss_scale=scale, skipped=skipped,
                            rank_finite=rank_finite))
    return records, init, tc.peft_tensors(model)


def compare(ref, metrics):
    problems = []
    print(f"  {'step':>4} {'scale torch':>11} {'tailor':>9} {'skip':>5} "
          f"{'loss torch':>11} {'loss tailor':>11} {'rel':>8} {'lr':>9}")
    worst = worst_norm = 0.0
    for rec in ref:
        s = rec["step"]
        m = metrics.get(s)
        if m is None:
            problems.append(f"step {s}: missing from metrics.jsonl")
            continue
        flag = ""
        if m.get("loss_scale") != rec["loss_scale"] or m.get("skipped") != rec["skipped"]:
            problems.append(f"step {s}: scale {m.get('loss_scale')} skipped "
                            f"{m.get('skipped')}, torch {rec['loss_scale']} "
                            f"{rec['skipped']}")
            flag += "  <-- scaler"
        e = tc.rel_err(float(m["loss"]), rec["loss"])
        worst = max(worst, e)
        if not e <= LOSS_TOL:
            problems.append(f"step {s}: loss {m['loss']} vs {rec['loss']:.7g} "
                            f"(rel {e:.2e})")
            flag += "  <-- loss"
        if not tc.rel_err(float(m["lr"]), rec["lr"]) <= LR_TOL:
            problems.append(f"step {s}: lr {m['lr']} vs {rec['lr']:.8g}")
            flag += "  <-- lr"
        finite = m.get("grad_norm") is not None
        if finite == rec["skipped"] or math.isfinite(rec["grad_norm"]) == rec["skipped"]:
            problems.append(f"step {s}: grad_norm {m.get('grad_norm')} vs "
                            f"{rec['grad_norm']} (skipped {rec['skipped']})")
            flag += "  <-- grad_norm"
        elif finite:
            ge = tc.rel_err(float(m["grad_norm"]), rec["grad_norm"])
            worst_norm = max(worst_norm, ge)
            if not ge <= GNORM_TOL:
                problems.append(f"step {s}: grad_norm {m['grad_norm']} vs "
                                f"{rec['grad_norm']:.7g} (rel {ge:.2e})")
                flag += "  <-- grad_norm"
        print(f"  {s:>4} {rec['loss_scale']:>11.0f} {m.get('loss_scale', 0):>9.0f} "
              f"{'yes' if m.get('skipped') else 'no':>5} {rec['loss']:>11.6f} "
              f"{float(m['loss']):>11.6f} {e:>8.1e} {float(m['lr']):>9.3g}{flag}")
    print(f"  worst loss rel err {worst:.2e} (bound {LOSS_TOL:g}), worst "
          f"grad_norm rel err {worst_norm:.2e} (bound {GNORM_TOL:g})")
    return problems


def resume_check(tailor, plan, data, work, whole, init_adapter):
    """Stops after STOP_AT, resumes, and compares with `whole` (which
    started from `init_adapter`)."""
    problems = []
    parts = os.path.join(work, "parts")
    shutil.rmtree(parts, ignore_errors=True)
    base = [tailor, "train", plan, "--data", data, "--output-dir", parts,
            "--threads", "2", "--max-steps", str(STEPS)]
    env = dict(os.environ, TAILOR_TRAIN_STOP_AFTER=str(STOP_AT))
    for cmd, e in ((base + ["--init-adapter", init_adapter], env),
                   (base + ["--resume"], None)):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=e,
                              timeout=600)
        if proc.returncode != 0:
            return [f"{' '.join(cmd)} exited {proc.returncode}: "
                    f"{tc.first_lines(proc.stderr + proc.stdout)}"]
    state = os.path.join(parts, f"checkpoint-{STOP_AT}", "trainer_state.json")
    with open(state) as f:
        scaler = json.load(f).get("loss_scaler")
    print(f"  checkpoint-{STOP_AT} loss_scaler: {scaler}")
    if not scaler or scaler.get("growth_tracker", 0) == 0:
        problems.append(f"checkpoint-{STOP_AT} should hold a loss_scaler with a "
                        f"growth tracker mid-interval, got {scaler}")
    rows = lambda d: [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl"))]  # noqa: E731
    keys = ("step", "loss", "lr", "grad_norm", "loss_scale", "skipped")
    a = [tuple(r.get(k) for k in keys) for r in rows(whole)]
    b = [tuple(r.get(k) for k in keys) for r in rows(parts)]
    if a != b:
        diff = next((x, y) for x, y in zip(a, b) if x != y) if len(a) == len(b) else (len(a), len(b))
        problems.append(f"resumed metrics differ from the uninterrupted run: {diff}")
    if not filecmp.cmp(os.path.join(whole, "adapter_model.safetensors"),
                       os.path.join(parts, "adapter_model.safetensors"),
                       shallow=False):
        problems.append("resumed adapter differs from the uninterrupted one")
    if not problems:
        print(f"  stopped after step {STOP_AT} and resumed: metrics (scales and "
              f"skips included) and adapter identical to the uninterrupted run")
    return problems


def capi_check(bin_dir, plan, data, work, init_adapter, whole):
    """The C API trainer (tailor_trainer, through python/tailor) reports the
    scale and skipped flag of each step as `tailor train` does."""
    lib = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "lib",
                       "libtailor_runtime.so")
    if not os.path.exists(lib):
        return [f"no {lib} to check the C API trainer with"]
    os.environ["TAILOR_RUNTIME_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import tailor

    trainer = tailor.Trainer(plan, data=data,
                             output_dir=os.path.join(work, "capi"),
                             init_adapter=init_adapter, max_steps=CAPI_STEPS,
                             num_threads=2)
    got = [trainer.step() for _ in range(CAPI_STEPS)]
    want = [tc.read_metrics(whole)[s] for s in range(1, CAPI_STEPS + 1)]
    problems = [f"C API step {m.step}: scale {m.loss_scale} skipped {m.skipped} "
                f"loss {m.loss}, tailor train {w['loss_scale']} {w['skipped']} "
                f"{w['loss']}" for m, w in zip(got, want)
                if (m.loss_scale, m.skipped, float(f"{m.loss:.9g}"))
                != (w["loss_scale"], w["skipped"], w["loss"])]
    if not problems:
        print(f"  C API trainer: the same scales, skips and losses for "
              f"{CAPI_STEPS} steps")
    return problems


def refusals(bin_dir, onnx_path, work):
    base = tc.recipe_defaults()
    cases = [
        ("scale-without-fp16", dict(base, init_scale=1024), "cpu",
         "'init_scale' sets fp16 loss scaling, which needs 'mixed_precision: fp16'"),
        ("backoff", dict(base, fp16=True, backoff_factor=1.5), "cpu",
         "'backoff_factor' must be in (0, 1)"),
        ("growth", dict(base, mixed_precision="fp16", growth_factor=1.0), "cpu",
         "'growth_factor' must be above 1"),
        ("compression", dict(base, fp16=True, gradient_compression="powersgd"),
         "2xcpu", "fp16 loss scaling with gradient compression is not "
         "supported yet"),
        ("split", dict(base, fp16=True, pipeline_stages=2), "2xcpu",
         "fp16 loss scaling with a layer split (pipeline_stages / device_map) "
         "is not supported yet"),
    ]
    return tc.check_refusals(bin_dir, onnx_path, work, cases)


def overflow_threshold(model, params, ids, labels):
    """log2 of the largest loss scale at which this micro-batch's half
    gradients stay finite (bisection to 2**-10)."""
    import torch

    lo, hi = 10.0, 30.0
    while hi - lo > 2.0 ** -10:
        mid = (lo + hi) / 2
        for p in params:
            p.grad = None
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(input_ids=ids, labels=labels, use_cache=False)
        (out.loss * 2.0 ** mid).backward()
        if all(bool(torch.isfinite(p.grad).all()) for p in params):
            lo = mid
        else:
            hi = mid
    for p in params:
        p.grad = None
    return lo


def mixed_overflow_data(base, rows, r):
    """The rows reordered so that step 1's two ranks get the sequences with
    the lowest and the highest overflow threshold at the initial adapter,
    and those thresholds."""
    model = tc.make_peft(base, r)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    th = [overflow_threshold(model, params, *tc.micro_batch(rows, i, 1))
          for i in range(len(rows))]
    lo = min(range(len(th)), key=th.__getitem__)
    hi = max(range(len(th)), key=th.__getitem__)
    order = [lo, hi] + [i for i in range(len(rows)) if i not in (lo, hi)]
    return [rows[i] for i in order], th[lo], th[hi]


# Sharding strategies of the data-parallel runs (recipe keys); each must
# give the reference's scales, skips, losses and adapter.
STRATEGIES = [("ddp", {}), ("zero1", dict(zero_stage=1)),
              ("zero2", dict(zero_stage=2)), ("zero3", dict(zero_stage=3))]
# Strategies the step where one rank alone overflows runs under: DDP's
# all-reduce, and ZeRO's reduce-scatter, after which only the rank holding
# the inf's chunk sees it until the norm's all-reduce.
MIXED_STRATEGIES = ("ddp", "zero2", "zero3")


def train_ranks(args, onnx_path, r, work, data, init_adapter):
    """Compiles and trains `r` on DDP_RANKS CPU ranks under mpirun."""
    os.makedirs(work)
    return tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                   init_adapter=init_adapter, threads=1,
                                   hardware=f"{DDP_RANKS}xcpu",
                                   ranks=DDP_RANKS)


def ddp_check(args, onnx_path, base, rows, data, init_adapter):
    """fp16 on 2 CPU ranks (mpirun) under DDP and ZeRO-1/2/3 against DDP's
    arithmetic in PyTorch: the same scales and skips, losses (the mean over
    ranks) and the adapter within the single-rank tolerances."""
    problems = []
    r = recipe(DDP_SCALER, DDP_STEPS, micro_batch=1)
    r["_work"] = args.work
    ref, _, final = torch_reference(base, rows, r, DDP_SCALER, DDP_STEPS,
                                    DDP_RANKS, save_init=False)
    del r["_work"]
    skips = sum(x["skipped"] for x in ref)
    print(f"{DDP_RANKS} ranks, reference: {skips} of {DDP_STEPS} steps "
          f"skipped, scales {sorted(set(x['loss_scale'] for x in ref))}")
    if skips == 0 or skips == DDP_STEPS:
        problems.append("the data-parallel reference must both skip and "
                        "apply (vacuous)")
    for name, keys in STRATEGIES:
        print(f" {name}:")
        out, err = train_ranks(args, onnx_path, dict(r, **keys),
                               os.path.join(args.work, name), data,
                               init_adapter)
        if err:
            problems.append(f"{name}: {err}")
            continue
        problems += [f"{name}: {p}" for p in compare(ref, tc.read_metrics(out))]
        got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
        worst, tensor, probs = tc.compare_tensors(got, final, WEIGHT_TOL)
        problems += [f"{name}: {p}" for p in probs[:6]]
        print(f"  final adapter: worst max|diff|/max|ref| {worst:.2e} ({tensor})")
    return problems + mixed_overflow_check(args, onnx_path, base, rows,
                                           init_adapter)


def mixed_overflow_check(args, onnx_path, base, rows, init_adapter):
    """A step where rank 0's gradients overflow and rank 1's do not
    (sequences chosen by their measured overflow thresholds) skips on both
    ranks, and the runs go on as the reference does."""
    r = recipe(DDP_SCALER, MIXED_STEPS, micro_batch=1)
    mixed_rows, t_lo, t_hi = mixed_overflow_data(base, rows, r)
    mid = (t_lo + t_hi) / 2
    print(f"one sequence's overflow threshold: 2**{t_lo:.2f} .. 2**{t_hi:.2f}; "
          f"the mixed step at scale 2**{mid:.2f}")
    if t_hi - mid < MIXED_MARGIN:
        return [f"no two sequences {2 * MIXED_MARGIN} apart in overflow "
                f"threshold (vacuous)"]
    # An integer scale: exact in the recipe, in f32 and after the back-off.
    cfg = dict(DDP_SCALER, init_scale=float(round(2.0 ** mid)),
               growth_interval=1000)
    r = recipe(cfg, MIXED_STEPS, micro_batch=1)
    r["_work"] = args.work
    ref, _, _ = torch_reference(base, mixed_rows, r, cfg, MIXED_STEPS,
                                DDP_RANKS, save_init=False)
    del r["_work"]
    if ref[0]["rank_finite"] != [False, True] or not ref[0]["skipped"]:
        return [f"the mixed step's reference is {ref[0]} (vacuous)"]
    mixed_data = os.path.join(args.work, "mixed-data.jsonl")
    tc.write_jsonl(mixed_rows, mixed_data)
    problems = []
    for name, keys in STRATEGIES:
        if name not in MIXED_STRATEGIES:
            continue
        print(f" {name}, rank 0 alone overflowing at step 1:")
        out, err = train_ranks(args, onnx_path, dict(r, **keys),
                               os.path.join(args.work, f"mixed-{name}"),
                               mixed_data, init_adapter)
        if err:
            problems.append(f"{name} mixed: {err}")
            continue
        problems += [f"{name} mixed: {p}"
                     for p in compare(ref, tc.read_metrics(out))]
    return problems


OFFLOADS = [("offload_optimizer", dict(offload_optimizer="cpu")),
            ("offload_params", dict(fsdp_offload_params=True)),
            ("offload_activations", dict(enable_activation_offloading=True))]


def offload_check(args, onnx_path, r, data, init_adapter, whole):
    """Each offload kind changes where bytes live, not what is computed:
    its metrics (scales and skips included) and adapter equal the plain
    run's bit for bit."""
    problems = []
    keys = ("step", "loss", "lr", "grad_norm", "loss_scale", "skipped")
    rows = lambda d: [tuple(json.loads(x).get(k) for k in keys)  # noqa: E731
                      for x in open(os.path.join(d, "metrics.jsonl"))]
    for name, extra in OFFLOADS:
        work = os.path.join(args.work, name)
        os.makedirs(work)
        out, err = tc.tailor_compile_train(args.bin, onnx_path, dict(r, **extra),
                                           work, data, init_adapter=init_adapter)
        if err:
            problems.append(f"{name}: {err}")
        elif rows(out) != rows(whole) or not filecmp.cmp(
                os.path.join(out, "adapter_model.safetensors"),
                os.path.join(whole, "adapter_model.safetensors"), shallow=False):
            problems.append(f"{name}: metrics or adapter differ from the "
                            f"run without offload")
    if not problems:
        print(f"  {', '.join(n for n, _ in OFFLOADS)}: metrics and adapter "
              f"identical to the run without offload")
    return problems


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
    base, info = tc.build_and_export(onnx_path, family="llama")
    rows = tc.make_rows(n_rows=STEPS * tc.B)
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    r = recipe()
    r["_work"] = args.work
    ref, init_adapter, final = torch_reference(base, rows, r)
    del r["_work"]
    skips = sum(x["skipped"] for x in ref)
    grown = sum(1 for a, b in zip(ref, ref[1:]) if b["loss_scale"] > a["loss_scale"])
    print(f"reference: {skips} of {STEPS} steps skipped, the scale grew {grown} "
          f"times (from {ref[0]['loss_scale']:.0f} to {ref[-1]['loss_scale']:.0f})")
    problems = []
    if skips == 0 or grown == 0:
        problems.append("the reference must both skip and grow (vacuous test)")

    work = os.path.join(args.work, "fp16")
    os.makedirs(work)
    out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                       init_adapter=init_adapter)
    if err:
        problems.append(err)
    else:
        problems += compare(ref, tc.read_metrics(out))
        got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
        worst, name, probs = tc.compare_tensors(got, final, WEIGHT_TOL)
        problems += probs[:6]
        init = tc.load_safetensors(os.path.join(init_adapter,
                                                "adapter_model.safetensors"))
        moved = tc.movement(final, init)
        print(f"  final adapter: worst max|diff|/max|ref| {worst:.2e} ({name}); "
              f"training moved it {moved:.2e}")
        if not moved > 10 * WEIGHT_TOL:
            problems.append(f"the adapter moved only {moved:.2e} (vacuous)")
        plan = os.path.join(work, "plan.tplan")
        proc = subprocess.run([os.path.join(args.bin, "tailor"), "inspect", plan],
                              capture_output=True, text=True)
        scaling = [ln.strip() for ln in proc.stdout.splitlines()
                   if "loss scaling" in ln or "fp16 GEMMs" in ln]
        print("  inspect: " + " / ".join(scaling))
        if len(scaling) != 2 or "growth_interval 4" not in proc.stdout:
            problems.append("tailor inspect does not show the precision and the "
                            "loss-scaling settings")
        problems += resume_check(os.path.join(args.bin, "tailor"), plan, data,
                                 work, out, init_adapter)
        problems += capi_check(args.bin, plan, data, work, init_adapter, out)
        problems += offload_check(args, onnx_path, r, data, init_adapter, out)
        problems += ddp_check(args, onnx_path, base, rows, data, init_adapter)
    problems += refusals(args.bin, onnx_path, os.path.join(args.work, "refuse"))
    if problems:
        print("FAIL:")
        for p in problems[:30]:
            print(f"  {p}")
        print("summary: fp16 loss scaling does NOT match GradScaler")
        return 1
    print(f"summary: fp16 loss scaling matches GradScaler over {STEPS} steps "
          f"({skips} skipped; loss rel {LOSS_TOL:g}, adapter {WEIGHT_TOL:g}); "
          f"offload exact; DDP and ZeRO-1/2/3 on {DDP_RANKS} ranks too; resume "
          "exact; recipe errors named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
