#!/usr/bin/env python3
"""Layer split composed with data parallelism (pipeline stages x replicas).

A 4-layer tiny Llama (transformers' LlamaForCausalLM, random init, exported
by torch.onnx) with LoRA on every projection, trained 20 steps at a global
batch of 4 micro-batches of 2 sequences:

  - one rank, gradient_accumulation_steps 4: the reference;
  - `pipeline_stages: 2` on `--hardware 4xcpu` (4 ranks under mpirun): 2
    stages x 2 data-parallel replicas, each replica reading 2 micro-batches
    of the global batch. Every step's loss and grad_norm equal the
    reference's to 1e-5 relative, and the final adapter's tensors to 1e-5
    of each tensor's scale (but for AdamW's near-zero-gradient elements, at
    most 0.5% of a tensor, within 1e-3: the replicas' average sums the
    micro-batches' gradients in another order, as e2e.train_ddp allows);
  - `tailor inspect --json` shows the layout (4 ranks, stage-major, each
    with its stage and replica) and per stage the predicted all-reduce
    time, above the same split's on 2 ranks (norm only); the bytes rank 0
    sent each step (metrics.jsonl) equal the plan's prediction;
  - a checkpoint written at step 10 on 2x2xcpu resumes on 2 stages x 1
    replica and on one rank, each reaching the reference's adapter;
  - refusals: ranks not a multiple of the stages (naming both), the 4-rank
    plan launched on 2, ZeRO with a layer split.

  train_pipeline_ddp.py --bin build/bin --work build/test/train-pipeline-ddp
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

STEPS = 20
LAYERS = 4
STAGES = 2
REPLICAS = 2
GLOBAL_MICRO_BATCHES = 4
TOL = 1e-5
OUTLIER_SHARE = 5e-3
OUTLIER_TOL = 1e-3


def train(args, plan, work, ranks, data, max_steps=STEPS, out=None,
          resume=None):
    return tc.train_plan(args.bin, plan, work, ranks, data, max_steps, out,
                         resume, timeout=600)


def inspect(args, plan):
    return tc.inspect_json(args.bin, plan)


def layout_recipe(base, stages, ranks):
    """The recipe for `ranks` ranks over `stages` stages at the global
    batch: each replica accumulates its share."""
    recipe = dict(base)
    replicas = ranks // stages if stages > 1 else ranks
    recipe["gradient_accumulation_steps"] = GLOBAL_MICRO_BATCHES // replicas
    if stages > 1:
        recipe["pipeline_stages"] = stages
    return recipe


def run(args, onnx_path, data, recipe, name, hardware, ranks):
    work = os.path.join(args.work, name)
    plan, err = tc.compile_plan(args.bin, onnx_path, recipe, work, hardware)
    if err:
        return None, f"{name}: compile: {tc.first_lines(err)}"
    out, err = train(args, plan, work, ranks, data)
    if err:
        return None, f"{name}: train: {tc.first_lines(err)}"
    rows = [m for _, m in sorted(tc.read_metrics(out).items())]
    return dict(plan=plan, doc=inspect(args, plan),
                metrics=[(m["loss"], m["grad_norm"]) for m in rows],
                sent=[m.get("bytes_sent") for m in rows],
                adapter=tc.load_safetensors(
                    os.path.join(out, "adapter_model.safetensors"))), None


def compare_adapter(name, got, ref):
    """Each tensor within TOL of its scale but for a few AdamW outliers."""
    import numpy as np

    failures, worst, outliers = [], 0.0, 0
    for key, ref_tensor in ref.items():
        if key not in got:
            failures.append(f"{name}: adapter lacks {key}")
            continue
        r = ref_tensor.astype(np.float64)
        diff = np.abs(got[key].astype(np.float64) - r) / (
            float(np.abs(r).max()) or 1.0)
        over = int((diff > TOL).sum())
        outliers += over
        worst = max(worst, float(diff.max()))
        if over > OUTLIER_SHARE * r.size or float(diff.max()) > OUTLIER_TOL:
            failures.append(f"{name}: {key}: {over} of {r.size} elements "
                            f"beyond {TOL:g} (worst {float(diff.max()):.2e})")
    if sorted(got) != sorted(ref):
        failures.append(f"{name}: adapter tensors differ in names")
    return failures, worst, outliers


def compare(name, got, ref):
    if len(got["metrics"]) != STEPS:
        return [f"{name}: {len(got['metrics'])} steps logged"]
    failures, worst = [], 0.0
    for step, ((loss, norm), (rloss, rnorm)) in enumerate(
            zip(got["metrics"], ref["metrics"]), start=1):
        for what, a, b in (("loss", loss, rloss), ("grad_norm", norm, rnorm)):
            err = abs(a - b) / max(abs(b), 1e-12)
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"{name}: step {step} {what} {a} vs one "
                                f"rank's {b} (relative {err:.2e})")
    adapter, tensor_worst, outliers = compare_adapter(name, got["adapter"],
                                                      ref["adapter"])
    print(f"{name}: {STEPS} steps, worst loss/grad_norm relative error "
          f"{worst:.2e}; adapter worst {tensor_worst:.2e} of its scale "
          f"({outliers} elements beyond {TOL:g}); last loss "
          f"{got['metrics'][-1][0]:.6f}")
    return failures + adapter


def check_layout(name, got, split1):
    """inspect --json: the stage x replica layout, each rank's figures, the
    replicas' all-reduce in the prediction; rank 0 sent what it predicts."""
    doc, pipe = got["doc"], got["doc"]["pipeline"]
    ranks = [(r["rank"], r["stage"], r["replica"]) for r in doc["ranks"]]
    expected = [(s * REPLICAS + j, s, j) for s in range(STAGES)
                for j in range(REPLICAS)]
    failures = []
    if (doc["world_size"] != STAGES * REPLICAS or pipe["replicas"] != REPLICAS
            or pipe["ranks_by_stage"] != [[0, 1], [2, 3]]
            or ranks != expected):
        failures.append(f"{name}: inspect layout world {doc['world_size']}, "
                        f"replicas {pipe['replicas']}, "
                        f"{pipe['ranks_by_stage']}, ranks {ranks}")
    comm = pipe["predicted_collective_seconds"]
    alone = split1["doc"]["pipeline"]["predicted_collective_seconds"]
    print(f"{name}: ranks (rank, stage, replica) {ranks}; predicted step "
          f"{pipe['predicted_step_seconds'] * 1e3:.3f} ms, optimizer "
          f"collectives per stage {[round(c * 1e3, 4) for c in comm]} ms "
          f"(2 ranks: {[round(c * 1e3, 4) for c in alone]} ms)")
    if not all(c > a > 0 for c, a in zip(comm, alone)):
        failures.append(f"{name}: predicted collective seconds {comm}, on "
                        f"2 ranks {alone}")
    predicted = doc["ranks"][0]["predicted_bytes_sent_per_step"]
    wrong = [(step, sent) for step, sent in enumerate(got["sent"], 1)
             if sent != predicted]
    if not predicted or wrong:
        failures.append(f"{name}: rank 0 predicted {predicted} bytes sent "
                        f"per step; the communicator counted {wrong[:3]}")
    else:
        print(f"{name}: rank 0 sent {predicted:.0f} bytes each step, as "
              f"predicted")
    return failures


def check_resume(args, onnx_path, data, base, ref):
    """Steps 1-10 on 2x2xcpu (2 stages x 2 replicas), then 11-20 on 2
    stages x 1 replica and, from the same checkpoint, on one rank."""
    work = os.path.join(args.work, "resume")
    first = dict(layout_recipe(base, STAGES, 4), save_steps=10)
    plan, err = tc.compile_plan(args.bin, onnx_path, first,
                                os.path.join(work, "pp2xdp2"), "2x2xcpu")
    if err:
        return [f"resume: compile 2x2: {tc.first_lines(err)}"]
    out, err = train(args, plan, os.path.join(work, "pp2xdp2"), 4, data,
                     max_steps=10)
    if err:
        return [f"resume: 2x2 steps 1-10: {tc.first_lines(err)}"]
    checkpoint = os.path.join(out, "checkpoint-10")
    failures = []
    for name, stages, ranks, hardware in (("pp2", STAGES, 2, "2xcpu"),
                                          ("single", 1, 1, "cpu")):
        leg = os.path.join(work, name)
        recipe = dict(layout_recipe(base, stages, ranks), save_steps=10)
        plan, err = tc.compile_plan(args.bin, onnx_path, recipe, leg, hardware)
        if err:
            failures.append(f"resume: compile {name}: {tc.first_lines(err)}")
            continue
        leg_out = os.path.join(leg, "out")
        shutil.rmtree(leg_out, ignore_errors=True)
        shutil.copytree(out, leg_out)
        _, err = train(args, plan, leg, ranks, data, out=leg_out,
                       resume=checkpoint)
        if err:
            failures.append(f"resume: {name} steps 11-20: "
                            f"{tc.first_lines(err)}")
            continue
        got = tc.load_safetensors(
            os.path.join(leg_out, "adapter_model.safetensors"))
        label = f"resume 2x2 -> {name} ({ranks} rank{'s' * (ranks > 1)})"
        bad, worst, _ = compare_adapter(label, got, ref["adapter"])
        failures += bad
        if not bad:
            print(f"{label}: the uninterrupted adapter within {worst:.2e}")
    return failures


def check_refusals(args, onnx_path, data, base, plan4):
    split = layout_recipe(base, STAGES, 4)
    failures = tc.check_refusals(args.bin, onnx_path, args.work, [
        ("not-a-multiple", split, "3xcpu",
         "3 ranks do not divide into 2 pipeline stages"),
        ("zero2", dict(split, zero_stage=2), "4xcpu",
         "with zero2 sharding is not built yet"),
    ])
    proc = subprocess.run(tc.mpirun(2) + [
        os.path.join(args.bin, "tailor"), "train", plan4, "--data", data,
        "--max-steps", "1", "--output-dir",
        os.path.join(args.work, "launched-on-2")], capture_output=True,
        text=True, timeout=300)
    text = proc.stdout + proc.stderr
    expect = ("compiled for 4 ranks (2 pipeline stages x 2 data-parallel "
              "replicas) but launched on 2; launch it with mpirun -np 4")
    if proc.returncode != 1 or expect not in text:
        failures.append(f"the 4-rank plan on 2 ranks: exit "
                        f"{proc.returncode}, {tc.first_lines(text)}")
    else:
        line = next(l for l in text.splitlines() if expect in l)
        print(f"refused on 2 ranks (exit 1): {line.strip()}")
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
    rows = tc.make_rows(n_rows=STEPS * GLOBAL_MICRO_BATCHES * tc.B)
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(rows, data)
    base = tc.recipe_defaults()
    base.update(lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                     "gate_proj", "up_proj", "down_proj"],
                max_steps=STEPS, save_steps=0, max_grad_norm=1.0)
    ref, err = run(args, onnx_path, data, layout_recipe(base, 1, 1),
                   "single", "cpu", 1)
    if err:
        print("FAIL: " + err)
        return 1
    failures = []
    got, err = run(args, onnx_path, data, layout_recipe(base, STAGES, 4),
                   "pp2xdp2", "4xcpu", 4)
    split1, err1 = run(args, onnx_path, data,
                       layout_recipe(base, STAGES, STAGES), "pp2xdp1",
                       "2xcpu", 2)
    if err or err1:
        failures += [e for e in (err, err1) if e]
    else:
        failures += compare("pp2xdp2", got, ref)
        failures += compare("pp2xdp1", split1, ref)
        failures += check_layout("pp2xdp2", got, split1)
        failures += check_refusals(args, onnx_path, data, base, got["plan"])
    failures += check_resume(args, onnx_path, data, base, ref)
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
