#!/usr/bin/env python3
"""`tailor explore` says what `tailor compile` gives (issue: explore).

On two Hugging Face Llama exports (export_hf's seeded tiny Llama with 2
layers, and the same with 12), a LoRA recipe is explored on a CPU cluster of
two ranks (`--hardware 2xcpu`: weights x adapter x recomputation x sharding
x offload of parameters, optimizer and activations x micro batch for the
recipe's global batch x layer split over the two ranks). Checks:

  * for 50 configurations drawn at random (seeded) from all explore
    evaluated, `tailor compile` with the row's recipe keys gives a plan whose
    `tailor inspect --json` per-rank device_peak_bytes, host_peak_bytes and
    predicted_step_seconds (a layer split's: its largest rank and the
    pipeline's step) equal explore's exactly where explore compiled
    it whole (every row of the 2-layer model); on the 12-layer model explore
    first extends each configuration from 2 and 3 layers, whose parameters,
    gradients, optimizer state, constants, workspace and step time must
    equal compile's (the activation peak is reported, not asserted), and
    compiles whole what it reports: its front equals the one of a search
    that compiles everything whole (--extrapolate off);
  * the rows are the Pareto front: every listed row fits, none is beaten
    in both memory and time by another fitting configuration, fastest
    first, the first marked best; the JSON carries `evaluated` and each row
    `pass_pipeline`, which `tailor compile --pass-pipeline` turns into the
    same plan bytes as the row's recipe keys;
  * `--budget-gib` is respected: explore says a configuration fits exactly
    when its peak is within the budget (checked against a run without one),
    and `--fix` pins knobs (every evaluation has them);
  * `--top 2 -o DIR` writes the two fastest rows' plans, with their peaks;
  * an impossible budget ends with "nothing fits ... the smallest is" and
    exit 1; a bad --fix is an error naming the key;
  * on four ranks (`4xcpu`), splits of 2 stages come with 2 data-parallel
    replicas each (PP x DP) at the recipe's global batch, and compile gives
    those rows' figures;
  * on a cluster file of mixed CPU ranks (speeds 1 : 0.5 : 0.5), 12
    sampled rows equal compile's peaks and its predicted step (the slowest
    rank's, with the micro-batches divided by speed; a split's pipeline
    step), so explore prices what tailor-balance-ranks plans.

  explore.py --bin build/bin --work build/test/explore
"""

import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

SAMPLES = 50
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
           "down_proj"]


def tailor(bin_dir, *args, check=True):
    out = subprocess.run([os.path.join(bin_dir, "tailor"), *args],
                         capture_output=True, text=True, timeout=600)
    if check and out.returncode != 0:
        raise RuntimeError(f"tailor {' '.join(args[:2])} failed: "
                           f"{out.stderr.strip()[-800:]}")
    return out


def explore(args, model, recipe, *flags, hardware="2xcpu"):
    out = tailor(args.bin, "explore", model, "--recipe", recipe, "--hardware",
                 hardware, "--json", *flags)
    return json.loads(out.stdout)


def compiled_figures(args, model, recipe, keys, work, name,
                     hardware="2xcpu"):
    plan = os.path.join(work, f"{name}.tplan")
    tailor(args.bin, "compile", model, "--recipe", recipe, "--hardware",
           hardware, "-o", plan, *[f"{k}={v}" for k, v in keys.items()])
    doc = json.loads(tailor(args.bin, "inspect", plan, "--json").stdout)
    # Ranks of a layer split differ: the one with the largest device peak
    # is what must fit (every rank has the pipeline's step time).
    rank = dict(max(doc["ranks"], key=lambda r: r["device_peak_bytes"]))
    # Mixed devices: each rank predicts its own micro-batches; the step is
    # the slowest rank's.
    if doc.get("balance"):
        rank["predicted_step_seconds"] = \
            doc["balance"]["predicted_step_seconds"]
    return plan, rank


STATIC = ("parameters", "gradients", "optimizer_state", "constants",
          "workspace")


def differences(rank, row, tag):
    """Where compile's figures (`rank`) differ from explore's `row`."""
    return [f"{tag} {row['knobs']}: compile's {key} {rank[key]} != "
            f"explore's {row[key]}"
            for key in ("device_peak_bytes", "host_peak_bytes",
                        "predicted_step_seconds") if rank[key] != row[key]]


def rel(a, b):
    return abs(a - b) / abs(b) if b else float(a != b)


def check_samples(args, model, recipe, every, work, tag):
    """Rows compiled whole equal compile's figures exactly; rows extended
    from 2 and 3 layers have compile's parameters, gradients, optimizer
    state, constants, workspace and step time (to 1e-9), and their device
    peak is reported (not asserted: the activation peak is not linear in
    depth, which is why explore compiles what it reports whole)."""
    failures = []
    compiled = [r for r in every["rows"] if "error" not in r]
    rng = random.Random(7)
    sample = rng.sample(compiled, min(SAMPLES, len(compiled)))
    worst = 0.0
    for i, row in enumerate(sample):
        _, rank = compiled_figures(args, model, recipe, row["recipe"], work,
                                   f"{tag}-sample{i}")
        if not row["extrapolated"]:
            failures += differences(rank, row, tag)
            continue
        for key in STATIC:
            if rank["bytes"][key] != row["bytes"][key]:
                failures.append(f"{tag} {row['knobs']}: extended {key} "
                                f"{row['bytes'][key]} != {rank['bytes'][key]}")
        if rel(row["predicted_step_seconds"],
               rank["predicted_step_seconds"]) > 1e-9:
            failures.append(f"{tag} {row['knobs']}: extended step time "
                            f"{row['predicted_step_seconds']} != "
                            f"{rank['predicted_step_seconds']}")
        worst = max(worst, rel(row["device_peak_bytes"],
                               rank["device_peak_bytes"]))
    extended = sum(r["extrapolated"] for r in sample)
    splits = [r for r in compiled if r["knobs"]["split"] != "none"]
    if not splits or any(r["extrapolated"] for r in splits):
        failures.append(f"{tag}: {len(splits)} layer-split rows, all must "
                        "be compiled whole")
    for i, row in enumerate(rng.sample(splits, min(5, len(splits)))):
        _, rank = compiled_figures(args, model, recipe, row["recipe"], work,
                                   f"{tag}-split{i}")
        failures += differences(rank, row, tag)
    print(f"{tag}: {len(splits)} layer-split rows, 5 compiled alike")
    print(f"{tag}: {len(sample)} sampled configurations of "
          f"{every['evaluated']} compiled alike ({extended} extended from 2 "
          f"and 3 layers, worst device peak off by {worst:.1%}; "
          f"{len(failures)} differ)")
    return failures


def check_front(doc, every, budget, tag):
    """`doc` (with the budget) against `every` (the same space, no budget):
    fits exactly when the peak is within the budget, and the rows are the
    Pareto front of those, fastest first, the first marked best."""
    failures = []
    rows = doc["rows"]
    compiled = [r for r in every["rows"] if "error" not in r]
    fitting = [r for r in compiled if r["device_peak_bytes"] <= budget]
    # With figures extended from 2 and 3 layers, the count is of those
    # figures (only what is shown is compiled whole).
    if doc["fitting"] != len(fitting) and not doc["layers_extrapolated_to"]:
        failures.append(f"{tag}: {doc['fitting']} said to fit in {budget} B, "
                        f"{len(fitting)} have a peak within it")
    if not rows or not rows[0]["best"] or any(r["best"] for r in rows[1:]):
        failures.append(f"{tag}: the first row (only) must be marked best")
    times = [r["predicted_step_seconds"] for r in rows]
    if times != sorted(times):
        failures.append(f"{tag}: rows not fastest first: {times}")
    for r in rows:
        if not r["fits"] or r["device_peak_bytes"] > budget:
            failures.append(f"{tag}: row above the budget: {r['knobs']}")
        for o in fitting:
            if (o["device_peak_bytes"] < r["device_peak_bytes"] and
                    o["predicted_step_seconds"] < r["predicted_step_seconds"]):
                failures.append(f"{tag}: row {r['knobs']} is beaten by "
                                f"{o['knobs']}")
                break
    for o in fitting:
        if not any(r["device_peak_bytes"] <= o["device_peak_bytes"] and
                   r["predicted_step_seconds"] <= o["predicted_step_seconds"]
                   for r in rows):
            failures.append(f"{tag}: {o['knobs']} is on no row's side of "
                            "the front")
            break
    if doc["evaluated"] != every["evaluated"] or doc["evaluated"] < 100:
        failures.append(f"{tag}: evaluated {doc['evaluated']} vs "
                        f"{every['evaluated']} (--all)")
    return failures


def check_pipeline(args, model, recipe, row, work, tag):
    """The row's pass_pipeline compiles to the row's plan, byte for byte."""
    plan, _ = compiled_figures(args, model, recipe, row["recipe"], work,
                               f"{tag}-best")
    again = os.path.join(work, f"{tag}-best-pipeline.tplan")
    tailor(args.bin, "compile", model, "--recipe", recipe, "--hardware",
           "2xcpu", "-o", again, "--pass-pipeline", row["pass_pipeline"],
           *[f"{k}={v}" for k, v in row["recipe"].items()])
    with open(plan, "rb") as a, open(again, "rb") as b:
        if a.read() != b.read():
            return [f"{tag}: the best row's pass_pipeline gives other plan "
                    "bytes than its recipe keys"]
    return []


def check_fix_and_errors(args, model, recipe, budget, pins, tag):
    failures = []
    fixed = explore(args, model, recipe, *pins, "--all", "--fix",
                    "weights=nf4", "--fix", "gradient_checkpointing=selective",
                    "--budget-gib", repr(budget / 2**30))
    for r in fixed["rows"]:
        if r["knobs"]["weights"] != "nf4" or r["knobs"]["recompute"] != \
                "selective":
            failures.append(f"{tag}: --fix not respected: {r['knobs']}")
            break
    if not fixed["rows"]:
        failures.append(f"{tag}: --fix gave no configurations")
    split = explore(args, model, recipe, *pins, "--all", "--fix",
                    "pipeline_stages=2")
    if not split["rows"] or any(r["knobs"]["split"] != "2 stages"
                                for r in split["rows"]):
        failures.append(f"{tag}: --fix pipeline_stages=2 gave "
                        f"{sorted({r['knobs']['split'] for r in split['rows']})}")
    three = tailor(args.bin, "explore", model, "--recipe", recipe,
                   "--hardware", "2xcpu", "--fix", "pipeline_stages=3",
                   check=False)
    if three.returncode != 1 or "not a value this knob takes" not in \
            three.stderr:
        failures.append(f"{tag}: --fix pipeline_stages=3 on 2 ranks: exit "
                        f"{three.returncode}, {three.stderr.strip()[-300:]}")
    # --top 2 -o DIR writes the two fastest rows' plans, with their figures.
    top_dir = os.path.join(args.work, f"{tag}-top")
    front = explore(args, model, recipe, *pins, "--fix", "weights=nf4",
                    "--fix", "gradient_checkpointing=selective", "--top", "2",
                    "-o", top_dir)
    for i, row in enumerate(front["rows"][:2]):
        plan = os.path.join(top_dir, f"top-{i + 1}.tplan")
        if not os.path.exists(plan):
            failures.append(f"{tag}: --top 2 did not write {plan}")
            continue
        doc = json.loads(tailor(args.bin, "inspect", plan, "--json").stdout)
        if doc["ranks"][0]["device_peak_bytes"] != row["device_peak_bytes"]:
            failures.append(f"{tag}: {plan} holds "
                            f"{doc['ranks'][0]['device_peak_bytes']} B, its "
                            f"row {row['device_peak_bytes']} B")
    none = tailor(args.bin, "explore", model, "--recipe", recipe,
                  "--hardware", "2xcpu", "--budget-gib", "0.00001", "--fix",
                  "weights=nf4", "--fix", "adapter=lora", check=False)
    if none.returncode != 1 or "nothing fits" not in none.stderr or \
            "the smallest is" not in none.stderr:
        failures.append(f"{tag}: impossible budget: exit {none.returncode}, "
                        f"{none.stderr.strip()[-300:]}")
    bad = tailor(args.bin, "explore", model, "--recipe", recipe, "--hardware",
                 "2xcpu", "--fix", "colour=red", check=False)
    if bad.returncode != 1 or "--fix colour: not a knob" not in bad.stderr:
        failures.append(f"{tag}: bad --fix: exit {bad.returncode}, "
                        f"{bad.stderr.strip()[-300:]}")
    return failures


MIXED_CLUSTER = """name: mixed-cpus
nodes:
  - name: host
    devices:
      - {kind: cpu, count: 1, threads: 1}
      - {kind: cpu, count: 2, threads: 1, speed: 0.5}
"""


def check_cluster(args, model, recipe, work):
    """Explore on mixed devices prices what compile plans."""
    cluster = os.path.join(work, "mixed-cpus.yaml")
    with open(cluster, "w") as f:
        f.write(MIXED_CLUSTER)
    every = explore(args, model, recipe, "--all", "--fix", "adapter=lora",
                    hardware=cluster)
    compiled = [r for r in every["rows"] if "error" not in r]
    rng = random.Random(11)
    sample = rng.sample(compiled, min(12, len(compiled)))
    failures = []
    for i, row in enumerate(sample):
        _, rank = compiled_figures(args, model, recipe, row["recipe"], work,
                                   f"cluster-sample{i}", hardware=cluster)
        failures += differences(rank, row, "mixed cluster")
    print(f"mixed cluster: {len(sample)} sampled configurations of "
          f"{every['evaluated']} compiled alike ({len(failures)} differ)")
    return failures


def check_replicas(args, model, recipe, work):
    """On four ranks a split of 2 stages has 2 data-parallel replicas each
    (PP x DP): explore lists those rows beside the plain splits and DDP
    ones, at the same global batch, and compile gives their figures."""
    pins = ["--fix", "weights=fp32", "--fix", "adapter=lora", "--fix",
            "recompute=none", "--fix", "sharding=ddp", "--fix",
            "offload=none", "--fix", "offload_optimizer=none", "--fix",
            "offload_activations=false", "--fix", "compression=none"]
    every = explore(args, model, recipe, *pins, "--all", hardware="4xcpu")
    failures = []
    rows = [r for r in every["rows"] if "error" not in r]
    replicas = [r for r in rows
                if r["knobs"]["split"] == "2 stages x 2 replicas"]
    if not replicas:
        failures.append("4xcpu: no '2 stages x 2 replicas' row among "
                        f"{sorted({r['knobs']['split'] for r in rows})}")
    global_batch = {int(r["recipe"]["micro_batch_size"]) *
                    int(r["recipe"]["gradient_accumulation_steps"]) *
                    (2 if r in replicas else
                     1 if r["knobs"]["split"] != "none" else 4)
                    for r in rows}
    if len(global_batch) != 1:
        failures.append(f"4xcpu: rows at different global batches "
                        f"{sorted(global_batch)}")
    for i, row in enumerate(replicas):
        _, rank = compiled_figures(args, model, recipe, row["recipe"], work,
                                   f"replicas{i}", hardware="4xcpu")
        failures += differences(rank, row, "4xcpu")
    print(f"4xcpu: {len(replicas)} rows of 2 stages x 2 replicas (of "
          f"{len(rows)} that compile; global batch {sorted(global_batch)}) "
          f"compiled alike ({len(failures)} differ)")
    return failures


def check_model(args, layers, pins):
    work = os.path.join(args.work, f"llama{layers}")
    os.makedirs(work, exist_ok=True)
    model = tc.export_llama(args.work, layers)
    recipe = tc.recipe_defaults()
    recipe.update(lora_target_modules=TARGETS, sequence_len=32,
                  micro_batch_size=4, gradient_accumulation_steps=1)
    recipe_path = os.path.join(work, "recipe.yaml")
    tc.write_recipe(recipe, recipe_path)
    every = explore(args, model, recipe_path, *pins, "--all")
    # A budget that cuts the space: the median device peak.
    peaks = sorted(r["device_peak_bytes"] for r in every["rows"]
                   if "error" not in r)
    budget = peaks[len(peaks) // 2]
    gib = repr(budget / 2**30)
    front = explore(args, model, recipe_path, *pins, "--budget-gib", gib)
    # The reference: every configuration compiled whole.
    whole = explore(args, model, recipe_path, *pins, "--all", "--budget-gib",
                    gib, "--extrapolate", "off")
    tag = f"llama{layers}"
    print(f"{tag}: {front['evaluated']} configurations in "
          f"{front['seconds']:.1f} s ({front['compiled_whole']} compiled "
          f"whole; all whole: {whole['seconds']:.1f} s), {front['fitting']} "
          f"fit in {budget} B, {len(front['rows'])} on the front")
    failures = check_front(front, whole, budget, tag)
    if any(r["extrapolated"] for r in front["rows"]):
        failures.append(f"{tag}: a row on the front was not compiled whole")
    failures += check_samples(args, model, recipe_path, every, work, tag)
    failures += check_pipeline(args, model, recipe_path, front["rows"][0],
                               work, tag)
    failures += check_fix_and_errors(args, model, recipe_path, budget, pins,
                                     tag)
    if layers == 2:
        failures += check_cluster(args, model, recipe_path, work)
        failures += check_replicas(args, model, recipe_path, work)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = []
    # The 2-layer model's space is all of it; the 12-layer one's is the LoRA
    # third without activation and optimizer offload (a quicker run).
    failures += check_model(args, 2, [])
    failures += check_model(args, 12, ["--fix", "adapter=lora", "--fix",
                                       "offload_activations=false", "--fix",
                                       "offload_optimizer=none"])
    for f in failures:
        print("FAIL:", f)
    print("explore:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
