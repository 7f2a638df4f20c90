#!/usr/bin/env python3
"""End-to-end training numerics: `tailor train` against PyTorch + PEFT.

Builds the seeded tiny Llama of train_common (hidden 64, 2 layers, 4 heads,
2 kv heads, vocab 256, fp32), exports it to ONNX, writes a seeded JSONL
dataset of 20*B rows of T tokens (B=2, T=16; some rows carry labels with
-100), and for each case trains the same model twice:

  - PyTorch: the HF model itself (full) or peft.get_peft_model on it with
    LoraConfig(r=8, lora_alpha=16, target_modules=[q_proj, v_proj],
    lora_dropout=0) (lora, lora-fa: lora_A frozen), torch.optim.AdamW (or
    SGD) over the trainable parameters, transformers' LR schedule, fp32,
    micro-batch i = rows [i*B, (i+1)*B), HF's causal-LM loss; with gradient
    accumulation each micro-batch's loss / accum is backpropagated, then
    clip_grad_norm_, step, scheduler step (as the HF Trainer does);
  - tailor: `tailor compile model.onnx --recipe R.yaml -o P.tplan` (a recipe
    saying the same, shuffle false) and `tailor train P.tplan --data D
    --max-steps N --output-dir OUT`; LoRA runs start from the PEFT model's
    initial adapter (save_pretrained, passed with --init-adapter), so both
    start identical.

and checks:
  - the loss of every step (metrics.jsonl) within --loss-tol (1e-4) relative;
  - the lr of every step within 1e-6 relative (absolute when 0), and
    grad_norm, where tailor reports one, within 1e-3 relative (the norm
    of the accumulated gradient before clipping, as clip_grad_norm_ returns);
  - the final weights (OUT/adapter_model.safetensors for LoRA, named
    `base_model.model.<module>.lora_{A,B}.weight`; OUT/model.safetensors
    under HF names for full) against PEFT's / PyTorch's, per tensor
    max|tailor - ref| / max|ref| <= --weight-tol (1e-4); the same for
    OUT/checkpoint-10 when tailor wrote it;
  - that training moved the reference weights well beyond the tolerance (a
    test that moves nothing proves nothing).

Cases (--mode): lora (AdamW, constant LR, 20 steps; plus lora-accum:
gradient_accumulation_steps 2, max_grad_norm 0.33 (clips most steps, not
all), cosine schedule with 3 warmup steps, 10 steps; plus lora-sgd: SGD with momentum 0.9 and a linear
schedule with 2 warmup steps), full (every parameter, AdamW), lora-fa;
`--mode all` (the default) runs them all. Weight decay is 0.01 on every
trainable tensor (plain torch AdamW semantics, no exclusions).

  train_vs_peft.py --bin build/bin --work build/test/train-vs-peft [--mode all]
  train_vs_peft.py --work /tmp/w --torch-only     # the PyTorch half only
"""

import argparse
import json
import os
import shutil
import sys

import train_common as tc

LOSS_TOL = 1e-4
LR_TOL = 1e-6
GNORM_TOL = 1e-3
WEIGHT_TOL = 1e-4


def cases(mode):
    """[(name, recipe overrides)] for --mode."""
    lora = [
        ("lora", {}),
        # The LoRA gradient norms here are 0.3-0.45: 0.33 clips most steps
        # but not all (max_grad_norm 1.0 would never clip).
        ("lora-accum", dict(gradient_accumulation_steps=2, max_grad_norm=0.33,
                            lr_scheduler="cosine", warmup_steps=3, max_steps=10,
                            save_steps=5)),
        ("lora-sgd", dict(optimizer="sgd", momentum=0.9, weight_decay=0.0,
                          learning_rate=0.05, lr_scheduler="linear",
                          warmup_steps=2)),
    ]
    full = [("full", dict(adapter="full"))]
    fa = [("lora-fa", dict(adapter="lora-fa"))]
    return {"lora": lora, "full": full, "lora-fa": fa,
            "all": lora + full + fa}[mode]


def recipe_for(overrides):
    r = tc.recipe_defaults()
    r.update(overrides)
    if r["adapter"] == "full":
        for k in [k for k in r if k.startswith("lora_") or k == "use_rslora"]:
            del r[k]
    if r["optimizer"] == "sgd":
        for k in ("adam_beta1", "adam_beta2", "adam_epsilon"):
            r.pop(k)
    else:
        r.pop("momentum")
    return r


def describe(name, r):
    if r["adapter"] == "full":
        what = "full fine-tuning"
    else:
        what = (f"{r['adapter']} r={r['lora_r']} alpha={r['lora_alpha']} "
                f"[{', '.join(r['lora_target_modules'])}]")
    opt = r["optimizer"] + (f" momentum {r['momentum']}" if r["optimizer"] == "sgd" else "")
    return (f"case {name}: {what}, {opt} lr {r['learning_rate']:g} wd "
            f"{r['weight_decay']:g} {r['lr_scheduler']} (warmup "
            f"{r['warmup_steps']}), accum {r['gradient_accumulation_steps']}, "
            f"max_grad_norm {r['max_grad_norm']:g}, {r['max_steps']} steps of "
            f"B={r['micro_batch_size']} T={r['sequence_len']}")


def torch_reference(base, rows, r, work):
    """Trains the PyTorch reference; returns dict(records, init, final,
    snaps, init_adapter)."""
    if r["adapter"] == "full":
        model = tc.fresh_copy(base)
        snapshot = lambda m: {k: v.detach().numpy().copy()  # noqa: E731
                              for k, v in m.named_parameters()}
        init = snapshot(model)
        init_dir = None
    else:
        model = tc.make_peft(base, r)
        if r["adapter"] == "lora-fa":
            for n, p in model.named_parameters():
                if "lora_A" in n:
                    p.requires_grad_(False)
        snapshot = tc.peft_tensors
        init = snapshot(model)
        init_dir = os.path.join(work, "init_adapter")
        model.save_pretrained(init_dir)
    records, snaps = tc.torch_train(model, rows, r, snapshot)
    return dict(records=records, init=init, final=snapshot(model), snaps=snaps,
                init_adapter=init_dir)


def compare_run(name, r, ref, out):
    """Prints the per-step table and the weight comparison; returns problems."""
    problems = []
    try:
        metrics = tc.read_metrics(out)
    except (OSError, ValueError, KeyError) as e:
        return [f"cannot read metrics.jsonl: {e}"]
    print(f"  {'step':>4} {'loss torch':>12} {'loss tailor':>12} {'rel err':>9} "
          f"{'lr torch':>10} {'lr tailor':>10} {'gnorm torch':>11} {'gnorm tailor':>12}")
    worst_loss = 0.0
    for rec in ref["records"]:
        s = rec["step"]
        m = metrics.get(s)
        if m is None:
            problems.append(f"step {s}: missing from metrics.jsonl")
            print(f"  {s:>4} {rec['loss']:>12.7f} {'-':>12}")
            continue
        loss = m.get("loss")
        e = tc.rel_err(float(loss), rec["loss"]) if loss is not None else float("inf")
        worst_loss = max(worst_loss, e)
        flag = "" if e <= LOSS_TOL else "  <-- loss"
        if not e <= LOSS_TOL:
            problems.append(f"step {s}: loss {loss} vs {rec['loss']:.7f} (rel {e:.2e})")
        lr = m.get("lr")
        if lr is None or not tc.rel_err(float(lr), rec["lr"]) <= LR_TOL:
            problems.append(f"step {s}: lr {lr} vs {rec['lr']:.8g}")
            flag += "  <-- lr"
        gn = m.get("grad_norm")
        gn_text = "-"
        if gn is not None:
            gn_text = f"{float(gn):.5g}"
            if not tc.rel_err(float(gn), rec["grad_norm"]) <= GNORM_TOL:
                problems.append(f"step {s}: grad_norm {gn} vs {rec['grad_norm']:.6g}")
                flag += "  <-- grad_norm"
        print(f"  {s:>4} {rec['loss']:>12.7f} {float(loss):>12.7f} {e:>9.1e} "
              f"{rec['lr']:>10.4g} {float(lr) if lr is not None else float('nan'):>10.4g} "
              f"{rec['grad_norm']:>11.5g} {gn_text:>12}{flag}")
    extra = sorted(set(metrics) - {rec["step"] for rec in ref["records"]})
    if extra:
        problems.append(f"metrics.jsonl has unexpected steps {extra[:5]}")

    fname = "model.safetensors" if r["adapter"] == "full" else "adapter_model.safetensors"
    what = "model" if r["adapter"] == "full" else "adapter"
    path = os.path.join(out, fname)
    if not os.path.exists(path):
        problems.append(f"no {fname} in the output dir")
    else:
        got = tc.load_safetensors(path)
        worst, wname, probs = tc.compare_tensors(got, ref["final"], WEIGHT_TOL)
        problems += [f"final {what}: {p}" for p in probs[:8]]
        print(f"  final {what}: {len(ref['final'])} tensors, worst max|diff|/max|ref| "
              f"{worst:.2e} ({wname})")
    if r["adapter"] != "full":
        problems += tc.check_adapter_config(out, r)
    for step, snap in sorted(ref["snaps"].items()):
        ck = os.path.join(out, f"checkpoint-{step}", fname)
        if not os.path.exists(ck):
            print(f"  checkpoint-{step}: no {fname} (not compared)")
            continue
        worst, wname, probs = tc.compare_tensors(tc.load_safetensors(ck), snap,
                                                 WEIGHT_TOL)
        problems += [f"checkpoint-{step}: {p}" for p in probs[:4]]
        print(f"  checkpoint-{step} {what}: worst max|diff|/max|ref| {worst:.2e} ({wname})")
    print(f"  worst loss rel err {worst_loss:.2e}")
    return problems


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor (default %(default)s)")
    ap.add_argument("--work", required=True, help="scratch directory (recreated)")
    ap.add_argument("--mode", default="all", choices=["all", "lora", "full", "lora-fa"])
    ap.add_argument("--threads", type=int, default=2, help="tailor train --threads")
    ap.add_argument("--torch-only", action="store_true",
                    help="run and print the PyTorch references only")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if not args.torch_only:
        ok, why = tc.tailor_available(args.bin)
        if not ok:
            print(f"error: {why}", file=sys.stderr)
            print("summary: 0 training cases run (tailor lacks training support)")
            return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, info = tc.build_and_export(onnx_path)
    print(f"model: tiny Llama, {info['params']:,} parameters, attn "
          f"{info['attn_implementation']}, exported to {onnx_path} (opset "
          f"{tc.OPSET}); {info['weights_checked']} of its parameters found "
          f"bit-identical among the initializers" +
          (f", NOT found: {', '.join(info['weights_unmatched'])}"
           if info["weights_unmatched"] else ""))
    rows = tc.make_rows()
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    n_lab = sum("labels" in r for r in rows)
    print(f"data: {data}: {len(rows)} rows of {tc.T} tokens, {n_lab} with labels "
          f"({sum(x == -100 for r in rows for x in r.get('labels', []))} of them -100)")

    failures, todo = [], cases(args.mode)
    for name, overrides in todo:
        r = recipe_for(overrides)
        work = os.path.join(args.work, name)
        os.makedirs(work)
        print(describe(name, r))
        ref = torch_reference(base, rows, r, work)
        moved = tc.movement(ref["final"], ref["init"])
        problems = []
        if r["max_grad_norm"] > 0:
            clipped = sum(x["grad_norm"] > r["max_grad_norm"] for x in ref["records"])
            print(f"  (the reference clipped {clipped} of {len(ref['records'])} steps)")
        if not moved > 100 * WEIGHT_TOL:
            problems.append(f"reference weights moved only {moved:.2e} (vacuous)")
        if args.torch_only:
            losses = " ".join(f"{x['loss']:.5f}" for x in ref["records"])
            print(f"  torch losses: {losses}")
            print(f"  torch lr: " + " ".join(f"{x['lr']:.3g}" for x in ref["records"]))
            print(f"  torch grad_norm: " +
                  " ".join(f"{x['grad_norm']:.3g}" for x in ref["records"]))
            print(f"  weights moved {moved:.3g} (max|final-init|/max|final|)")
        else:
            out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                               init_adapter=ref["init_adapter"],
                                               threads=args.threads)
            if err:
                problems.append(err)
            else:
                problems += compare_run(name, r, ref, out)
        if problems:
            failures.append(name)
            print(f"  FAIL {name}:")
            for p in problems[:12]:
                print(f"    {p}")
        else:
            print(f"  ok   {name} (weights moved {moved:.2g} from init)")
    n = len(todo)
    if args.torch_only:
        print(f"summary: {n - len(failures)}/{n} PyTorch reference runs done "
              "(tailor not run)")
    else:
        print(f"summary: {n - len(failures)}/{n} training cases match PyTorch/PEFT "
              f"(loss rel {LOSS_TOL:g}, weights max|diff|/max|ref| {WEIGHT_TOL:g})"
              + (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
