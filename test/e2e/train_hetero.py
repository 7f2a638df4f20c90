#!/usr/bin/env python3
"""Ranks of mixed speed split each step unevenly and still give world 1's numbers.

A cluster file (`--hardware FILE` with `nodes:`) describes three CPU ranks:
rank 0 a whole core, ranks 1 and 2 at half speed each (two ranks sharing a
core). tailor-balance-ranks gives each rank its own count of micro-batches
per optimizer step by predicted speed (6 : 3 : 3 of the recipe's
3 x 4 = 12), and the trainer runs each rank's count on its own slice of the
global batch. The tiny Hugging Face Llama exported by torch.onnx trains 10
steps with LoRA under DDP and under ZeRO-1 this way (mpirun --oversubscribe
-np 3), and on one rank with gradient_accumulation_steps 12 (the same
global batch).

Checks: the plan's counts are uneven and add up to the global batch
(inspect --json `micro_batches`, with each rank's predicted_step_seconds,
the slowest rank the one that waits least, and the balanced step predicted
faster than the even split's); every step's loss and grad_norm equal world
1's to 1e-5 relative; the adapter's tensors to 1e-5 of each tensor's scale
(but for AdamW's near-zero-gradient elements, as train_ddp.py allows); a
checkpoint of the uneven run (step 5) resumes on one rank to world 1's
steps 6-10. A layer split (pipeline_stages: 3) of a 6-layer export over the
same ranks gives the fast rank's stage more layers than on equal ranks
(StageAssignment weighted by each rank's time per FLOP) and one rank's
losses and adapter. zero2, zero3 and 2 stages on 3 mixed ranks are refused
by name; a cluster file's mistakes are reported with file, line and key.

  train_hetero.py --bin build/bin --work build/test/train-hetero
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

STEPS = 10
RANKS = 3
PER_RANK = 4  # the recipe's gradient_accumulation_steps at world 3
GLOBAL = RANKS * PER_RANK
TOL = 1e-5
OUTLIER_SHARE = 5e-3
OUTLIER_TOL = 1e-3

CLUSTER = """\
name: shared-cores
nodes:
  - name: host
    devices:
      - {kind: cpu, count: 1, threads: 1}
      - {kind: cpu, count: 2, threads: 1, speed: 0.5}
"""


def tailor(args, *rest):
    return [os.path.join(args.bin, "tailor"), *rest]


def compile_plan(args, onnx_path, recipe, work, hardware):
    os.makedirs(work, exist_ok=True)
    recipe_path = os.path.join(work, "recipe.yaml")
    tc.write_recipe(recipe, recipe_path)
    plan = os.path.join(work, "plan.tplan")
    proc = subprocess.run(tailor(args, "compile", onnx_path, "--recipe",
                                 recipe_path, "--hardware", hardware, "-o",
                                 plan), capture_output=True, text=True,
                          timeout=900)
    with open(os.path.join(work, "compile.log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return None, "compile: " + tc.first_lines(proc.stderr)
    return plan, None


def train(args, plan, work, ranks, data, out, max_steps=STEPS, resume=None,
          check_header=True):
    if resume is None:
        shutil.rmtree(out, ignore_errors=True)
    cmd = tailor(args, "train", plan, "--data", data, "--max-steps",
                 str(max_steps), "--output-dir", out, "--threads", "1")
    if resume:
        cmd += ["--resume", resume]
    if ranks > 1:
        cmd = tc.mpirun(ranks) + cmd
    ok, msg = tc.run(cmd, 900, os.path.join(work, "tailor.log"))
    if ok and check_header and ranks > 1 and \
            "x (6 + 3 + 3) micro-batches by ranks" not in msg:
        return (f"train at world {ranks}: the header does not say the "
                f"ranks run 6 + 3 + 3 micro-batches: {tc.first_lines(msg)}")
    return None if ok else f"train at world {ranks}: {msg}"


def metrics(out):
    return [(m["loss"], m["grad_norm"])
            for _, m in sorted(tc.read_metrics(out).items())]


def compare(name, got, ref, got_tensors, ref_tensors):
    import numpy as np

    failures = []
    if len(got) != len(ref) or not got:
        return [f"{name}: {len(got)} steps logged, world 1 logged {len(ref)}"]
    worst = 0.0
    for step, ((loss, norm), (rloss, rnorm)) in enumerate(zip(got, ref), 1):
        for what, a, b in (("loss", loss, rloss), ("grad_norm", norm, rnorm)):
            err = abs(a - b) / max(abs(b), 1e-12)
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"{name}: step {step} {what} {a} vs world "
                                f"1's {b} (relative {err:.2e})")
    tensor_worst, outliers, elements = 0.0, 0, 0
    for key, r in (ref_tensors or {}).items():
        if key not in got_tensors:
            failures.append(f"{name}: adapter lacks {key}")
            continue
        g = got_tensors[key].astype(np.float64)
        r = r.astype(np.float64)
        scale = float(np.abs(r).max()) or 1.0
        diff = np.abs(g - r) / scale
        over = int((diff > TOL).sum())
        outliers += over
        elements += r.size
        tensor_worst = max(tensor_worst, float(diff.max()))
        if over > OUTLIER_SHARE * r.size or float(diff.max()) > OUTLIER_TOL:
            failures.append(f"{name}: {key}: {over} of {r.size} elements "
                            f"beyond {TOL:g} (worst {float(diff.max()):.2e})")
    print(f"{name}: {len(got)} steps, worst loss/grad_norm relative error "
          f"{worst:.2e}; adapter: {elements - outliers} of {elements} "
          f"elements within {TOL:g} (worst {tensor_worst:.2e}); last loss "
          f"{got[-1][0]:.6f}")
    return failures


def check_plan(args, name, plan):
    """The plan's counts are uneven, add up to the global batch, and the
    prediction says the balance pays."""
    doc = json.loads(subprocess.run(tailor(args, "inspect", plan, "--json"),
                                    capture_output=True, text=True,
                                    check=True).stdout)
    ranks = doc["ranks"]
    counts = [r.get("micro_batches") for r in ranks]
    steps = [r.get("predicted_step_seconds") for r in ranks]
    balance = doc.get("balance") or {}
    failures = []
    if len(ranks) != RANKS or sum(c or 0 for c in counts) != GLOBAL or \
            len(set(counts)) < 2:
        failures.append(f"{name}: inspect --json gives micro_batches "
                        f"{counts}; uneven counts adding up to {GLOBAL} "
                        f"expected")
    if counts != [6, 3, 3]:
        failures.append(f"{name}: ranks at speeds 1 : 0.5 : 0.5 got "
                        f"{counts} micro-batches, 6 : 3 : 3 expected")
    if None in steps or not balance or \
            balance["predicted_step_seconds"] >= \
            balance["predicted_even_split_step_seconds"]:
        failures.append(f"{name}: predicted steps {steps}, balance "
                        f"{balance}: the balanced step should be predicted "
                        f"faster than the even split")
    else:
        print(f"{name}: micro-batches {counts}; predicted step per rank "
              f"{[round(s * 1e3, 3) for s in steps]} ms, balanced "
              f"{balance['predicted_step_seconds'] * 1e3:.3f} ms vs even "
              f"split {balance['predicted_even_split_step_seconds'] * 1e3:.3f}"
              f" ms, longest wait "
              f"{balance['predicted_max_wait_seconds'] * 1e3:.3f} ms")
    text = subprocess.run(tailor(args, "inspect", plan), capture_output=True,
                          text=True).stdout
    if "balance:" not in text or "rank 2 (cpu): 3 micro-batches" not in text:
        failures.append(f"{name}: inspect's text shows no per-rank balance")
    return failures


def check_refusals(args, onnx_path, base, cluster):
    failures = []
    cases = [("zero_stage", 2, "'zero2' cannot"),
             ("zero_stage", 3, "'zero3' cannot"),
             ("pipeline_stages", 2,
              "3 ranks do not divide into 2 pipeline stages")]
    for key, value, expected in cases:
        recipe = dict(base)
        recipe[key] = value
        work = os.path.join(args.work, f"refuse-{key}-{value}")
        plan, err = compile_plan(args, onnx_path, recipe, work, cluster)
        if plan or expected not in (err or ""):
            with open(os.path.join(work, "compile.log")) as f:
                log = f.read()
            if plan or expected not in log:
                failures.append(f"{key}: {value} on a mixed cluster: "
                                f"expected a refusal naming '{expected}', "
                                f"got {err or 'a plan'}")
    bad = {
        "unknown-kind": (CLUSTER.replace("kind: cpu, count: 1",
                                         "kind: cpux, count: 1"),
                         ":5:16: unknown device kind 'cpux'"),
        "bad-speed": (CLUSTER.replace("speed: 0.5", "speed: fast"),
                      ":6:50: bad value for 'speed'"),
        "unlinked": (CLUSTER + "  - name: other\n    devices:\n"
                     "      - {kind: cpu}\n", "has no link"),
    }
    for name, (text, expected) in bad.items():
        path = os.path.join(args.work, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(text)
        recipe_path = os.path.join(args.work, "refuse-recipe.yaml")
        tc.write_recipe(base, recipe_path)
        proc = subprocess.run(tailor(args, "compile", onnx_path, "--recipe",
                                     recipe_path, "--hardware", path, "-o",
                                     os.path.join(args.work, "x.tplan")),
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 1 or expected not in proc.stderr:
            failures.append(f"cluster file {name}: expected exit 1 and "
                            f"'{expected}', got {proc.returncode}: "
                            f"{tc.first_lines(proc.stderr)}")
    if not failures:
        print(f"refusals: zero2, zero3, 2 stages on 3 mixed ranks; "
              f"{len(bad)} bad cluster files named by file:line:column")
    return failures


def stage_layers(args, plan):
    doc = json.loads(subprocess.run(tailor(args, "inspect", plan, "--json"),
                                    capture_output=True, text=True,
                                    check=True).stdout)
    return [(s["pipeline_stage"]["first_layer"],
             s["pipeline_stage"]["last_layer"]) for s in doc["stages"]]


def check_layer_split(args, cluster, base, data):
    """A layer split over the mixed ranks: the slow ranks' stages get fewer
    layers than on equal ranks, and every step's loss and the adapter are
    one rank's."""
    onnx_path = tc.export_llama(args.work, 6)
    recipe = dict(base, gradient_accumulation_steps=PER_RANK,
                  pipeline_stages=RANKS)
    work1 = os.path.join(args.work, "split-world1")
    plan1, err = compile_plan(args, onnx_path,
                              dict(base, gradient_accumulation_steps=PER_RANK),
                              work1, "cpu")
    out1 = os.path.join(work1, "out")
    err = err or train(args, plan1, work1, 1, data, out1)
    works = {name: os.path.join(args.work, f"split-{name}")
             for name in ("even", "mixed")}
    plans = {}
    for name, hardware in (("even", f"{RANKS}xcpu"), ("mixed", cluster)):
        plans[name], e = compile_plan(args, onnx_path, recipe, works[name],
                                      hardware)
        err = err or e
    out = os.path.join(works["mixed"], "out")
    err = err or train(args, plans["mixed"], works["mixed"], RANKS, data,
                       out, check_header=False)
    if err:
        return [f"layer split: {err}"]
    even, mixed = stage_layers(args, plans["even"]), stage_layers(
        args, plans["mixed"])
    sizes = [last - first + 1 for first, last in mixed]
    failures = []
    if mixed == even or sizes[0] <= max(sizes[1:]):
        failures.append(f"layer split: stages of ranks at speeds 1 : 0.5 : "
                        f"0.5 hold layers {mixed}, on equal ranks {even}; "
                        f"the fast rank's stage should hold the most")
    else:
        print(f"layer split: stages hold layers {mixed} on ranks at speeds "
              f"1 : 0.5 : 0.5, {even} on equal ranks")
    with open(os.path.join(works["mixed"], "compile.log")) as f:
        print("  " + f.read().strip().splitlines()[-1])
    return failures + compare("layer split over mixed ranks", metrics(out),
                              metrics(out1), tc.load_safetensors(os.path.join(
                                  out, "adapter_model.safetensors")),
                              tc.load_safetensors(os.path.join(
                                  out1, "adapter_model.safetensors")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found")
        return 77
    onnx_path = os.path.join(args.work, "llama", "model.onnx")
    if not os.path.exists(onnx_path):
        tc.build_and_export(onnx_path, seed=0, family="llama")
    rows = tc.make_rows(n_rows=STEPS * GLOBAL * tc.B)
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(rows, data)
    cluster = os.path.join(args.work, "cluster.yaml")
    with open(cluster, "w") as f:
        f.write(CLUSTER)

    base = tc.recipe_defaults()
    base.update(lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                max_steps=STEPS, save_steps=5, max_grad_norm=1.0,
                zero_stage=0)
    one = dict(base, gradient_accumulation_steps=GLOBAL)
    work1 = os.path.join(args.work, "world1")
    plan1, err = compile_plan(args, onnx_path, one, work1, "cpu")
    out1 = os.path.join(work1, "out")
    err = err or train(args, plan1, work1, 1, data, out1)
    if err:
        print("FAIL:", err)
        return 1
    ref = metrics(out1)
    ref_tensors = tc.load_safetensors(
        os.path.join(out1, "adapter_model.safetensors"))

    failures = []
    for strategy, stage in (("ddp", 0), ("zero1", 1)):
        name = f"mixed-{strategy}"
        recipe = dict(base, gradient_accumulation_steps=PER_RANK,
                      zero_stage=stage)
        work = os.path.join(args.work, name)
        plan, err = compile_plan(args, onnx_path, recipe, work, cluster)
        out = os.path.join(work, "out")
        err = err or train(args, plan, work, RANKS, data, out)
        if err:
            failures.append(f"{name}: {err}")
            continue
        failures += check_plan(args, name, plan)
        failures += compare(name, metrics(out), ref, tc.load_safetensors(
            os.path.join(out, "adapter_model.safetensors")), ref_tensors)
        if strategy == "ddp":
            # The uneven run's checkpoint resumes on one rank.
            resumed = os.path.join(work, "resumed")
            shutil.rmtree(resumed, ignore_errors=True)
            shutil.copytree(out, resumed)
            err = train(args, plan1, work, 1, data, resumed,
                        resume=os.path.join(out, "checkpoint-5"))
            if err:
                failures.append(f"resume on one rank: {err}")
            else:
                got = metrics(resumed)
                failures += compare(
                    "mixed ddp step 5 -> 1 rank", got[5:], ref[5:],
                    tc.load_safetensors(os.path.join(
                        resumed, "adapter_model.safetensors")), ref_tensors)
    failures += check_layer_split(args, cluster, base, data)
    failures += check_refusals(args, onnx_path, base, cluster)
    for failure in failures:
        print("FAIL:", failure)
    print("summary:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
