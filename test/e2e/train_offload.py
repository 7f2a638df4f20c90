#!/usr/bin/env python3
"""Offload on the CPU target: frozen parameters and the optimizer on the host.

The tiny Llama (transformers' LlamaForCausalLM, random init, exported by
torch.onnx) with LoRA, QLoRA (NF4 bytes offloaded) and full fine-tuning,
compiled with and without `offload_param: cpu` and/or
`offload_optimizer: cpu` (AdamW's moments in host memory, the update run on
the host stream), trains 20 steps on the same rows:

  - losses and grad norms of every step, and the adapter, are bit-identical;
  - the plan's device bytes fall and its host bytes rise (inspect --json
    device_peak_bytes / host_peak_bytes), by at least the bytes of all but
    one layer's frozen weights, and the trainer allocates exactly that
    split;
  - every step copies exactly the bytes the plan predicts
    (metrics.jsonl bytes_copied == predicted_bytes_copied_per_step);
  - optimizer offload takes exactly the plain plan's optimizer_state bytes
    off the device;
  - with DDP on 2 ranks (mpirun) the offloaded plans match the plain one;
    so do ZeRO-1/2/3 with the optimizer offloaded (DeepSpeed's ZeRO-Offload:
    each rank's chunk of the master weights and moments on the host), full
    fine-tuning and LoRA, taking exactly each rank's optimizer-state chunk
    off its device;
  - activation offload (`enable_activation_offloading`) moves what forward
    saves for backward (what recomputation leaves of it too) to the host
    and back, with LoRA, QLoRA (with every offload at once) and full
    fine-tuning;
  - without gradient clipping (max_grad_norm 0) and one micro-batch a
    step, overlap moves the host updates themselves into train_step, a
    layer's updates started once its copies are made (plan input
    `update_step`), with LoRA under a warmup + cosine schedule and full
    fine-tuning, and under ZeRO-2 and ZeRO-3 on 2 ranks (each rank's
    chunk): still bit-identical; with clipping they stay after backward;
    such a plan without eval_step refuses a validation set;
  - what is not built yet is refused by name: parameter offload with full
    fine-tuning or with ZeRO-3, optimizer offload with SGD;
  - under device_memory_budget_gib compile offloads by itself when the plan
    does not fit, and refuses with the excess when even that is too much.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))

import train_common as tc  # noqa: E402

STEPS = 20


def compile_plan(args, onnx_path, recipe, work, hardware="cpu"):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "recipe.yaml")
    tc.write_recipe(recipe, path)
    plan = os.path.join(work, "plan.tplan")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", onnx_path,
                      "--recipe", path, "--hardware", hardware, "-o", plan],
                     900, os.path.join(work, "tailor.log"))
    return (plan, None) if ok else (None, "compile: " + msg)


def run_plan(args, onnx_path, data, recipe, name, ranks=1):
    work = os.path.join(args.work, name)
    plan, err = compile_plan(args, onnx_path, recipe, work,
                             "cpu" if ranks == 1 else f"{ranks}xcpu")
    if err:
        return None, err
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
           "--max-steps", str(STEPS), "--output-dir", out, "--threads", "1"]
    if ranks > 1:
        cmd = tc.mpirun(ranks) + cmd
    ok, msg = tc.run(cmd, 900, os.path.join(work, "tailor.log"))
    if not ok:
        return None, "train: " + msg
    memory = re.search(r"^memory (\d+) B allocated(?: per rank)?"
                       r"(?: \(device (\d+) B, host (\d+) B\))?", msg, re.M)
    doc = json.loads(subprocess.run(
        [os.path.join(args.bin, "tailor"), "inspect", plan, "--json"],
        capture_output=True, text=True, check=True).stdout)
    rows = [m for _, m in sorted(tc.read_metrics(out).items())]
    weights = ("adapter_model.safetensors" if recipe["adapter"] != "full"
               else "model.safetensors")
    with open(os.path.join(out, weights), "rb") as f:
        adapter = f.read()
    with open(os.path.join(out, f"checkpoint-{STEPS}",
                           "optimizer.safetensors"), "rb") as f:
        optimizer_state = f.read()
    return dict(rows=rows, adapter=adapter, optimizer_state=optimizer_state,
                doc=doc, memory=memory), None


def check_pair(name, plain, offloaded, optimizer_only=False):
    failures = []
    same = [(a["loss"], a["grad_norm"]) == (b["loss"], b["grad_norm"])
            for a, b in zip(plain["rows"], offloaded["rows"])]
    if len(same) != STEPS or not all(same):
        step = same.index(False) + 1 if False in same else len(same)
        failures.append(f"{name}: losses differ from step {step} "
                        f"({len(same)} steps compared)")
    if plain["adapter"] != offloaded["adapter"]:
        failures.append(f"{name}: the adapters differ")
    # The moments, gathered from host memory (and from ranks' chunks under
    # ZeRO) into the checkpoint under their logical names.
    if plain["optimizer_state"] != offloaded["optimizer_state"]:
        failures.append(f"{name}: the checkpoints' optimizer states differ")
    p, o = plain["doc"]["ranks"][0], offloaded["doc"]["ranks"][0]
    saved = p["device_peak_bytes"] - o["device_peak_bytes"]
    host = o["host_peak_bytes"]
    if saved <= 0 or host <= 0 or saved > host:
        failures.append(f"{name}: device {p['device_peak_bytes']} -> "
                        f"{o['device_peak_bytes']} B, host {host} B")
    if optimizer_only and saved != p["bytes"]["optimizer_state"]:
        failures.append(f"{name}: the device saved {saved} B, the plain "
                        f"plan's optimizer state is "
                        f"{p['bytes']['optimizer_state']} B")
    memory = offloaded["memory"]
    if (not memory or not memory.group(2) or
            int(memory.group(2)) != o["device_peak_bytes"] or
            int(memory.group(3)) != host):
        failures.append(f"{name}: the trainer allocated "
                        f"{memory.group(0) if memory else '?'}, the plan "
                        f"device {o['device_peak_bytes']} host {host}")
    predicted = o["predicted_bytes_copied_per_step"]
    copied = [r.get("bytes_copied") for r in offloaded["rows"]]
    if not predicted or any(c != predicted for c in copied):
        failures.append(f"{name}: predicted {predicted} bytes copied per "
                        f"step, counted {copied[:3]}")
    if not failures:
        print(f"{name}: {STEPS} steps bit-identical, adapter and optimizer "
              f"state identical; "
              f"device {p['device_peak_bytes']} -> {o['device_peak_bytes']} "
              f"B (-{saved}), host {host} B; {predicted:.0f} B copied per "
              f"step, as predicted")
    return failures


def host_updates_in_train_step(doc):
    """Whether tailor-overlap-host-updates moved the host updates into
    train_step (which then takes the optimizer's step as `update_step`)."""
    return any(i["name"] == "update_step" and i.get("entry") == "train_step"
               for i in doc.get("inputs", []))


def check_host_update_placement(label, suffix, recipe, ranks, offloaded):
    """Overlapped optimizer offload: the host updates run in train_step
    exactly when nothing they read waits for the end of backward (no
    clipping, one micro-batch a step) and their copies are there (one
    rank, or ZeRO-2/3, whose chunks are final in train_step; not DDP's
    in-place all-reduce nor ZeRO-1's reduce-scatter in optimizer_step)."""
    if suffix != "offload-optimizer-overlap":
        return []
    expect = recipe.get("max_grad_norm", 0) == 0 and \
        recipe.get("gradient_accumulation_steps", 1) == 1 and \
        (ranks == 1 or recipe.get("zero_stage", 0) in (2, 3))
    got = host_updates_in_train_step(offloaded["doc"])
    if got != expect:
        return [f"{label}-{suffix}: host updates in train_step: {got}, "
                f"expected {expect}"]
    print(f"{label}-{suffix}: host updates "
          f"{'in train_step, during backward' if got else 'after backward'}")
    return []


def check_validation_refused(args, data):
    """A plan whose train_step updates on the host has no eval_step unless
    compiled with validation: the trainer refuses a validation set rather
    than run train_step (and the updates) on it."""
    plan = os.path.join(args.work, "lora-noclip-offload-optimizer-overlap",
                        "plan.tplan")
    out = os.path.join(args.work, "refuse-validation")
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([os.path.join(args.bin, "tailor"), "train", plan,
                        "--data", data, "--eval-data", data, "--max-steps",
                        "2", "--output-dir", out, "--threads", "1"],
                       capture_output=True, text=True)
    expect = "updates the optimizer state on the host during backward"
    if r.returncode == 0 or expect not in r.stderr:
        return [f"refuse validation: rc {r.returncode}: {r.stderr[-300:]}"]
    print(f"refused validation through train_step: ...{expect}...")
    return []


def check_refusals(args, onnx_path, base):
    failures = []
    for name, extra, expect in (
            ("optimizer-sgd", dict(offload_optimizer="cpu", optimizer="sgd"),
             "offload_optimizer: SGD on the host is not built yet"),
            ("full", dict(adapter="full", offload_param="cpu"),
             "offload with 'adapter: full'"),
            ("zero3", dict(offload_param="cpu", zero_stage=3),
             "offload with zero_stage 3")):
        recipe = dict(base, **extra)
        if recipe["adapter"] == "full":
            for key in ("lora_r", "lora_alpha", "lora_dropout",
                        "lora_target_modules", "use_rslora"):
                recipe.pop(key, None)
        _, err = compile_plan(args, onnx_path, recipe,
                              os.path.join(args.work, "refuse-" + name),
                              "2xcpu" if "zero" in name else "cpu")
        if not err or expect not in err:
            failures.append(f"refuse {name}: {err or 'compiled'}")
        else:
            print(f"refused {name}: ...{expect}...")
    return failures


def check_budget(args, onnx_path, base):
    """device_memory_budget_gib: between the offloaded and the plain plan's
    device bytes, compile offloads by itself and says so; below the
    offloaded plan's, it refuses with the excess."""
    failures = []
    work = os.path.join(args.work, "budget")
    plain, err = compile_plan(args, onnx_path, base, work + "-plain")
    if err:
        return [f"budget: {err}"]
    device = lambda plan: json.loads(subprocess.run(
        [os.path.join(args.bin, "tailor"), "inspect", plan, "--json"],
        capture_output=True, text=True, check=True).stdout)["ranks"][0][
            "device_peak_bytes"]
    offloaded, err = compile_plan(args, onnx_path,
                                  dict(base, offload_param="cpu"),
                                  work + "-offloaded")
    if err:
        return [f"budget: {err}"]
    low, high = device(offloaded), device(plain)
    budget = (low + high) / 2 / 2**30
    plan, err = compile_plan(args, onnx_path,
                             dict(base, device_memory_budget_gib=budget),
                             work + "-fits")
    log = open(os.path.join(work + "-fits", "tailor.log")).read()
    if err or "offloading the frozen parameters to fit" not in log or \
            device(plan) != low:
        failures.append(f"budget {budget:.6f} GiB: {err or log[-300:]}")
    _, err = compile_plan(args, onnx_path,
                          dict(base, device_memory_budget_gib=low / 2 / 2**30),
                          work + "-refused")
    if not err or "exceeds that by" not in err:
        failures.append(f"budget below the offloaded plan: {err or 'compiled'}")
    if not failures:
        print(f"budget: {budget * 2**30:.0f} B offloads by itself (device "
              f"{high} -> {low} B); {low / 2:.0f} B is refused with the "
              f"excess")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    onnx_path = os.path.join(args.work, "llama", "model.onnx")
    if not os.path.exists(onnx_path):
        tc.build_and_export(onnx_path, seed=0, family="llama")
    rows = tc.make_rows(n_rows=STEPS * 2 * tc.B)
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(rows, data)
    lora = tc.recipe_defaults()
    lora.update(lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                max_steps=STEPS, save_steps=STEPS, max_grad_norm=1.0)
    full = dict(lora, adapter="full")
    for key in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                "use_rslora"):
        full.pop(key, None)
    params = ("offload", dict(offload_param="cpu"))
    optimizer = ("offload-optimizer", dict(offload_optimizer="cpu"))
    both = ("offload-both", dict(offload_param="cpu", offload_optimizer="cpu"))
    activations = ("offload-activations",
                   dict(enable_activation_offloading=True))
    # The copies on the copy stream, one layer ahead (the GPU default; on
    # CPU ranks copies are memcpys in program order, so this checks the
    # plan, whose buffers must stay live while a copy is in flight).
    overlapped = ("offload-activations-overlap",
                  dict(enable_activation_offloading=True, overlap_comm=True))
    # The gradient and parameter copies moved into train_step, on the copy
    # stream beside backward.
    optimizer_overlapped = ("offload-optimizer-overlap",
                            dict(offload_optimizer="cpu", overlap_comm=True))
    everything = ("offload-all", dict(offload_param="cpu",
                                      offload_optimizer="cpu",
                                      enable_activation_offloading=True))
    failures = []
    # Without clipping the host updates themselves move into train_step;
    # the schedule's learning rate is then computed there too.
    lora_noclip = dict(lora, max_grad_norm=0.0, lr_scheduler="cosine",
                       warmup_steps=3)
    cases = [("lora", lora, 1, [params, optimizer, activations,
                                overlapped, optimizer_overlapped]),
             ("lora-noclip", lora_noclip, 1, [optimizer_overlapped]),
             ("full-noclip", dict(full, max_grad_norm=0.0), 1,
              [optimizer_overlapped]),
             ("qlora", dict(lora, adapter="qlora"), 1,
              [params, both, everything]),
             ("lora-checkpointing", dict(lora, gradient_checkpointing=True), 1,
              [activations]),
             ("full", full, 1, [optimizer, activations,
                                optimizer_overlapped])]
    if shutil.which("mpirun"):
        cases.append(("lora-ddp2", dict(lora, zero_stage=0), 2,
                      [params, optimizer]))
        cases.append(("lora-zero1", dict(lora, zero_stage=1), 2, [optimizer]))
        cases.append(("full-zero2", dict(full, zero_stage=2), 2,
                      [optimizer, optimizer_overlapped]))
        cases.append(("full-zero3", dict(full, zero_stage=3), 2, [optimizer]))
        # ZeRO-Offload proper: each rank's chunk updated on the host during
        # backward, as soon as the chunk's reduce-scatter is accumulated.
        for stage in (2, 3):
            cases.append((f"full-zero{stage}-noclip",
                          dict(full, zero_stage=stage, max_grad_norm=0.0), 2,
                          [optimizer_overlapped]))
    for label, recipe, ranks, variants in cases:
        plain, err = run_plan(args, onnx_path, data, recipe, label, ranks)
        if err:
            failures.append(f"{label}: {err}")
            continue
        for suffix, extra in variants:
            offloaded, err = run_plan(args, onnx_path, data,
                                      dict(recipe, **extra),
                                      f"{label}-{suffix}", ranks)
            if err:
                failures.append(f"{label}-{suffix}: {err}")
                continue
            failures += check_pair(f"{label}-{suffix}", plain, offloaded,
                                   optimizer_only=extra == optimizer[1])
            failures += check_host_update_placement(
                label, suffix, dict(recipe, **extra), ranks, offloaded)
    failures += check_validation_refused(args, data)
    failures += check_refusals(args, onnx_path, lora)
    failures += check_budget(args, onnx_path, lora)
    for failure in failures:
        print("FAIL:", failure)
    print("summary:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
