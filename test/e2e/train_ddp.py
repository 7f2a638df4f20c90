#!/usr/bin/env python3
"""Data parallelism gives the numbers one rank gives (issue: many ranks).

The tiny Hugging Face Llama exported by torch.onnx is trained for 20 steps
with LoRA and with full fine-tuning at the same global batch (micro-batch
2 x 4 sequences per step):

  * world 1: `tailor compile` for the CPU, gradient_accumulation_steps 4;
  * DDP (zero_stage: 0) at world 2 (`--hardware 2xcpu`, accumulation 2),
    world 4 (`4xcpu`, accumulation 1) and two "nodes" of two ranks
    (`2x2xcpu`); ZeRO-1, 2 and 3 (zero_stage: 1..3) at world 2 and 4;
    hybrid sharding (fsdp_sharding_strategy: HYBRID_SHARD) on 2x2xcpu;
    all launched with `mpirun --oversubscribe -np N tailor train`;
  * QLoRA (NF4 base weights) under ZeRO-3 at world 2 and 4, the NF4 bytes
    sharded too;
  * a run that changes world size and strategy as it resumes: steps 1-7
    with ZeRO-3 on 2 ranks, 8-14 with DDP on 4, 15-20 on one rank;
  * full fine-tuning under ZeRO-3 with gradient checkpointing at world 2
    (no more activation bytes than without it);
  * full fine-tuning under ZeRO-3 with ZeRO++'s int8 weight gathers
    (zero_quantized_weights) at world 2 and 4: losses within 5e-3 of world
    1, the predicted (and fewer) bytes sent;
  * full fine-tuning under ZeRO-2 with ZeRO++'s int8 gradient
    reduce-scatters (zero_quantized_gradients: an all-to-all of int8
    chunks) at world 2 and 4, and hybrid on 2 x 2: losses within 2e-3 of
    the f32 run's, the predicted (and fewer) bytes sent; and with int4
    chunks (zero_quantized_gradients_bits: 4) at world 2: losses within
    QGZ4_TOL of the f32 run's but further from them than int8's, the
    predicted bytes, fewer than int8's;
  * full fine-tuning under ZeRO-3 with ZeRO++'s hierarchical partitions
    (zero_hpz_partition_size: 2) on 2 x 2, alone, with qwZ and with
    overlap_comm: equal to
    plain ZeRO-3's run on 2 x 2 bit for bit, the predicted bytes per group
    (the world's fewer, the backward's gathers within the node);
  * full fine-tuning under ZeRO-2 at world 2 and hybrid on 2 x 2 launched
    by `torchrun --standalone --nproc-per-node N --no-python tailor train`
    (CPU ranks then communicate through Gloo), equal to the mpirun runs
    bit for bit.

Checks: every step's loss and grad_norm (rank 0's metrics.jsonl, averaged
over the ranks) equal world 1's to 1e-5 relative, and the final adapter's
(model's) tensors to 1e-5 of each tensor's scale but for at most 0.5% of
elements, AdamW's near-zero-gradient elements, within 1e-3; each rank
allocated exactly the plan's arenas (`memory N B allocated` against
inspect's total); the bytes each step sent, as the communicator counted
them (metrics.jsonl `bytes_sent`), equal the plan's prediction (inspect
--json) exactly; ZeRO's optimizer state per rank is 1/N of DDP's (plus
padding), and ZeRO-3's parameters too (QLoRA's NF4 bytes included); kill
-9 of one rank mid-run ends every rank within 60 s with a message naming
it, the last complete checkpoint intact; and a plan for 4 ranks launched on
2 fails with exit status 1 and a message that says so.

  train_ddp.py --bin build/bin --work build/test/train-ddp
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

STEPS = 20
GLOBAL_MICRO_BATCHES = 4
TOL = 1e-5
# ZeRO++'s int8 weight gathers compute with weights rounded to int8 blocks
# of 64 (a step of absmax / 127): measured 8.3e-5 relative at most over the
# 20 steps. A run that learns nothing is 2.3e-3 away (QGZ4_TOL's note), so
# the limit, with margin, stays well below it.
QWZ_TOL = 5e-4
# ZeRO++'s int8 gradient reduce-scatters round each rank's gradient to int8
# blocks of 64 before the average; AdamW then steps on slightly different
# gradients, and the losses drift apart over the steps: 1.55e-4 at most
# (ZeRO-2 at world 2 and 4, hybrid 2 x 2).
QGZ_TOL = 5e-4
# int4 blocks (a step of absmax / 7 instead of absmax / 127) move the
# gradients about 18x more than int8's, and the losses drift further:
# 5.3e-4 at most over the 20 steps at ZeRO-2 world 2 (int8: 1.5e-4). A run
# that learns nothing (learning_rate 0) is 2.3e-3 away, so the limit is
# kept below that: a wire that lost the gradients fails it.
QGZ4_TOL = 1e-3
# Averaging over ranks sums the micro-batches' gradients in another order
# than accumulating them on one rank (last-bit differences), and AdamW turns
# an element whose gradient is near zero into a step of about lr whatever
# its size: such elements (a handful: 1 of 512 of a LoRA A, 3 of 16384 of
# the embedding seen here) may differ up to OUTLIER_TOL of the tensor's
# scale; all others must agree to TOL.
OUTLIER_SHARE = 5e-3
OUTLIER_TOL = 1e-3


def compile_plan(args, onnx_path, recipe, work, hardware):
    os.makedirs(work, exist_ok=True)
    recipe_path = os.path.join(work, "recipe.yaml")
    tc.write_recipe(recipe, recipe_path)
    plan = os.path.join(work, "plan.tplan")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", onnx_path,
                      "--recipe", recipe_path, "--hardware", hardware,
                      "-o", plan], 900, os.path.join(work, "tailor.log"))
    return (plan, None) if ok else (None, "compile: " + msg)


def torchrun(ranks):
    """torchrun's launch of `ranks` local processes (a free rendezvous port;
    tailor's own rendezvous takes MASTER_PORT + 1), tailor run directly."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(ranks), "--no-python"]


def train(args, plan, work, ranks, data, out=None, max_steps=STEPS,
          resume=None, launcher="mpirun"):
    out = out or os.path.join(work, "out")
    if resume is None:
        shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
           "--max-steps", str(max_steps), "--output-dir", out, "--threads",
           "1"]
    if resume:
        cmd += ["--resume", resume]
    if ranks > 1:
        cmd = (torchrun(ranks) if launcher == "torchrun" else
               tc.mpirun(ranks)) + cmd
    ok, msg = tc.run(cmd, 900, os.path.join(work, "tailor.log"))
    if ok:
        match = re.search(r"^memory (\d+) B allocated", msg, re.M)
        with open(os.path.join(out, "allocated.txt"), "w") as f:
            f.write(match.group(1) if match else "")
    return (out, None) if ok else (None, f"train at world {ranks}: " + msg)


def world_recipe(base, ranks, strategy):
    recipe = dict(base)
    recipe["gradient_accumulation_steps"] = GLOBAL_MICRO_BATCHES // ranks
    if strategy == "hybrid":
        recipe.pop("zero_stage", None)
        recipe["fsdp_sharding_strategy"] = "HYBRID_SHARD"
    else:
        recipe["zero_stage"] = {"ddp": 0, "zero1": 1, "zero2": 2,
                                "zero3": 3}[strategy]
    return recipe


def model_file(recipe):
    return ("adapter_model.safetensors" if recipe["adapter"] != "full"
            else "model.safetensors")


def run_world(args, onnx_path, data, base, name, hardware, ranks,
              strategy="ddp", launcher="mpirun"):
    recipe = world_recipe(base, ranks, strategy)
    work = os.path.join(args.work, name)
    plan, err = compile_plan(args, onnx_path, recipe, work, hardware)
    if err:
        return None, err
    out, err = train(args, plan, work, ranks, data, launcher=launcher)
    if err:
        return None, err
    rows = [m for _, m in sorted(tc.read_metrics(out).items())]
    metrics = [(m["loss"], m["grad_norm"]) for m in rows]
    tensors = tc.load_safetensors(os.path.join(out, model_file(recipe)))
    doc = json.loads(subprocess.run(
        [os.path.join(args.bin, "tailor"), "inspect", plan, "--json"],
        capture_output=True, text=True, check=True).stdout)
    with open(os.path.join(out, "allocated.txt")) as f:
        allocated = f.read().strip()
    return dict(metrics=metrics, tensors=tensors, plan=plan, doc=doc,
                sent=[m.get("bytes_sent") for m in rows],
                sent_by_group=[m.get("bytes_sent_by_group") for m in rows],
                allocated=int(allocated) if allocated else None), None


def compare(name, got, ref):
    failures = []
    if len(got["metrics"]) != len(ref["metrics"]) or not got["metrics"]:
        return [f"{name}: {len(got['metrics'])} steps logged, world 1 "
                f"logged {len(ref['metrics'])}"]
    worst = 0.0
    for step, ((loss, norm), (rloss, rnorm)) in enumerate(
            zip(got["metrics"], ref["metrics"]), start=1):
        for what, a, b in (("loss", loss, rloss), ("grad_norm", norm, rnorm)):
            err = abs(a - b) / max(abs(b), 1e-12)
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"{name}: step {step} {what} {a} vs world 1's "
                                f"{b} (relative {err:.2e})")
    import numpy as np

    tensor_worst, outliers, elements = 0.0, 0, 0
    for key, ref_tensor in ref["tensors"].items():
        if key not in got["tensors"]:
            failures.append(f"{name}: adapter lacks {key}")
            continue
        g = got["tensors"][key].astype(np.float64)
        r = ref_tensor.astype(np.float64)
        scale = float(np.abs(r).max()) or 1.0
        diff = np.abs(g - r) / scale
        over = int((diff > TOL).sum())
        outliers += over
        elements += r.size
        tensor_worst = max(tensor_worst, float(diff.max()))
        if over > OUTLIER_SHARE * r.size or float(diff.max()) > OUTLIER_TOL:
            failures.append(f"{name}: {key}: {over} of {r.size} elements "
                            f"beyond {TOL:g} (worst {float(diff.max()):.2e})")
    print(f"{name}: {len(got['metrics'])} steps, worst loss/grad_norm "
          f"relative error {worst:.2e}; tensors: {elements - outliers} of "
          f"{elements} elements within {TOL:g}, worst {tensor_worst:.2e}; "
          f"last loss {got['metrics'][-1][0]:.6f}")
    return failures


def check_bytes_sent(name, result, ranks):
    """Every step sent exactly the bytes the plan predicts, and each rank
    allocated exactly the plan's arenas."""
    doc = result["doc"]
    if result["allocated"] != doc["memory"]["total"]:
        return [f"{name}: the trainer allocated {result['allocated']} bytes "
                f"per rank, the plan's arenas hold {doc['memory']['total']}"]
    predicted = doc["ranks"][0]["predicted_bytes_sent_per_step"]
    if len(doc["ranks"]) != ranks:
        return [f"{name}: inspect --json lists {len(doc['ranks'])} ranks"]
    wrong = [(step, sent) for step, sent in enumerate(result["sent"], 1)
             if sent != predicted]
    if predicted <= 0 or wrong:
        return [f"{name}: predicted {predicted} bytes sent per step; the "
                f"communicator counted {wrong[:3]} (step, bytes)"]
    print(f"{name}: {len(result['sent'])} steps sent {predicted} bytes each "
          f"({predicted / 2**10:.1f} KiB), as predicted; "
          f"{result['allocated']} B allocated per rank, as planned")
    return []


def check_sharded_memory(name, result, ddp, ranks, strategy):
    """ZeRO keeps 1/N of DDP's optimizer state per rank (plus padding), and
    ZeRO-3 1/N of its trainable parameters."""
    failures = []
    got = result["doc"]["memory"]["optimizer_state"]
    whole = ddp["doc"]["memory"]["optimizer_state"]
    # Buckets pad members to 64 elements and chunks to 64 elements.
    if not whole / ranks <= got <= whole / ranks * 1.25 + 4096:
        failures.append(f"{name}: {got} bytes of optimizer state per rank, "
                        f"DDP's {whole} over {ranks} ranks is "
                        f"{whole / ranks:.0f}")
    line = f"{name}: optimizer state {got} B per rank (DDP {whole} B)"
    if strategy == "zero3":
        sharding = result["doc"]["sharding"]
        per_param = sharding["bytes_per_trainable_parameter"]["parameters"]
        if not 4 / ranks <= per_param <= 4 / ranks * 1.25 + 0.05:
            failures.append(f"{name}: {per_param:.3f} bytes of parameters "
                            f"per trainable parameter, expected 4/{ranks}")
        line += (f"; parameters {per_param:.3f} B per trainable parameter "
                 f"(DDP 4)")
    print(line)
    return failures



def check_rank_death(args, onnx_path, data, base):
    """kill -9 of rank 1 mid-run: every rank is gone within 60 s, the
    message names the lost rank, and the last checkpoint is complete."""
    import signal
    import time

    recipe = world_recipe(base, 2, "ddp")
    recipe.update(max_steps=100000, save_steps=5)
    work = os.path.join(args.work, "rank-death")
    plan, err = compile_plan(args, onnx_path, recipe, work, "2xcpu")
    if err:
        return [f"rank death: {err}"]
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.Popen(
        tc.mpirun(2) + [os.path.join(args.bin, "tailor"), "train", plan,
                     "--data", data, "--output-dir", out, "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.isdir(
            os.path.join(out, "checkpoint-10")):
        time.sleep(0.05)
    victim = tc.rank_pid(proc.pid, 1)
    if victim is None or proc.poll() is not None:
        proc.kill()
        return [f"rank death: no rank 1 to kill (mpirun {proc.poll()})"]
    os.kill(victim, signal.SIGKILL)
    killed = time.time()
    try:
        text, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        return ["rank death: the ranks still ran 90 s after rank 1 died"]
    elapsed = time.time() - killed
    failures = []
    if proc.returncode == 0 or elapsed > 60 or "rank 1" not in text:
        failures.append(f"rank death: exit {proc.returncode} after "
                        f"{elapsed:.1f} s: {tc.first_lines(text)}")
    complete = sorted(
        (int(d.split("-")[1]), d) for d in os.listdir(out)
        if d.startswith("checkpoint-") and d.split("-")[1].isdigit()
        and os.path.exists(os.path.join(out, d, "trainer_state.json")))
    if not complete:
        failures.append("rank death: no complete checkpoint left")
    else:
        last = os.path.join(out, complete[-1][1])
        tc.load_safetensors(os.path.join(last, model_file(recipe)))
        tc.load_safetensors(os.path.join(last, "optimizer.safetensors"))
    line = next((l for l in text.splitlines() if "rank 1" in l), "")
    print(f"rank death: all ranks exited {elapsed:.1f} s after kill -9 of "
          f"rank 1 (exit {proc.returncode}: {line.strip()}); last complete "
          f"checkpoint {complete[-1][1] if complete else None} reads back")
    return failures


def check_trace(args, plan, data, comm_track=False):
    """--trace on several ranks records the collectives with the kernels
    (with `comm_track`: on the communication stream's track, tid 2)."""
    work = os.path.join(args.work, "trace-comm" if comm_track else "trace")
    trace = os.path.join(work, "trace.json")
    _, err = train(args, plan, work, 2, data, out=os.path.join(work, "out"),
                   max_steps=2)
    if err:
        return [f"trace: {err}"]
    cmd = tc.mpirun(2) + [os.path.join(args.bin, "tailor"), "train", plan,
                       "--data", data, "--max-steps", "2", "--output-dir",
                       os.path.join(work, "out2"), "--threads", "1",
                       "--trace", trace]
    ok, msg = tc.run(cmd, 300, os.path.join(work, "tailor.log"))
    if not ok:
        return [f"trace: {msg}"]
    with open(trace) as f:
        slices = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    names = {e["name"] for e in slices}
    missing = {"reduce_scatter", "all_gather", "all_reduce"} - names
    if not names & {"adamw", "adamw_multi"}:  # one update, or many at once
        missing.add("adamw")
    if missing:
        return [f"trace: no {sorted(missing)} slices in {trace}"]
    if comm_track:
        on_comm = [e for e in slices
                   if e["name"] == "reduce_scatter" and e.get("tid") == 2]
        if not on_comm:
            return [f"trace: no reduce_scatter slice on the communication "
                    f"track (tid 2) in {trace}"]
        print(f"trace: {len(on_comm)} reduce_scatter slices on the "
              f"communication stream's track")
        return []
    print(f"trace: {len(names)} kinds of slices, collectives included")
    return []


def check_world_mismatch(args, plan4):
    proc = subprocess.run(tc.mpirun(2) + [
        os.path.join(args.bin, "tailor"), "train", plan4, "--data", "dummy",
        "--max-steps", "1", "--output-dir",
        os.path.join(args.work, "mismatch")], capture_output=True, text=True,
        timeout=300)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0 or "4 ranks" not in text:
        return [f"a 4-rank plan on 2 ranks: exit {proc.returncode}, "
                f"{tc.first_lines(text)}"]
    line = next((l for l in text.splitlines() if "4 ranks" in l), "")
    print(f"a 4-rank plan on 2 ranks: exit {proc.returncode}: "
          f"{line.strip()}")
    return []


def check_recipe(args, onnx_path, data, base, label):
    failures = []
    ref, err = run_world(args, onnx_path, data, base, f"{label}-world1", "cpu",
                         1)
    if err:
        return [f"{label} world 1: {err}"], None
    results = {}
    for name, hardware, ranks, strategy in (
            (f"{label}-world2", "2xcpu", 2, "ddp"),
            (f"{label}-world4", "4xcpu", 4, "ddp"),
            (f"{label}-2x2", "2x2xcpu", 4, "ddp"),
            (f"{label}-zero1-world2", "2xcpu", 2, "zero1"),
            (f"{label}-zero1-world4", "4xcpu", 4, "zero1"),
            (f"{label}-zero2-world2", "2xcpu", 2, "zero2"),
            (f"{label}-zero2-world4", "4xcpu", 4, "zero2"),
            (f"{label}-zero3-world2", "2xcpu", 2, "zero3"),
            (f"{label}-zero3-world4", "4xcpu", 4, "zero3"),
            (f"{label}-hybrid-2x2", "2x2xcpu", 4, "hybrid")):
        got, err = run_world(args, onnx_path, data, base, name, hardware,
                             ranks, strategy)
        if err:
            failures.append(f"{name}: {err}")
            continue
        results[name] = got
        failures += compare(name, got, ref)
        failures += check_bytes_sent(name, got, ranks)
        ddp = results.get(f"{label}-world{ranks}")
        if strategy != "ddp" and ddp:
            shards = 2 if strategy == "hybrid" else ranks
            failures += check_sharded_memory(name, got, ddp, shards,
                                             strategy)
    return failures, dict(results, world1=ref)


def check_torchrun(args, onnx_path, data, base, ref, by_mpirun):
    """CPU ranks launched by torchrun communicate through Gloo: ZeRO-2 on 2
    ranks and hybrid 2 x 2 (split groups) give world 1's losses and
    tensors, send the predicted bytes, and equal mpirun's run bit for bit
    (the same reductions in the same order)."""
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError:
        print("torchrun: skipped (no torch.distributed.run in this Python)")
        return []
    failures = []
    for name, hardware, ranks, strategy in (
            ("full-zero2-world2", "2xcpu", 2, "zero2"),
            ("full-hybrid-2x2", "2x2xcpu", 4, "hybrid")):
        got, err = run_world(args, onnx_path, data, base, name + "-torchrun",
                             hardware, ranks, strategy, launcher="torchrun")
        if err:
            failures.append(f"{name} under torchrun: {err}")
            continue
        failures += compare(name + "-torchrun", got, ref)
        failures += check_bytes_sent(name + "-torchrun", got, ranks)
        mpi = by_mpirun.get(name)
        if mpi is None:
            continue
        same = got["metrics"] == mpi["metrics"] and all(
            (got["tensors"][k] == t).all() for k, t in mpi["tensors"].items())
        if not same:
            failures.append(f"{name}: torchrun (gloo) and mpirun (MPI) runs "
                            f"differ")
        else:
            print(f"{name}-torchrun: losses, norms and tensors equal "
                  f"mpirun's bit for bit")
    return failures


def check_quantized_weights(args, onnx_path, data, base, ref, unquantized):
    """ZeRO++'s quantized weight gathers (zero_quantized_weights: ZeRO-3's
    gathers send int8 blocks): at world 2 and 4 every step's loss stays
    within QWZ_TOL of world 1's (the weights computed with are int8 blocks of
    64, so not to 1e-5), every step sends the predicted bytes, fewer than
    the f32 gathers' run sends."""
    failures = []
    for name, hardware, ranks in (("full-zero3-qwz-world2", "2xcpu", 2),
                                  ("full-zero3-qwz-world4", "4xcpu", 4)):
        recipe = dict(base, zero_quantized_weights=True)
        got, err = run_world(args, onnx_path, data, recipe, name, hardware,
                             ranks, "zero3")
        if err:
            failures.append(f"{name}: {err}")
            continue
        worst = max(abs(a[0] - b[0]) / abs(b[0])
                    for a, b in zip(got["metrics"], ref["metrics"]))
        if len(got["metrics"]) != len(ref["metrics"]) or worst > QWZ_TOL:
            failures.append(f"{name}: losses within {worst:.2e} of world 1's "
                            f"(limit {QWZ_TOL:g})")
        failures += check_bytes_sent(name, got, ranks)
        f32 = unquantized.get(f"full-zero3-world{ranks}")
        if f32 and not got["sent"][0] < f32["sent"][0]:
            failures.append(f"{name}: {got['sent'][0]} bytes a step, not "
                            f"fewer than the f32 gathers' {f32['sent'][0]}")
        if f32:
            print(f"{name}: losses within {worst:.2e} of world 1's; "
                  f"{got['sent'][0]} bytes sent a step against "
                  f"{f32['sent'][0]} with f32 gathers "
                  f"({f32['sent'][0] / got['sent'][0]:.2f}x fewer)")
    return failures


def identical(got, ref):
    """Whether two runs' losses, grad norms and final tensors are equal bit
    for bit."""
    return got["metrics"] == ref["metrics"] and set(got["tensors"]) == set(
        ref["tensors"]) and all((got["tensors"][k] == t).all()
                                for k, t in ref["tensors"].items())


def check_bytes_by_group(name, result):
    """Every step sent, per kind of group, exactly the bytes inspect
    predicts for it; returns the failures and the figures."""
    predicted = result["doc"]["ranks"][0][
        "predicted_bytes_sent_by_group_per_step"]
    wrong = [(step, sent) for step, sent in
             enumerate(result["sent_by_group"], 1) if sent != predicted]
    if wrong:
        return [f"{name}: predicted {predicted} bytes per step by group; "
                f"the communicators counted {wrong[:2]} (step, bytes)"], \
            predicted
    return [], predicted


def check_hierarchical_partition(args, onnx_path, data, base):
    """ZeRO++'s hierarchical partitions (zero_hpz_partition_size: 2 on two
    "nodes" of two ranks): each rank keeps its node's part of every forward
    gather and backward gathers within the node. The gathered values are
    the same bytes, so losses, grad norms and final tensors equal plain
    ZeRO-3's on 2 x 2 bit for bit (and, with qwZ's int8 forward gathers,
    the plain qwZ run's: the parts keep the decoded f32 values; with
    overlap_comm, whose prefetch issues the node's gathers a bucket ahead
    on the communication stream too, plain ZeRO-3's with overlap). Every
    step sends, per group, exactly the predicted bytes; the world group's
    (which crosses nodes) fall, the backward's gathers moving to the node
    group; the plan's activations grow by the parts, which inspect names."""
    failures = []
    for suffix, extra in (("", {}),
                          ("-qwz", {"zero_quantized_weights": True}),
                          ("-overlap", {"overlap_comm": "true",
                                        "ddp_bucket_cap_mb": 0.1})):
        plain_name = f"full-zero3{suffix}-2x2"
        name = f"full-zero3-hpz{suffix}-2x2"
        plain, err = run_world(args, onnx_path, data, dict(base, **extra),
                               plain_name, "2x2xcpu", 4, "zero3")
        if err:
            failures.append(f"{plain_name}: {err}")
            continue
        hpz, err = run_world(args, onnx_path, data,
                             dict(base, zero_hpz_partition_size=2, **extra),
                             name, "2x2xcpu", 4, "zero3")
        if err:
            failures.append(f"{name}: {err}")
            continue
        if not identical(hpz, plain):
            worst = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in
                        zip(hpz["metrics"], plain["metrics"]))
            failures.append(f"{name}: differs from {plain_name} (losses "
                            f"within {worst:.2e})")
        failures += check_bytes_sent(name, hpz, 4)
        failures += check_bytes_sent(plain_name, plain, 4)
        more, by_group = check_bytes_by_group(name, hpz)
        failures += more
        more, plain_by_group = check_bytes_by_group(plain_name, plain)
        failures += more
        if not (by_group.get("node", 0) > 0 and
                by_group.get("world", 0) < plain_by_group.get("world", 0)):
            failures.append(f"{name}: bytes by group {by_group}; plain "
                            f"ZeRO-3 {plain_by_group}: the world's should "
                            f"fall, the node's appear")
        parts = hpz["doc"]["ranks"][0]["hpz_secondary_bytes"]
        added = (hpz["doc"]["memory"]["activations"] -
                 plain["doc"]["memory"]["activations"])
        if parts <= 0 or added <= 0 or added > parts:
            failures.append(f"{name}: {parts} B of hpZ parts, activations "
                            f"{added} B more than plain ZeRO-3's")
        print(f"{name}: losses, norms and tensors equal {plain_name}'s bit "
              f"for bit; bytes sent a step by group {by_group} against "
              f"{plain_by_group}, as predicted; hpZ parts {parts} B, "
              f"activations {added} B more per rank")
    return failures


def check_quantized_gradients(args, onnx_path, data, base, unquantized):
    """ZeRO++'s quantized gradient reduce-scatters (zero_quantized_gradients:
    ZeRO-2's reduce-scatters become int8 chunks sent by an all-to-all and
    reduced in f32; hybrid's within each node, the all-reduce across nodes
    staying f32): ZeRO-2 at world 2 and 4 and hybrid on 2 x 2, every step's
    loss within QGZ_TOL (relative) of the f32 run's of the same layout,
    every step sending the predicted bytes, fewer than the f32 run sends,
    which is what inspect predicts for the plan without quantization."""
    failures = []
    for name, hardware, ranks, strategy, f32_name in (
            ("full-zero2-qgz-world2", "2xcpu", 2, "zero2", "full-zero2-world2"),
            ("full-zero2-qgz-world4", "4xcpu", 4, "zero2", "full-zero2-world4"),
            ("full-hybrid-qgz-2x2", "2x2xcpu", 4, "hybrid",
             "full-hybrid-2x2")):
        f32 = unquantized.get(f32_name)
        if not f32:
            failures.append(f"{name}: no f32 run {f32_name} to compare with")
            continue
        recipe = dict(base, zero_quantized_gradients=True)
        got, err = run_world(args, onnx_path, data, recipe, name, hardware,
                             ranks, strategy)
        if err:
            failures.append(f"{name}: {err}")
            continue
        if len(got["metrics"]) != len(f32["metrics"]):
            failures.append(f"{name}: {len(got['metrics'])} steps logged, "
                            f"the f32 run logged {len(f32['metrics'])}")
            continue
        worst = max(abs(a[0] - b[0]) / abs(b[0])
                    for a, b in zip(got["metrics"], f32["metrics"]))
        if worst > QGZ_TOL:
            failures.append(f"{name}: losses within {worst:.2e} of the f32 "
                            f"run's (limit {QGZ_TOL:g})")
        failures += check_bytes_sent(name, got, ranks)
        # inspect's figure without quantization is what the f32 run sent.
        without = got["doc"]["ranks"][0].get(
            "predicted_bytes_sent_per_step_unquantized")
        if without != f32["sent"][0]:
            failures.append(f"{name}: inspect predicts {without} bytes a "
                            f"step with f32 reduce-scatters; the f32 run "
                            f"sent {f32['sent'][0]}")
        if not got["sent"][0] < f32["sent"][0]:
            failures.append(f"{name}: {got['sent'][0]} bytes a step, not "
                            f"fewer than the f32 reduce-scatters' "
                            f"{f32['sent'][0]}")
        print(f"{name}: losses within {worst:.2e} of the f32 run's "
              f"(last {got['metrics'][-1][0]:.6f} against "
              f"{f32['metrics'][-1][0]:.6f}); {got['sent'][0]} bytes sent a "
              f"step against {f32['sent'][0]} with f32 reduce-scatters "
              f"({f32['sent'][0] / got['sent'][0]:.2f}x fewer)")
        if name == "full-zero2-qgz-world2":
            failures += check_quantized_overlap(args, onnx_path, data,
                                                recipe, got)
            failures += check_quantized_gradients_int4(
                args, onnx_path, data, base, f32, got, worst)
    return failures


def check_quantized_gradients_int4(args, onnx_path, data, base, f32, int8,
                                   int8_worst):
    """zero_quantized_gradients_bits: 4 at ZeRO-2 world 2 (int4 codes two a
    byte, one f32 scale per block of 64): every step's loss within
    QGZ4_TOL (relative) of the f32 run's of the same layout, but further
    from it than the int8 run's (the wire really is coarser), every step
    sending the predicted bytes, fewer than int8's, and inspect's figure
    without quantization the f32 run's bytes."""
    name = "full-zero2-qgz-int4-world2"
    recipe = dict(base, zero_quantized_gradients=True,
                  zero_quantized_gradients_bits=4)
    got, err = run_world(args, onnx_path, data, recipe, name, "2xcpu", 2,
                         "zero2")
    if err:
        return [f"{name}: {err}"]
    if len(got["metrics"]) != len(f32["metrics"]):
        return [f"{name}: {len(got['metrics'])} steps logged, the f32 run "
                f"logged {len(f32['metrics'])}"]
    failures = check_bytes_sent(name, got, 2)
    worst = max(abs(a[0] - b[0]) / abs(b[0])
                for a, b in zip(got["metrics"], f32["metrics"]))
    if worst > QGZ4_TOL:
        failures.append(f"{name}: losses within {worst:.2e} of the f32 "
                        f"run's (limit {QGZ4_TOL:g})")
    if not worst > int8_worst:
        failures.append(f"{name}: losses within {worst:.2e} of the f32 "
                        f"run's, no further than int8's {int8_worst:.2e}")
    without = got["doc"]["ranks"][0].get(
        "predicted_bytes_sent_per_step_unquantized")
    if without != f32["sent"][0]:
        failures.append(f"{name}: inspect predicts {without} bytes a step "
                        f"with f32 reduce-scatters; the f32 run sent "
                        f"{f32['sent'][0]}")
    if not got["sent"][0] < int8["sent"][0]:
        failures.append(f"{name}: {got['sent'][0]} bytes a step, not fewer "
                        f"than int8's {int8['sent'][0]}")
    print(f"{name}: losses within {worst:.2e} of the f32 run's (int8 "
          f"{int8_worst:.2e}; last {got['metrics'][-1][0]:.6f} against "
          f"{f32['metrics'][-1][0]:.6f}); {got['sent'][0]} bytes sent a step "
          f"against {int8['sent'][0]} with int8 and {f32['sent'][0]} with f32 "
          f"reduce-scatters ({f32['sent'][0] / got['sent'][0]:.2f}x fewer)")
    return failures


def check_quantized_overlap(args, onnx_path, data, recipe, synchronous):
    """overlap_comm: true with qgZ at world 2 (the all-to-alls start on the
    communication stream, each decode and accumulation deferred): the same
    losses and grad_norms as the synchronous qgZ run (the same arithmetic
    in the same order), the predicted bytes, communication hidden."""
    name = "full-zero2-qgz-overlap-world2"
    recipe = dict(recipe, overlap_comm="true", ddp_bucket_cap_mb=0.02)
    got, err = run_world(args, onnx_path, data, recipe, name, "2xcpu", 2,
                         "zero2")
    if err:
        return [f"{name}: {err}"]
    failures = check_bytes_sent(name, got, 2)
    if got["doc"]["prediction"].get("hidden_seconds", 0) <= 0:
        failures.append(f"{name}: the plan hides no communication")
    # Smaller buckets cut the chunks elsewhere, so the int8 blocks differ
    # from the synchronous run's: compared at QGZ_TOL, not bit for bit.
    worst = max(abs(a[0] - b[0]) / abs(b[0])
                for a, b in zip(got["metrics"], synchronous["metrics"]))
    if len(got["metrics"]) != len(synchronous["metrics"]) or worst > QGZ_TOL:
        failures.append(f"{name}: losses within {worst:.2e} of the "
                        f"synchronous qgZ run's (limit {QGZ_TOL:g})")
    print(f"{name}: losses within {worst:.2e} of the synchronous run's, "
          f"{got['sent'][0]} bytes sent a step")
    return failures


def check_overlap(args, onnx_path, data, base, ref):
    """overlap_comm: true on CPU ranks (the collectives start nonblocking on
    the communication stream; small buckets so several are in flight) gives
    the losses of one rank, the predicted bytes, and a trace whose
    collectives lie on the communication stream's track."""
    failures = []
    recipe = dict(base, overlap_comm="true", ddp_bucket_cap_mb=0.02)
    for name, hardware, ranks, strategy in (
            ("full-overlap-ddp-world4", "4xcpu", 4, "ddp"),
            ("full-overlap-zero2-world2", "2xcpu", 2, "zero2"),
            ("full-overlap-zero3-world2", "2xcpu", 2, "zero3")):
        got, err = run_world(args, onnx_path, data, recipe, name, hardware,
                             ranks, strategy)
        if err:
            failures.append(f"{name}: {err}")
            continue
        prediction = got["doc"]["prediction"]
        if prediction.get("hidden_seconds", 0) <= 0:
            failures.append(f"{name}: the plan hides no communication "
                            f"({prediction})")
        failures += compare(name, got, ref)
        failures += check_bytes_sent(name, got, ranks)
        if name == "full-overlap-zero2-world2":
            failures += check_trace(args, got["plan"], data, comm_track=True)
    return failures


def check_zero3_recompute(args, onnx_path, data, base, ref, without):
    """ZeRO-3 with gradient checkpointing (full fine-tuning): the replayed
    forward reads the parameters through backward's gathers (never the
    forward's gathered copies), with world 1's numbers, the predicted
    bytes, and no more activation bytes than ZeRO-3 without it (keeping
    the forward's gathered weights for the replay would add them)."""
    name = "full-zero3-checkpointing-world2"
    recipe = dict(base, gradient_checkpointing="true")
    got, err = run_world(args, onnx_path, data, recipe, name, "2xcpu", 2,
                         "zero3")
    if err:
        return [f"{name}: {err}"]
    failures = compare(name, got, ref) + check_bytes_sent(name, got, 2)
    mine = got["doc"]["memory"]["activations"]
    theirs = without["doc"]["memory"]["activations"]
    print(f"{name}: activations {mine} B per rank (without checkpointing "
          f"{theirs} B)")
    if mine > theirs:
        failures.append(f"{name}: {mine} activation bytes per rank, more "
                        f"than without checkpointing ({theirs})")
    return failures


def check_qlora(args, onnx_path, data, base):
    """QLoRA under ZeRO-3: the NF4 base weights' stored bytes are sharded
    too, gathered as bytes and dequantized on use: world 1's numbers, and
    1/N of its parameter bytes per rank."""
    ref, err = run_world(args, onnx_path, data, base, "qlora-world1", "cpu",
                         1)
    if err:
        return [f"qlora world 1: {err}"]
    failures = []
    for name, hardware, ranks in (("qlora-zero3-world2", "2xcpu", 2),
                                  ("qlora-zero3-world4", "4xcpu", 4)):
        got, err = run_world(args, onnx_path, data, base, name, hardware,
                             ranks, "zero3")
        if err:
            failures.append(f"{name}: {err}")
            continue
        failures += compare(name, got, ref)
        failures += check_bytes_sent(name, got, ranks)
        whole = ref["doc"]["memory"]["parameters"]
        held = got["doc"]["memory"]["parameters"]
        # Buckets pad to 64-element chunks: a little over 1/N.
        if not whole / ranks <= held <= whole / ranks * 1.1 + 4096:
            failures.append(f"{name}: {held} parameter bytes per rank, "
                            f"world 1 holds {whole}")
        print(f"{name}: parameters {held} B per rank (world 1 {whole} B, "
              f"NF4 bytes included)")
    return failures


def check_resume_across(args, onnx_path, data, base, ref):
    """Steps 1-7 ZeRO-3 on 2 ranks, 8-14 DDP on 4, 15-20 on 1 rank, each
    resuming the one before's checkpoint: world 1's uninterrupted run."""
    out = os.path.join(args.work, "resume-across", "out")
    shutil.rmtree(out, ignore_errors=True)
    legs = (("zero3-world2", "2xcpu", 2, "zero3", 7),
            ("ddp-world4", "4xcpu", 4, "ddp", 14),
            ("world1", "cpu", 1, "ddp", STEPS))
    resume = None
    for name, hardware, ranks, strategy, until in legs:
        recipe = world_recipe(base, ranks, strategy)
        recipe["save_steps"] = 7
        work = os.path.join(args.work, "resume-across", name)
        plan, err = compile_plan(args, onnx_path, recipe, work, hardware)
        if err:
            return [f"resume across, {name}: {err}"]
        _, err = train(args, plan, work, ranks, data, out=out,
                       max_steps=until, resume=resume)
        if err:
            return [f"resume across, {name}: {err}"]
        resume = os.path.join(out, f"checkpoint-{until}")
    rows = [m for _, m in sorted(tc.read_metrics(out).items())]
    got = dict(metrics=[(m["loss"], m["grad_norm"]) for m in rows],
               tensors=tc.load_safetensors(os.path.join(out,
                                                        model_file(base))))
    return compare("resume zero3@2 -> ddp@4 -> 1 rank", got, ref)


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
    rows = tc.make_rows(n_rows=STEPS * GLOBAL_MICRO_BATCHES * tc.B)
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(rows, data)

    lora = tc.recipe_defaults()
    lora.update(lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                max_steps=STEPS, save_steps=STEPS, max_grad_norm=1.0,
                zero_stage=0)
    failures, results = check_recipe(args, onnx_path, data, lora, "lora")
    full = dict(lora)
    full.update(adapter="full")
    for key in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                "use_rslora"):
        full.pop(key, None)
    more, full_results = check_recipe(args, onnx_path, data, full, "full")
    failures += more
    if full_results:
        failures += check_resume_across(args, onnx_path, data, full,
                                        full_results["world1"])
        failures += check_overlap(args, onnx_path, data, full,
                                  full_results["world1"])
        failures += check_torchrun(args, onnx_path, data, full,
                                   full_results["world1"], full_results)
        failures += check_quantized_weights(args, onnx_path, data, full,
                                            full_results["world1"],
                                            full_results)
        failures += check_quantized_gradients(args, onnx_path, data, full,
                                              full_results)
        failures += check_hierarchical_partition(args, onnx_path, data, full)
        if "full-zero3-world2" in full_results:
            failures += check_zero3_recompute(
                args, onnx_path, data, full, full_results["world1"],
                full_results["full-zero3-world2"])
    qlora = dict(lora)
    qlora.update(adapter="qlora")
    failures += check_qlora(args, onnx_path, data, qlora)
    failures += check_rank_death(args, onnx_path, data, full)
    if full_results and "full-zero2-world2" in full_results:
        failures += check_trace(args, full_results["full-zero2-world2"]["plan"],
                                data)
    if results and "lora-world4" in results:
        failures += check_world_mismatch(args, results["lora-world4"]["plan"])
    for failure in failures:
        print("FAIL:", failure)
    print("summary:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
