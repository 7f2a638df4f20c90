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

(c) tailor -> transformers. A model saved with save_pretrained (a fresh
    seeded one, built from its config) and exported to ONNX beside its
    config.json; a recipe with no `base_model`. Full fine-tuning (AdamW lr
    1e-2, 6 steps, a checkpoint at step 5) must write OUT and
    OUT/checkpoint-5 that AutoModelForCausalLM.from_pretrained loads:
    config.json copied from the model's directory, which the plan names as
    its base model; no missing, unexpected or mismatched keys; every tensor
    of the loaded state dict bit-identical to what tailor wrote (a tied
    lm_head to its embedding); and checkpoint-5 loaded so gives the
    causal-LM loss of micro-batch 6 that tailor reported for step 6 (the
    forward of those same weights) within --tol relative.
      c-full:      the Llama (untied lm_head)
      c-full-gpt2: GPT-2 (lm_head tied to wte, Conv1D weights [in, out])
    A LoRA run on the Llama saved so writes base_model_name_or_path = its
    directory, so AutoPeftModelForCausalLM.from_pretrained(OUT) finds base
    and adapter alone (the logits of PeftModel on the exported model):
      c-lora:      q_proj, v_proj, r=8, 2 steps

(d) tailor -> PEFT and `tailor generate` on GPT-2, whose Conv1D layers
    store their weights [in, out]. A LoRA run (c_attn, and c_proj: the
    attention's square [64, 64] and the MLP's [128, 64]; r=4, alpha 8, 5
    steps) writes fan_in_fan_out true, as PEFT does for Conv1D. A generation
    plan of the same model (`--task generate`) with the adapter merged at
    load (`tailor generate --adapter OUT`) and with it bound at compile time
    (`--task generate --adapter OUT`) gives PEFT's greedy ids on two prompts
    and, through tailor.Generator, its logits after the longer one within
    --tol * their scale. The adapter with fan_in_fan_out set to false
    (wrong for Conv1D, and not visible in the square weights' shapes) still
    merges as the weights' layout requires: the same logits, and a warning
    naming the flag (PEFT, loading it, warns and does the same).
      d-gpt2:      c_attn, c_proj on GPT-2

Every case also checks that the adapter matters (its effect on the logits or
the loss is well above the tolerance), so a dropped adapter cannot pass.

  peft_roundtrip.py --bin build/bin --work build/test/peft-roundtrip
"""

import argparse
import json
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


def full_recipe(**kw):
    """A full fine-tuning recipe: recipe() without the LoRA keys."""
    r = recipe(adapter="full", **kw)
    for k in [k for k in r if k.startswith("lora_") or k == "use_rslora"]:
        del r[k]
    r.pop("momentum")
    return r


def saved_hf_model(work, family):
    """export_hf's seeded tiny `family` model saved with save_pretrained in
    WORK/hf and exported to WORK/hf/model.onnx beside its config.json.
    Returns (hf directory, model, export info)."""
    hf_dir = os.path.join(work, "hf")
    base, info = tc.build_and_export(os.path.join(hf_dir, "model.onnx"),
                                     family=family)
    base.save_pretrained(hf_dir)
    return hf_dir, base, info


def plan_base_model(bin_dir, work, hf_dir):
    """Problems with the base model WORK/plan.tplan records: hf_dir."""
    got = tc.inspect_json(bin_dir, os.path.join(work, "plan.tplan")) \
        .get("training", {}).get("base_model")
    if got != os.path.abspath(hf_dir):
        return [f"the plan's base_model is {got!r}, expected the model's "
                f"directory {os.path.abspath(hf_dir)!r} (config.json beside "
                "model.onnx)"]
    return []


def check_pretrained_dir(path, hf_dir, aliases):
    """(model or None, problems): DIR loaded with
    AutoModelForCausalLM.from_pretrained, its config.json a copy of
    hf_dir's, no missing, unexpected or mismatched keys, and every tensor of
    its state dict bit-identical to DIR/model.safetensors (under its tie
    target for the names in `aliases`)."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    label = os.path.basename(path.rstrip("/"))
    config = os.path.join(path, "config.json")
    if not os.path.exists(config):
        return None, [f"{label}: no config.json (from_pretrained cannot load "
                      "a full fine-tune without one)"]
    problems = []
    if open(config, "rb").read() != \
            open(os.path.join(hf_dir, "config.json"), "rb").read():
        problems.append(f"{label}: config.json differs from the base model's")
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(
            path, output_loading_info=True)
    except Exception as e:  # noqa: BLE001
        return None, problems + [f"{label}: from_pretrained failed: "
                                 f"{type(e).__name__}: {str(e)[:300]}"]
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys",
                "error_msgs"):
        if loading.get(key):
            problems.append(f"{label}: from_pretrained {key}: "
                            f"{sorted(map(str, loading[key]))[:6]}")
    written = tc.load_safetensors(os.path.join(path, "model.safetensors"))
    for name, tensor in model.state_dict().items():
        source = name if name in written else aliases.get(name)
        if source not in written:
            problems.append(f"{label}: {name} is not in model.safetensors")
        elif not np.array_equal(tensor.numpy(), written[source]):
            problems.append(f"{label}: loaded {name} differs from "
                            f"model.safetensors' {source}")
    return model.eval(), problems


def full_finetune_case(name, family, args, rows, data):
    """(c) for `family`: (line, problems)."""
    work = os.path.join(args.work, name)
    os.makedirs(work)
    hf_dir, base, info = saved_hf_model(work, family)
    r = full_recipe(max_steps=6, save_steps=5)
    out, err = tc.tailor_compile_train(args.bin, os.path.join(hf_dir, "model.onnx"),
                                       r, work, data, threads=args.threads)
    if err:
        return "", [err]
    problems = plan_base_model(args.bin, work, hf_dir)
    _, probs = check_pretrained_dir(out, hf_dir, info["aliases"])
    problems += probs
    ck, probs = check_pretrained_dir(os.path.join(out, "checkpoint-5"), hf_dir,
                                     info["aliases"])
    problems += probs
    if ck is None:
        return "", problems
    # Step 6's loss is tailor's forward of the weights after step 5.
    ids, labels = tc.micro_batch(rows, 5, r["micro_batch_size"])
    ref = tc.causal_lm_loss(ck, ids, labels)
    base_loss = tc.causal_lm_loss(base, ids, labels)
    try:
        loss = float(tc.read_metrics(out)[6]["loss"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return "", problems + [f"no step-6 loss in metrics.jsonl: {e}"]
    e = tc.rel_err(loss, ref)
    if not e <= args.tol:
        problems.append(f"tailor's step-6 loss {loss:.7f} vs from_pretrained("
                        f"checkpoint-5)'s {ref:.7f} (rel {e:.2e})")
    if not tc.rel_err(base_loss, ref) > 10 * args.tol:
        problems.append(f"5 steps moved the loss only from {base_loss:.6f} to "
                        f"{ref:.6f} (vacuous)")
    return (f"from_pretrained(checkpoint-5) loss {ref:.7f}, tailor step 6 "
            f"{loss:.7f} (rel {e:.1e}; base model {base_loss:.5f})"), problems


def lora_base_case(args, rows, data, ids):
    """(c) c-lora: (line, problems)."""
    import numpy as np
    from peft import AutoPeftModelForCausalLM, PeftModel

    work = os.path.join(args.work, "c-lora")
    os.makedirs(work)
    hf_dir, base, _ = saved_hf_model(work, "llama")
    r = recipe(max_steps=2)
    out, err = tc.tailor_compile_train(args.bin, os.path.join(hf_dir, "model.onnx"),
                                       r, work, data, threads=args.threads)
    if err:
        return "", [err]
    problems = plan_base_model(args.bin, work, hf_dir) + \
        tc.check_adapter_config(out, r)
    config = json.load(open(os.path.join(out, "adapter_config.json")))
    if config.get("base_model_name_or_path") != os.path.abspath(hf_dir):
        problems.append(f"base_model_name_or_path "
                        f"{config.get('base_model_name_or_path')!r}, expected "
                        f"{os.path.abspath(hf_dir)!r}")
        return "", problems
    try:
        auto = AutoPeftModelForCausalLM.from_pretrained(out).eval()
    except Exception as e:  # noqa: BLE001
        return "", problems + [f"AutoPeftModelForCausalLM cannot load OUT: "
                               f"{type(e).__name__}: {str(e)[:300]}"]
    got = logits_of(auto, ids)
    ref = logits_of(PeftModel.from_pretrained(tc.fresh_copy(base), out).eval(), ids)
    line, probs = check_logits(got, ref, logits_of(base, ids), args.tol)
    return line.replace("tailor - PEFT", "AutoPeft - PeftModel"), problems + probs


def gpt2_generation(args, plan, prompt, flags, new_tokens):
    """(ids, stderr) of `tailor generate --json`; ids None on failure."""
    import subprocess

    proc = subprocess.run(
        [os.path.join(args.bin, "tailor"), "generate", plan, "--prompt-ids",
         ",".join(map(str, prompt)), "--max-new-tokens", str(new_tokens),
         "--json", *flags], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return None, proc.stderr[-800:]
    return json.loads(proc.stdout)["generated_ids"], proc.stderr


def gpt2_lora_case(args, rows, data):
    """(d) d-gpt2: (line, problems)."""
    import numpy as np
    import torch
    from peft import PeftModel

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "python"))
    os.environ.setdefault("TAILOR_RUNTIME_LIBRARY", os.path.join(
        args.bin, "..", "lib", "libtailor_runtime.so"))
    import tailor

    work = os.path.join(args.work, "d-gpt2")
    os.makedirs(work)
    hf_dir, base, _ = saved_hf_model(work, "gpt2")
    onnx_path = os.path.join(hf_dir, "model.onnx")
    r = recipe(lora_r=4, lora_alpha=8, lora_target_modules=["c_attn", "c_proj"])
    out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                       threads=args.threads)
    if err:
        return "", [err]
    problems = tc.check_adapter_config(out, r)
    config = json.load(open(os.path.join(out, "adapter_config.json")))
    if config.get("fan_in_fan_out") is not True:
        problems.append(f"adapter_config fan_in_fan_out = "
                        f"{config.get('fan_in_fan_out')!r}, expected true "
                        "(GPT-2's Conv1D weights are [in, out])")
    flipped = out.rstrip("/") + "-flipped"
    shutil.copytree(out, flipped)
    json.dump(dict(config, fan_in_fan_out=False),
              open(os.path.join(flipped, "adapter_config.json"), "w"))
    try:
        pm = PeftModel.from_pretrained(tc.fresh_copy(base), out).eval()
        pm_flipped = PeftModel.from_pretrained(tc.fresh_copy(base),
                                               flipped).eval()
    except Exception as e:  # noqa: BLE001
        return "", problems + [f"PEFT cannot load tailor's adapter: "
                               f"{type(e).__name__}: {str(e)[:300]}"]

    plans = {"base": os.path.join(work, "generate.tplan"),
             "bound": os.path.join(work, "generate-adapter.tplan")}
    for way, extra in (("base", []), ("bound", ["--adapter", out])):
        ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile",
                          onnx_path, "--task", "generate", "--max-seq-len",
                          "64", *extra, "-o", plans[way]], 900,
                         os.path.join(work, "compile-generate.log"))
        if not ok:
            return "", problems + [f"compile --task generate ({way}): {msg}"]

    gen = np.random.default_rng(5)
    vocab = base.config.vocab_size
    prompts = [[int(x) for x in gen.integers(0, vocab, n)] for n in (5, 12)]
    new_tokens = 12
    eos = base.generation_config.eos_token_id
    changed = 0
    for prompt in prompts:
        with torch.no_grad():
            want = pm.generate(torch.tensor([prompt]), max_new_tokens=new_tokens,
                               do_sample=False, eos_token_id=eos,
                               pad_token_id=eos if eos is not None else 0)
            plain = base.generate(torch.tensor([prompt]),
                                  max_new_tokens=new_tokens, do_sample=False,
                                  eos_token_id=eos,
                                  pad_token_id=eos if eos is not None else 0)
        want = [int(x) for x in want[0, len(prompt):]]
        changed += want != [int(x) for x in plain[0, len(prompt):]]
        for way, plan, flags in (
                ("merged", plans["base"], ["--adapter", out]),
                ("bound", plans["bound"], []),
                ("merged, flag flipped", plans["base"], ["--adapter", flipped])):
            got, stderr = gpt2_generation(args, plan, prompt, flags, new_tokens)
            if got != want:
                problems.append(f"generate ({way}) prompt of {len(prompt)}: "
                                f"tailor {got} != PEFT {want} ({stderr})")
            elif "flipped" in way and not (
                    "warning" in stderr and "fan_in_fan_out false" in stderr):
                problems.append("generate --adapter with fan_in_fan_out false "
                                f"on Conv1D weights gave no warning: {stderr!r}")
    if not changed:
        problems.append("the adapter changes no prompt's greedy ids (vacuous)")

    prompt = prompts[-1]
    with torch.no_grad():
        want = pm(torch.tensor([prompt])).logits[0, -1].double().numpy()
        want_flipped = pm_flipped(torch.tensor([prompt])).logits[0, -1] \
            .double().numpy()
        plain = base(torch.tensor([prompt])).logits[0, -1].double().numpy()
    scale = float(np.abs(want).max())
    if not float(np.abs(want_flipped - want).max()) <= args.tol * scale:
        problems.append("PEFT's logits with fan_in_fan_out false differ from "
                        "true's (PEFT no longer follows the module type?)")
    diffs = {}
    for way, plan, adapter in (("merged", plans["base"], out),
                               ("bound", plans["bound"], None),
                               ("flipped", plans["base"], flipped)):
        generator = (tailor.Generator(plan, adapter=adapter) if adapter
                     else tailor.Generator(plan))
        generator.prefill(prompt)
        diffs[way] = float(np.abs(generator.logits().astype(np.float64) -
                                  want).max())
        if not diffs[way] <= args.tol * scale:
            problems.append(f"logits ({way}) differ from PEFT's by "
                            f"{diffs[way]:.2e} > {args.tol:g} * {scale:.3g}")
    effect = float(np.abs(want - plain).max())
    if not effect > 10 * args.tol * scale:
        problems.append(f"the adapter moves the logits by only {effect:.2e} "
                        "(vacuous)")
    return (f"fan_in_fan_out true; ids equal PEFT's on {len(prompts)} prompts "
            f"({changed} differ from the base) merged, bound and with the flag "
            f"flipped; logits max|tailor - PEFT| " +
            ", ".join(f"{w} {d:.2e}" for w, d in diffs.items()) +
            f" (scale {scale:.3g}, adapter effect {effect:.2e})"), problems


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
        print(f"{'ok  ' if not problems else 'FAIL'} {name:<11} {line}")
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
            print(f"skip {name:<11} (needs a tailor-trained adapter)")
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
            print(f"ok   {name:<11} PEFT logits scale {np.abs(ref).max():.3g}, "
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

    # (c) tailor-trained models through transformers' own loaders.
    c_cases = [
        ("c-full", lambda: full_finetune_case("c-full", "llama", args, rows, data)),
        ("c-full-gpt2", lambda: full_finetune_case("c-full-gpt2", "gpt2", args,
                                                   rows, data)),
        ("c-lora", lambda: lora_base_case(args, rows, data, ids)),
        ("d-gpt2", lambda: gpt2_lora_case(args, rows, data)),
    ]
    for name, run_case in c_cases:
        if args.torch_only:
            print(f"skip {name:<11} (needs a tailor-trained model)")
            continue
        line, problems = run_case()
        report(name, line, problems)

    n = len(results)
    good = sum(ok for _, ok in results)
    what = "PEFT halves done (tailor not run)" if args.torch_only else \
        f"PEFT round-trip cases match (tol {args.tol:g})"
    print(f"summary: {good}/{n} {what}")
    return 0 if good == n else 1


if __name__ == "__main__":
    sys.exit(main())
