#!/usr/bin/env python3
"""Layer split across ranks (pipeline_stages, device_map: auto) on CPU ranks.

A 4-layer tiny Llama (transformers' LlamaForCausalLM, random init, exported
by torch.onnx) with LoRA, 4 micro-batches a step, trained 20 steps:

  - on 2 stages with the 1f1b and naive schedules, 3 stages (1f1b, two
    stages keeping input slots) and device_map: auto on 2 ranks (mpirun),
    every step's loss and the final adapter are bit-identical to the
    single-rank plan's, and the grad norm (a sum over stages of squared
    norms, all-reduced) agrees to 1e-6;
  - one tensor crosses each way per micro-batch between 2 stages;
  - each stage's plan holds only its layers' parameters: the stages'
    parameter bytes sum to about the single plan's (the embedding and head
    on their stages; frozen tied weights would be on both), each well
    below it;
  - checkpoints at step 10 move between 2 stages and one rank, and one
    rank and 3 stages, reaching the uninterrupted adapter bit for bit;
  - what is not built is refused by name: ZeRO, offload, recomputation and
    validation with a layer split; more stages than layers; a cluster whose
    rank count is not a multiple of the stages; the plan run as one
    process.
"""

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

STEPS = 20
MICRO_BATCHES = 4
LAYERS = 4


def train(args, plan, work, ranks, data, max_steps=STEPS, out=None,
          resume=None):
    return tc.train_plan(args.bin, plan, work, ranks, data, max_steps, out,
                         resume, timeout=900)


def inspect(args, plan):
    return tc.inspect_json(args.bin, plan)


def run(args, onnx_path, data, recipe, name, hardware, ranks):
    work = os.path.join(args.work, name)
    plan, err = tc.compile_plan(args.bin, onnx_path, recipe, work, hardware)
    if err:
        return None, f"{name}: compile: {tc.first_lines(err)}"
    out, err = train(args, plan, work, ranks, data)
    if err:
        return None, f"{name}: train: {tc.first_lines(err)}"
    rows = [m for _, m in sorted(tc.read_metrics(out).items())]
    return dict(plan=plan, work=work, doc=inspect(args, plan),
                losses=[m["loss"] for m in rows],
                norms=[m["grad_norm"] for m in rows],
                adapter=tc.load_safetensors(
                    os.path.join(out, "adapter_model.safetensors"))), None


def compare(name, got, ref):
    failures = []
    if len(got["losses"]) != STEPS:
        return [f"{name}: {len(got['losses'])} steps logged"]
    if got["losses"] != ref["losses"]:
        first = next(i for i, (a, b) in enumerate(zip(got["losses"],
                                                      ref["losses"]))
                     if a != b)
        failures.append(f"{name}: step {first + 1} loss {got['losses'][first]}"
                        f" != single rank's {ref['losses'][first]}")
    worst = max(abs(a - b) / max(abs(b), 1e-12)
                for a, b in zip(got["norms"], ref["norms"]))
    if worst > 1e-6:
        failures.append(f"{name}: grad norms differ by {worst:.2e} (rel)")
    if sorted(got["adapter"]) != sorted(ref["adapter"]):
        failures.append(f"{name}: adapter tensors differ in names")
    else:
        for key, value in ref["adapter"].items():
            if not (got["adapter"][key] == value).all():
                failures.append(f"{name}: adapter {key} differs")
                break
    if not failures:
        print(f"{name}: {STEPS} losses and the adapter bit-identical to one "
              f"rank's; grad norms within {worst:.1e}")
    return failures


def check_parameters(name, got, ref):
    whole = ref["doc"]["ranks"][0]["bytes"]["parameters"]
    per = [rank["bytes"]["parameters"] for rank in got["doc"]["ranks"]]
    print(f"{name}: parameter bytes per stage {per} (one rank: {whole})")
    if max(per) >= whole or not whole * 0.95 <= sum(per) <= whole * 1.05:
        return [f"{name}: stages hold {per} parameter bytes, one rank "
                f"{whole}"]
    # The cost model runs the stages' schedules together: one step for all,
    # each stage busy for part of it.
    pipe = got["doc"]["pipeline"]
    step, busy = pipe["predicted_step_seconds"], pipe["predicted_busy_seconds"]
    print(f"{name}: predicted step {step * 1e3:.3f} ms, busy per stage "
          f"{[round(b * 1e3, 3) for b in busy]} ms, bubble "
          f"{pipe['predicted_bubble']:.1%}")
    ranks = got["doc"]["ranks"]
    if (not step or not all(0 < b <= step for b in busy) or
            any(r["predicted_step_seconds"] != step for r in ranks)):
        return [f"{name}: pipeline prediction {pipe}"]
    return []


def resume_leg(args, onnx_path, data, recipe, legs, ref, label):
    """Trains `legs` ((name, recipe extras, hardware, ranks, until), ...)
    one after the other in one output directory, each resuming the one
    before's checkpoint; the final adapter must be `ref`'s bit for bit."""
    out = os.path.join(args.work, label, "out")
    shutil.rmtree(out, ignore_errors=True)
    resume = None
    for name, extra, hardware, ranks, until in legs:
        work = os.path.join(args.work, label, name)
        leg = dict(recipe, save_steps=10, **extra)
        plan, err = tc.compile_plan(args.bin, onnx_path, leg, work, hardware)
        if err:
            return [f"{label}: compile {name}: {tc.first_lines(err)}"]
        _, err = train(args, plan, work, ranks, data, max_steps=until,
                       out=out, resume=resume)
        if err:
            return [f"{label}: {name}: {tc.first_lines(err)}"]
        resume = os.path.join(out, f"checkpoint-{until}")
    got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    for key, value in ref["adapter"].items():
        if key not in got or not (got[key] == value).all():
            return [f"{label}: adapter {key} differs"]
    print(f"{label}: the uninterrupted adapter bit for bit")
    return []


def check_resume(args, onnx_path, data, recipe, ref):
    """A checkpoint moves between a layer split and one rank both ways."""
    return (resume_leg(args, onnx_path, data, recipe,
                       (("stages2", dict(pipeline_stages=2), "2xcpu", 2, 10),
                        ("single", {}, "cpu", 1, STEPS)), ref,
                       "resume 2 stages -> 1 rank") +
            resume_leg(args, onnx_path, data, recipe,
                       (("single", {}, "cpu", 1, 10),
                        ("stages3", dict(pipeline_stages=3), "3xcpu", 3,
                         STEPS)), ref, "resume 1 rank -> 3 stages"))


def check_messages(args, onnx_path, recipe):
    """A residual stream crosses between stages as one tensor each way per
    micro-batch: stage 0 sends its output, stage 1 the output's gradient
    (both branches' gradients summed on stage 1 before it is sent)."""
    work = os.path.join(args.work, "messages")
    os.makedirs(work, exist_ok=True)
    tc.write_recipe(dict(recipe, pipeline_stages=2),
                    os.path.join(work, "recipe.yaml"))
    sched = os.path.join(work, "schedule.mlir")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", onnx_path,
                      "--recipe", os.path.join(work, "recipe.yaml"),
                      "--hardware", "2xcpu", "--compile-to=schedule",
                      "-o", sched], 300)
    if not ok:
        return [f"messages: {tc.first_lines(msg)}"]
    programs = open(sched).read().split("sched.program @rank")[1:]
    counts = [(p.count("collective send"), p.count("collective recv"))
              for p in programs]
    print(f"messages per micro-batch (sends, receives) by stage: {counts}")
    if counts != [(1, 1), (1, 1)]:
        return [f"messages: (sends, receives) per stage {counts}, expected "
                "one each way"]
    return []


def check_refusals(args, onnx_path, data, recipe):
    split = dict(recipe, pipeline_stages=2)
    failures = tc.check_refusals(args.bin, onnx_path, args.work, [
        ("zero2", dict(split, zero_stage=2), "2xcpu",
         "with zero2 sharding is not built yet"),
        ("offload", dict(split, offload_optimizer="cpu"), "2xcpu",
         "with offload is not built yet"),
        ("recompute", dict(split, gradient_checkpointing=True), "2xcpu",
         "a recomputation policy"),
        ("validation", dict(split, val_set_size=0.1), "2xcpu",
         "validation"),
        ("too-many-stages", dict(recipe, pipeline_stages=5), "5xcpu",
         "need at least as many transformer layers"),
        ("world-not-a-multiple", split, "3xcpu",
         "3 ranks do not divide into 2 pipeline stages"),
        ("both-keys", dict(split, device_map="auto"), "2xcpu",
         "give one"),
    ])
    work = os.path.join(args.work, "alone")
    plan, err = tc.compile_plan(args.bin, onnx_path, split, work, "2xcpu")
    if err:
        return failures + [f"alone: compile: {tc.first_lines(err)}"]
    _, err = train(args, plan, work, 1, data)
    if not err or "mpirun -np 2" not in err:
        failures.append(f"a layer split run as one process: {err!r}")
    else:
        print(f"refused alone: {tc.first_lines(err, 1)}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found")
        return 77
    onnx_path = tc.export_llama(args.work, LAYERS)
    rows = tc.make_rows(n_rows=STEPS * MICRO_BATCHES * tc.B)
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(rows, data)
    recipe = tc.recipe_defaults()
    recipe.update(lora_target_modules=["q_proj", "k_proj", "v_proj",
                                       "o_proj", "gate_proj", "up_proj",
                                       "down_proj"],
                  gradient_accumulation_steps=MICRO_BATCHES, max_steps=STEPS,
                  save_steps=0)
    ref, err = run(args, onnx_path, data, recipe, "single", "cpu", 1)
    if err:
        print("FAIL: " + err)
        return 1
    failures = []
    for name, extra, hardware, ranks in (
            ("stages2-1f1b", dict(pipeline_stages=2), "2xcpu", 2),
            ("stages2-naive", dict(pipeline_stages=2,
                                   pipeline_schedule="naive"), "2xcpu", 2),
            ("stages3-1f1b", dict(pipeline_stages=3), "3xcpu", 3),
            ("device-map-auto", dict(device_map="auto"), "2xcpu", 2)):
        got, err = run(args, onnx_path, data, dict(recipe, **extra), name,
                       hardware, ranks)
        if err:
            failures.append(err)
            continue
        failures += compare(name, got, ref)
        if name != "device-map-auto":
            failures += check_parameters(name, got, ref)
    failures += check_messages(args, onnx_path, recipe)
    failures += check_resume(args, onnx_path, data, recipe, ref)
    failures += check_refusals(args, onnx_path, data, recipe)
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
