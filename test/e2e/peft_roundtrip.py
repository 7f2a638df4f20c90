#!/usr/bin/env python3
"""End-to-end PEFT interchange: adapters tailor writes load in PEFT, and
adapters PEFT writes load in tailor, with the same numerics.

On the seeded tiny Llama of train_common (exported once to ONNX; the
PyTorch reference is the exported object itself):

(a) tailor -> PEFT. `tailor compile --recipe` + `tailor train` a short LoRA
    run (lr 1e-2, tailor's own adapter initialization, 5 steps), then load
    OUT with peft.PeftModel.from_pretrained onto the HF model and compare its
    logits on a seeded batch [2, 16] with tailor's own inference of the same
    adapter: `tailor compile model.onnx --adapter OUT -o F.tplan` and
    `tailor-run F.tplan --input input_ids=... --output logits=...`.
    Passes when OUT/adapter_config.json says what the recipe said (r,
    lora_alpha, target_modules, use_rslora, layers_to_transform) and
    max|tailor - PEFT| <= --tol (1e-4) * max|PEFT logits|.
      a-all7:   q,k,v,o,gate,up,down_proj, r=4, alpha 8
      a-rslora: q_proj, v_proj in layer 1 only (lora_layers [1]), r=8,
                alpha 16, use_rslora
      a-peft:   the same inference check on a PEFT-written adapter (b-qv's)
(b) PEFT -> tailor. A PEFT adapter whose lora_B is NOT zero (seeded random
    values set before save_pretrained) is given to `tailor train
    --init-adapter` with learning_rate 0 and --max-steps 1: tailor's first
    loss must equal PEFT's causal-LM loss of that model on the same
    micro-batch (rows 0-1) within --tol relative, and the adapter tailor
    writes back must be unchanged (lr 0).
      b-qv:     q_proj, v_proj, r=8, alpha 16
      b-all7:   all seven projections, r=4, alpha 16, use_rslora

Every case also checks that the adapter matters (its effect on the logits or
the loss is well above the tolerance), so a dropped adapter cannot pass.

  peft_roundtrip.py --bin build/bin --work build/test/peft-roundtrip
"""

import argparse
import os
import shutil
import sys

import train_common as tc

ALL7 = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LOGITS_B, LOGITS_T = 2, 16


def recipe(**kw):
    r = tc.recipe_defaults()
    r.update(dict(max_steps=5, learning_rate=1e-2, save_steps=0))
    r.update(kw)
    return r


def peft_written_adapter(base, r, out_dir, seed):
    """A PEFT model for recipe r with seeded non-zero lora_B, saved to
    out_dir; returns the model (eval mode)."""
    import torch

    pm = tc.make_peft(base, r, init_seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in sorted(pm.named_parameters()):
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    pm.save_pretrained(out_dir)
    return pm.eval()


def logits_of(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits.double().numpy()


def tailor_logits(bin_dir, onnx_path, adapter, ids, work, threads):
    """(logits, None) from `tailor compile --adapter` + tailor-run, or
    (None, error)."""
    import numpy as np

    plan = os.path.join(work, "infer.tplan")
    log = os.path.join(work, "tailor.log")
    ok, msg = tc.run([os.path.join(bin_dir, "tailor"), "compile", onnx_path,
                      "--adapter", adapter, "--batch", str(ids.shape[0]),
                      "--seq", str(ids.shape[1]), "-o", plan], 900, log)
    if not ok:
        return None, "compile --adapter: " + msg
    ids_path = os.path.join(work, "input_ids.npy")
    out_path = os.path.join(work, "logits.npy")
    np.save(ids_path, ids.numpy())
    ok, msg = tc.run([os.path.join(bin_dir, "tailor-run"), plan, "--input",
                      f"input_ids={ids_path}", "--output", f"logits={out_path}",
                      "--threads", str(threads)], 900, log)
    if not ok:
        return None, msg
    return np.load(out_path).astype(np.float64), None


def check_logits(got, ref, base_ref, tol):
    """(line, problems) for tailor's logits against PEFT's."""
    import numpy as np

    scale = float(np.abs(ref).max())
    effect = float(np.abs(ref - base_ref).max())
    problems = []
    if got.shape != ref.shape:
        return f"shape {list(got.shape)}, expected {list(ref.shape)}", ["logits shape"]
    err = float(np.abs(got - ref).max())
    if not err <= tol * scale:
        problems.append(f"max|tailor - PEFT| {err:.2e} > {tol:g} * {scale:.3g}")
    if not effect > 10 * tol * scale:
        problems.append(f"adapter changes the logits by only {effect:.2e} (vacuous)")
    return (f"max|tailor - PEFT| {err:.2e} (logits scale {scale:.3g}, "
            f"adapter effect {effect:.2e})"), problems


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor and tailor-run (default %(default)s)")
    ap.add_argument("--work", required=True, help="scratch directory (recreated)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-only", action="store_true",
                    help="run the PEFT halves only (no tailor)")
    args = ap.parse_args()
    import numpy as np
    import torch
    from peft import PeftModel

    torch.set_num_threads(args.threads)
    if not args.torch_only:
        ok, why = tc.tailor_available(args.bin)
        if not ok:
            print(f"error: {why}", file=sys.stderr)
            print("summary: 0 PEFT round-trip cases run (tailor lacks training support)")
            return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, info = tc.build_and_export(onnx_path)
    print(f"model: tiny Llama, {info['params']:,} parameters, attn "
          f"{info['attn_implementation']}, {onnx_path}")
    rows = tc.make_rows()
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    ids = torch.randint(0, 256, (LOGITS_B, LOGITS_T),
                        generator=torch.Generator().manual_seed(99))
    base_logits = logits_of(base, ids)
    results = []  # (name, ok, line)

    def report(name, line, problems):
        results.append((name, not problems))
        print(f"{'ok  ' if not problems else 'FAIL'} {name:<9} {line}")
        for p in problems:
            print(f"       {p}")

    # (b) first: its PEFT-written adapter is also a-peft's input.
    b_cases = [
        ("b-qv", recipe(learning_rate=0.0, max_steps=1)),
        ("b-all7", recipe(learning_rate=0.0, max_steps=1, lora_r=4,
                          lora_target_modules=ALL7, use_rslora=True)),
    ]
    peft_dirs = {}
    for i, (name, r) in enumerate(b_cases):
        work = os.path.join(args.work, name)
        os.makedirs(work)
        adapter_dir = os.path.join(work, "peft_adapter")
        pm = peft_written_adapter(base, r, adapter_dir, seed=100 + i)
        peft_dirs[name] = (adapter_dir, pm)
        mb_ids, mb_labels = tc.micro_batch(rows, 0, r["micro_batch_size"])
        ref = tc.causal_lm_loss(pm, mb_ids, mb_labels)
        base_loss = tc.causal_lm_loss(base, mb_ids, mb_labels)
        problems = []
        if not tc.rel_err(base_loss, ref) > 3 * args.tol:
            problems.append(f"the adapter changes the loss only from {base_loss:.6f} "
                            f"to {ref:.6f} (vacuous)")
        if args.torch_only:
            report(name, f"PEFT loss {ref:.6f} (base model {base_loss:.6f})", problems)
            continue
        out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                           init_adapter=adapter_dir,
                                           threads=args.threads)
        if err:
            report(name, "", [err] + problems)
            continue
        try:
            loss = float(tc.read_metrics(out)[1]["loss"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            report(name, "", [f"no step-1 loss in metrics.jsonl: {e}"] + problems)
            continue
        e = tc.rel_err(loss, ref)
        if not e <= args.tol:
            problems.append(f"first loss {loss:.7f} vs PEFT {ref:.7f} (rel {e:.2e})")
        path = os.path.join(out, "adapter_model.safetensors")
        if os.path.exists(path):
            worst, wname, probs = tc.compare_tensors(tc.load_safetensors(path),
                                                     tc.peft_tensors(pm), 1e-6)
            problems += [f"adapter written back with lr 0 changed: {p}" for p in probs[:4]]
        else:
            problems.append("no adapter_model.safetensors in the output dir")
        report(name, f"first loss tailor {loss:.7f}, PEFT {ref:.7f} (rel {e:.1e}; "
               f"base model {base_loss:.5f})", problems)

    # (a) tailor-trained adapters, and a PEFT-written one, through tailor's
    # inference plan and PEFT.
    a_cases = [
        ("a-all7", recipe(lora_r=4, lora_alpha=8, lora_target_modules=ALL7)),
        ("a-rslora", recipe(lora_layers=[1], use_rslora=True)),
        ("a-peft", None),
    ]
    for name, r in a_cases:
        work = os.path.join(args.work, name)
        os.makedirs(work)
        if r is None:
            adapter_dir, pm = peft_dirs["b-qv"]
            ref = logits_of(pm, ids)
        elif args.torch_only:
            print(f"skip {name:<9} (needs a tailor-trained adapter)")
            continue
        else:
            out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                               threads=args.threads)
            if err:
                report(name, "", [err])
                continue
            adapter_dir = out
            config_problems = tc.check_adapter_config(out, r)
            if config_problems:
                report(name, "", config_problems)
                continue
            try:
                pm = PeftModel.from_pretrained(tc.fresh_copy(base), out).eval()
            except Exception as e:  # noqa: BLE001
                report(name, "", [f"PEFT cannot load tailor's adapter: "
                                  f"{type(e).__name__}: {str(e)[:300]}"])
                continue
            ref = logits_of(pm, ids)
        if args.torch_only:
            effect = float(np.abs(ref - base_logits).max())
            print(f"ok   {name:<9} PEFT logits scale {np.abs(ref).max():.3g}, "
                  f"adapter effect {effect:.2e} (tailor not run)")
            results.append((name, True))
            continue
        got, err = tailor_logits(args.bin, onnx_path, adapter_dir, ids, work,
                                 args.threads)
        if err:
            report(name, "", [err])
            continue
        line, problems = check_logits(got, ref, base_logits, args.tol)
        report(name, line, problems)

    n = len(results)
    good = sum(ok for _, ok in results)
    what = "PEFT halves done (tailor not run)" if args.torch_only else \
        f"PEFT round-trip cases match (tol {args.tol:g})"
    print(f"summary: {good}/{n} {what}")
    return 0 if good == n else 1


if __name__ == "__main__":
    sys.exit(main())
