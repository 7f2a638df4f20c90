#!/usr/bin/env python3
"""End-to-end training numerics: `tailor train` against PyTorch + PEFT.

Builds the seeded tiny models of train_common (hidden 64, 2 layers, 4 heads,
vocab 256, fp32: a Llama, and for the other-architecture cases a GPT-2 and a
Qwen2), exports each to ONNX, writes a seeded JSONL
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
    OUT/checkpoint-10 when tailor wrote it. For full fine-tuning the
    checkpoint must hold HF names in HF layout (GPT-2's Conv1D weights are
    [in, out]; a tensor written transposed is a failure, its values still
    compared transposed back); names that are ONNX initializers
    (onnx::MatMul_N) are mapped to their parameter by value and listed; a
    tensor HF ties (GPT-2's lm_head.weight IS transformer.wte.weight) is
    compared once, and a second copy in the checkpoint must equal it. Key
    biases (GPT-2's c_attn.bias middle third) have a zero gradient in exact
    arithmetic, so AdamW moves them by rounding noise only: they are left
    out of the 1e-4 comparison and must instead stay within 1e-3 of max|ref|
    of their initial values on both sides;
  - that training moved the reference weights well beyond the tolerance (a
    test that moves nothing proves nothing).

Cases (--mode): lora (AdamW, constant LR, 20 steps; plus lora-accum:
gradient_accumulation_steps 2, max_grad_norm 0.33 (clips most steps, not
all), cosine schedule with 3 warmup steps, 10 steps; plus lora-sgd: SGD with momentum 0.9 and a linear
schedule with 2 warmup steps), full (every parameter, AdamW), lora-fa, all
on the Llama; gpt2-full (every GPT-2 parameter, plain torch AdamW),
gpt2-lora (LoRA on c_attn: PEFT sets fan_in_fan_out for Conv1D, the
adapter's B(A x) is the same) and qwen2-lora (LoRA on q_proj, v_proj);
`--mode all` (the default) runs them all. Weight decay is 0.01 on every
trainable tensor (plain torch AdamW semantics, no exclusions).

qwen2-dynamo-merged (not a training case) exports the tiny Qwen2 with
dynamo (opset 18) as HF initializes it, without export_hf's perturbation of
equal-valued weights (norm weights all 1, biases all 0): the exporter
merges equal initializers into one, read by several modules, and full
fine-tuning would train each merged tensor with the sum of its readers'
gradients under one name. `tailor compile` with the full recipe must exit 1
naming every merged group -- each group of equal HF parameters as one
`@NAME read by MODULE...` line whose modules (the first four, then "and N
more") are exactly the group's -- and write no plan; the same export with
the LoRA recipe (the merged weights stay frozen) and the perturbed export
(qwen2@dynamo) with the full recipe must compile.

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
# Elements whose gradient is zero in exact arithmetic (key biases; see
# train_common.zero_gradient_slices) may move by rounding noise only.
ZERO_GRAD_BOUND = 1e-3


MODES = ["all", "lora", "full", "lora-fa", "gpt2-full", "gpt2-lora",
         "qwen2-lora", "qlora", "gemma2-lora", "mistral-window-lora",
         "bloom-lora", "bloom-dynamo-full", "qwen2-dynamo-merged"]
# Not training cases: checked apart from cases().
CHECKS = {"qwen2-dynamo-merged"}


def cases(mode):
    """[(name, model family, recipe overrides)] for --mode."""
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
    llama = {"lora": lora, "full": full, "lora-fa": fa}
    by_mode = {k: [(n, "llama", o) for n, o in v] for k, v in llama.items()}
    # Other architectures the importer raises: GPT-2 (LayerNorm with bias,
    # GELU-tanh, Conv1D layers with bias stored [in, out], learned position
    # embeddings, lm_head tied to wte) and Qwen2 (q/k/v with bias).
    by_mode["gpt2-full"] = [("gpt2-full", "gpt2", dict(adapter="full"))]
    by_mode["gpt2-lora"] = [("gpt2-lora", "gpt2",
                             dict(lora_target_modules=["c_attn"]))]
    by_mode["qwen2-lora"] = [("qwen2-lora", "qwen2", {})]
    # Attention variants: Gemma-2 (soft-capped scores, a sliding window of 4
    # on alternate layers, soft-capped logits, scaled queries) and Mistral
    # with a sliding window of 4, both shorter than the 16-token sequences.
    by_mode["gemma2-lora"] = [("gemma2-lora", "gemma2", {})]
    by_mode["mistral-window-lora"] = [("mistral-window-lora", "mistral-window",
                                       {})]
    # BLOOM: ALiBi (raised as tg.attention's alibi_slopes, so the backward
    # runs through the ALiBi attention kernels), LoRA on the fused
    # query_key_value.
    by_mode["bloom-lora"] = [("bloom-lora", "bloom",
                              dict(lora_target_modules=["query_key_value"]))]
    # BLOOM exported by dynamo (opset 18): its ALiBi is slopes (folded into
    # an initializer) times the key positions at run time, an attention
    # bias; full fine-tuning must leave the slopes frozen (a module buffer,
    # not a weight) and train every real parameter.
    by_mode["bloom-dynamo-full"] = [("bloom-dynamo-full", "bloom@dynamo",
                                     dict(adapter="full"))]
    # QLoRA: NF4 with double quantization of every frozen linear weight but
    # lm_head, LoRA r=8 on all linear layers. The reference is PEFT on the
    # model whose linear weights are bitsandbytes' own dequantization of
    # its NF4 codes; tailor quantizes the exported float weights itself
    # when it binds them and computes on the codes.
    by_mode["qlora"] = [("qlora", "llama",
                         dict(adapter="qlora", lora_target_modules=["all-linear"],
                              double_quant=True))]
    if mode == "all":
        return [c for k in MODES[1:] if k not in CHECKS for c in by_mode[k]]
    return by_mode.get(mode, [])


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


def describe(name, family, r):
    if r["adapter"] == "full":
        what = "full fine-tuning"
    else:
        what = (f"{r['adapter']} r={r['lora_r']} alpha={r['lora_alpha']} "
                f"[{', '.join(r['lora_target_modules'])}]")
    opt = r["optimizer"] + (f" momentum {r['momentum']}" if r["optimizer"] == "sgd" else "")
    return (f"case {name}: {family}, {what}, {opt} lr {r['learning_rate']:g} wd "
            f"{r['weight_decay']:g} {r['lr_scheduler']} (warmup "
            f"{r['warmup_steps']}), accum {r['gradient_accumulation_steps']}, "
            f"max_grad_norm {r['max_grad_norm']:g}, {r['max_steps']} steps of "
            f"B={r['micro_batch_size']} T={r['sequence_len']}")


def untied_grad_norm(base, rows, r, aliases):
    """The step-1 gradient norm the reference would have with every tied
    tensor (info["aliases"], e.g. GPT-2's lm_head.weight) an independent
    copy: a diagnostic, to tell a tie trained as two tensors from other
    gradient errors. None without ties or with accumulation."""
    import torch

    if not aliases or r["gradient_accumulation_steps"] != 1:
        return None
    model = tc.fresh_copy(base)
    for alias in aliases:
        mod_name, _, attr = alias.rpartition(".")
        mod = model.get_submodule(mod_name)
        setattr(mod, attr, torch.nn.Parameter(getattr(mod, attr).detach().clone()))
    if hasattr(model.config, "tie_word_embeddings"):
        model.config.tie_word_embeddings = False
    ids, labels = tc.micro_batch(rows, 0, r["micro_batch_size"])
    model(input_ids=ids, labels=labels, use_cache=False).loss.backward()
    return float(torch.linalg.vector_norm(torch.stack(
        [torch.linalg.vector_norm(p.grad.double()) for p in model.parameters()
         if p.grad is not None])))


def torch_reference(base, rows, r, work, aliases=None):
    """Trains the PyTorch reference; returns dict(records, init, final,
    snaps, init_adapter, untied_grad_norm (full fine-tuning of a model with
    tied tensors: see untied_grad_norm))."""
    if r["adapter"] == "full":
        model = tc.fresh_copy(base)
        snapshot = lambda m: {k: v.detach().numpy().copy()  # noqa: E731
                              for k, v in m.named_parameters()}
        init = snapshot(model)
        init_dir = None
    else:
        if r["adapter"] == "qlora":
            base, count, worst = tc.bnb_nf4_dequantized(base)
            print(f"  reference: {count} linear weights replaced by bitsandbytes' "
                  f"NF4 (double quant) round trip, max|W - dequant(W)| = {worst:.3g}")
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
    untied = untied_grad_norm(base, rows, r, aliases) if r["adapter"] == "full" else None
    return dict(records=records, init=init, final=snapshot(model), snaps=snaps,
                init_adapter=init_dir, untied_grad_norm=untied)


def compare_run(name, r, ref, out, info):
    """Prints the per-step table and the weight comparison; returns problems."""
    problems = []
    try:
        metrics = tc.read_metrics(out)
    except (OSError, ValueError, KeyError) as e:
        return [f"cannot read metrics.jsonl: {e}"]
    print(f"  {'step':>4} {'loss torch':>12} {'loss tailor':>12} {'rel err':>9} "
          f"{'lr torch':>10} {'lr tailor':>10} {'gnorm torch':>11} {'gnorm tailor':>12}")
    worst_loss = 0.0
    bad = {"loss": [], "grad_norm": []}  # (step, got, ref, rel err)
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
            bad["loss"].append((s, loss, rec["loss"], e))
        lr = m.get("lr")
        if lr is None or not tc.rel_err(float(lr), rec["lr"]) <= LR_TOL:
            problems.append(f"step {s}: lr {lr} vs {rec['lr']:.8g}")
            flag += "  <-- lr"
        gn = m.get("grad_norm")
        gn_text = "-"
        if gn is not None:
            gn_text = f"{float(gn):.5g}"
            ge = tc.rel_err(float(gn), rec["grad_norm"])
            if not ge <= GNORM_TOL:
                bad["grad_norm"].append((s, gn, rec["grad_norm"], ge))
                flag += "  <-- grad_norm"
        print(f"  {s:>4} {rec['loss']:>12.7f} {float(loss):>12.7f} {e:>9.1e} "
              f"{rec['lr']:>10.4g} {float(lr) if lr is not None else float('nan'):>10.4g} "
              f"{rec['grad_norm']:>11.5g} {gn_text:>12}{flag}")
    # Per-step mismatches: each one when few, else one line saying where they
    # start and how large they get (so weight problems still show).
    for key, tol in (("loss", LOSS_TOL), ("grad_norm", GNORM_TOL)):
        rows = bad[key]
        if len(rows) <= 3:
            problems += [f"step {s}: {key} {g} vs {w:.7g} (rel {e:.2e})"
                         for s, g, w, e in rows]
        else:
            first, worst = rows[0], max(rows, key=lambda x: x[3])
            problems.append(
                f"{key} off (rel > {tol:g}) at {len(rows)} of "
                f"{len(ref['records'])} steps: first step {first[0]} ({first[1]} vs "
                f"{first[2]:.7g}, rel {first[3]:.2e}), worst step {worst[0]} "
                f"({worst[1]} vs {worst[2]:.7g}, rel {worst[3]:.2e})")
    untied = ref.get("untied_grad_norm")
    gn1 = (metrics.get(1) or {}).get("grad_norm")
    if (untied is not None and gn1 is not None and bad["grad_norm"]
            and bad["grad_norm"][0][0] == 1
            and tc.rel_err(float(gn1), untied) <= GNORM_TOL):
        problems.append(
            f"step 1: tailor's grad_norm {gn1} is the norm with the tied "
            f"{', '.join(f'{a} / {c}' for a, c in info['aliases'].items())} as "
            f"separate tensors ({untied:.7g}, rel {tc.rel_err(float(gn1), untied):.1e}), "
            f"not the tied one ({ref['records'][0]['grad_norm']:.7g}): the tie is "
            "trained as two tensors")
    extra = sorted(set(metrics) - {rec["step"] for rec in ref["records"]})
    if extra:
        problems.append(f"metrics.jsonl has unexpected steps {extra[:5]}")

    fname = "model.safetensors" if r["adapter"] == "full" else "adapter_model.safetensors"
    what = "model" if r["adapter"] == "full" else "adapter"
    path = os.path.join(out, fname)
    full = r["adapter"] == "full"

    first_layout = []

    def load(path, ref_tensors, label):
        """The checkpoint at `path`, under HF names and layout for full
        fine-tuning (tc.full_checkpoint_to_hf); its problems go to
        `problems` prefixed with `label` (layout problems once: a later
        checkpoint with the same ones says so in one line)."""
        got = tc.load_safetensors(path)
        if not full:
            return got
        got, notes, layout, probs = tc.full_checkpoint_to_hf(got, ref_tensors, info,
                                                             WEIGHT_TOL)
        if notes:
            print(f"  {label}: mapped to Hugging Face names by the ONNX "
                  f"initializers: {', '.join(notes)}")
        names = [n for n, _ in layout]
        if layout and first_layout and names == first_layout[0][1]:
            problems.append(f"{label}: the same {len(layout)} tensors in the wrong "
                            f"layout as the {first_layout[0][0]}")
        else:
            problems.extend(f"{label}: {m}" for _, m in layout)
            if layout and not first_layout:
                first_layout.append((label, names))
        problems.extend(f"{label}: {p}" for p in probs)
        return got

    # Full fine-tuning trains the key biases (if any), whose gradient is
    # zero but for rounding: left out of the 1e-4 comparison, they must
    # merely stay put on both sides.
    zero = info.get("zero_grad", {}) if full else {}
    skip = {n: idx for n, (idx, _) in zero.items()}

    def check_zero(got, ref_tensors, label):
        lines, probs = tc.check_zero_gradient(got, ref_tensors, ref["init"], zero,
                                              ZERO_GRAD_BOUND)
        if lines:
            print(f"  {label}, zero-gradient elements (bound {ZERO_GRAD_BOUND:g}): "
                  + "; ".join(lines))
        problems.extend(f"{label}: {p}" for p in probs)

    if not os.path.exists(path):
        problems.append(f"no {fname} in the output dir")
    else:
        got = load(path, ref["final"], f"final {what}")
        check_zero(got, ref["final"], f"final {what}")
        worst, wname, probs = tc.compare_tensors(got, ref["final"], WEIGHT_TOL, skip)
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
        got = load(ck, snap, f"checkpoint-{step}")
        check_zero(got, snap, f"checkpoint-{step}")
        worst, wname, probs = tc.compare_tensors(got, snap, WEIGHT_TOL, skip)
        problems += [f"checkpoint-{step}: {p}" for p in probs[:4]]
        print(f"  checkpoint-{step} {what}: worst max|diff|/max|ref| {worst:.2e} ({wname})")
    print(f"  worst loss rel err {worst_loss:.2e}")
    return problems


def export_unperturbed(onnx_path, family):
    """export_hf's seeded tiny `family` model as HF initializes it (equal
    norm weights and biases left equal), exported by dynamo at opset 18.
    Returns the HF model."""
    import torch

    import export_hf

    os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
    torch.manual_seed(0)
    model, _ = export_hf._build_model(family)
    example = torch.randint(0, 256, (2, 8),
                            generator=torch.Generator().manual_seed(0))
    wrapped = export_hf._logits_wrapper(model)
    with torch.no_grad():
        export_hf._export_dynamo(wrapped, example, 18, onnx_path,
                                 external_data=False)
    return model


def merged_groups(model, onnx_path):
    """[(kept initializer, [HF parameter names])]: the groups of two or more
    parameters of `model` with identical contents, which the exporter kept as
    one initializer (named after one of them)."""
    import onnx

    kept = {t.name for t in onnx.load(onnx_path).graph.initializer}
    groups = {}
    for name, p in model.named_parameters():
        a = p.detach().numpy()
        groups.setdefault((a.shape, a.tobytes()), []).append(name)
    out = []
    for names in groups.values():
        if len(names) > 1:
            out.append((next((n for n in names if n in kept), None), names))
    return out


def check_merged_message(stderr, groups):
    """Problems with the refusal's list of merged parameters: one line
    `@NAME read by M1 M2 M3 M4 [and N more]` per group, naming a member
    and exactly the group's modules."""
    import re

    problems = []
    lines = {m.group(1): m.group(2).split()
             for m in re.finditer(r"^ *@(\S+) read by (.*)$", stderr, re.M)}
    for kept, names in groups:
        modules = {n.rpartition(".")[0] for n in names}
        if kept is None:
            problems.append(f"no initializer of the export holds {names}")
            continue
        readers = lines.pop(kept, None)
        if readers is None:
            problems.append(f"the error does not name @{kept} (merged with "
                            f"{', '.join(n for n in names if n != kept)})")
            continue
        more = 0
        if len(readers) >= 3 and readers[-3] == "and" and readers[-1] == "more":
            more, readers = int(readers[-2]), readers[:-3]
        if not set(readers) <= modules or len(set(readers)) + more != len(modules):
            problems.append(f"@{kept}: readers {readers} and {more} more, "
                            f"expected the modules {sorted(modules)}")
    problems += [f"the error names @{k}, which is not merged" for k in lines]
    return problems


def merged_initializers(args, perturbed_onnx):
    """The qwen2-dynamo-merged check (see the module docstring); returns
    problems. `perturbed_onnx`: the perturbed export of the same model."""
    import subprocess

    work = os.path.join(args.work, "qwen2-dynamo-merged")
    onnx_path = os.path.join(work, "model.onnx")
    model = export_unperturbed(onnx_path, "qwen2")
    groups = merged_groups(model, onnx_path)
    print("case qwen2-dynamo-merged: the unperturbed Qwen2 exported by dynamo "
          f"keeps {len(groups)} initializers for "
          f"{sum(len(n) for _, n in groups)} equal parameters: " +
          "; ".join(f"{k} ({len(n)})" for k, n in groups))
    if not any(len(names) > 2 for _, names in groups):
        return ["the export merged no group of more than two parameters "
                "(the case tests nothing)"]
    tailor = os.path.join(args.bin, "tailor")
    recipe_path = os.path.join(work, "full.yaml")
    tc.write_recipe(recipe_for(dict(adapter="full")), recipe_path)
    plan = os.path.join(work, "full.tplan")
    proc = subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe_path,
                           "--hardware", "cpu", "-o", plan],
                          capture_output=True, text=True, timeout=900)
    problems = []
    if proc.returncode != 1:
        problems.append(f"tailor compile of full fine-tuning exited "
                        f"{proc.returncode}, expected 1")
    if os.path.exists(plan):
        problems.append(f"the refused compile wrote {plan}")
    problems += check_merged_message(proc.stderr, groups)
    print("  full fine-tuning refused, naming:")
    for line in proc.stderr.splitlines():
        if " read by " in line:
            print(f"    {line.strip()}")
    accepted = [("the unperturbed export, lora", onnx_path, recipe_for({})),
                ("the perturbed export, full", perturbed_onnx,
                 recipe_for(dict(adapter="full")))]
    for i, (what, path, r) in enumerate(accepted):
        _, err = tc.compile_plan(args.bin, path, r,
                                 os.path.join(work, f"accept-{i}"), "cpu")
        if err:
            problems.append(f"{what}: {err}")
        else:
            print(f"  compiled {what}")
    return problems


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor (default %(default)s)")
    ap.add_argument("--work", required=True, help="scratch directory (recreated)")
    ap.add_argument("--mode", default="all", choices=MODES)
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
    models = {}

    def model_for(family):
        """(hf model, info, onnx path) of `family`, exported on first use
        (the Llama to WORK/model.onnx, others to WORK/model-FAMILY.onnx)."""
        if family not in models:
            # FAMILY@dynamo: exported by the dynamo exporter at opset 18.
            name, _, exporter = family.partition("@")
            onnx_path = os.path.join(
                args.work, "model.onnx" if family == "llama"
                else f"model-{family.replace('@', '-')}.onnx")
            base, info = tc.build_and_export(onnx_path, family=name,
                                             exporter=exporter or "torchscript")
            tied = "".join(f"; {n} is a tied copy of {h} (transposed)"
                           for n, h in info["tied_copies"])
            print(f"model: tiny {info['model_class']}, {info['params']:,} parameters, "
                  f"attn {info['attn_implementation']}, exported to {onnx_path} "
                  f"(opset {18 if '@dynamo' in family else tc.OPSET}); "
                  f"{info['weights_checked']} of its parameters "
                  f"found bit-identical among the initializers" +
                  (f", NOT found: {', '.join(info['weights_unmatched'])}"
                   if info["weights_unmatched"] else "") + tied)
            models[family] = (base, info, onnx_path)
        return models[family]

    rows = tc.make_rows()
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    n_lab = sum("labels" in r for r in rows)
    print(f"data: {data}: {len(rows)} rows of {tc.T} tokens, {n_lab} with labels "
          f"({sum(x == -100 for r in rows for x in r.get('labels', []))} of them -100)")

    failures, todo = [], cases(args.mode)
    for name, family, overrides in todo:
        base, info, onnx_path = model_for(family)
        r = recipe_for(overrides)
        work = os.path.join(args.work, name)
        os.makedirs(work)
        print(describe(name, family, r))
        ref = torch_reference(base, rows, r, work, info.get("aliases"))
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
                problems += compare_run(name, r, ref, out, info)
        if problems:
            failures.append(name)
            print(f"  FAIL {name}:")
            for p in problems[:24]:
                print(f"    {p}")
        else:
            print(f"  ok   {name} (weights moved {moved:.2g} from init)")
    n = len(todo)
    merged = ""
    if args.mode in ("all", "qwen2-dynamo-merged") and not args.torch_only:
        problems = merged_initializers(args, model_for("qwen2@dynamo")[2])
        if problems:
            failures.append("qwen2-dynamo-merged")
            print("  FAIL qwen2-dynamo-merged:")
            for p in problems[:24]:
                print(f"    {p}")
        else:
            print("  ok   qwen2-dynamo-merged")
        merged = ("; merged initializers " +
                  ("NOT refused as expected" if problems else "refused as expected"))
    if args.torch_only:
        print(f"summary: {n - len(failures)}/{n} PyTorch reference runs done "
              "(tailor not run)")
    else:
        bad = len([f for f in failures if f not in CHECKS])
        print(f"summary: {n - bad}/{n} training cases match PyTorch/PEFT "
              f"(loss rel {LOSS_TOL:g}, weights max|diff|/max|ref| {WEIGHT_TOL:g})"
              + merged + (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
