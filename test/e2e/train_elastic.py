#!/usr/bin/env python3
"""Elastic membership: a rank lost, the job continues on fewer, then grows.

The tiny Hugging Face Llama (LoRA) is compiled once for 4 CPU ranks
(`--hardware 4xcpu`, DDP, micro batch 2 x accumulation 3: a global batch
of 24 sequences) with a checkpoint every step, and trained with
`tailor train --elastic` under mpirun:

  * 4 ranks start; once checkpoint k (random, 2..5) exists, a random rank
    is killed with SIGKILL. mpirun ends the job (exit != 0);
  * `mpirun -np 3 tailor train PLAN --elastic` finds 3 ranks where the
    plan has 4: it compiles the plan again from the command line the plan
    records, for `3xcpu` with accumulation 4 (the same global batch), and
    resumes from the last complete checkpoint (c) for 4 steps;
  * `mpirun -np 4 ... --elastic` runs the plan as compiled to the end.

Checks: no committed step is lost (the 3-rank run resumes at step c + 1
from checkpoint-c); the final adapter equals a reference run without kills
with the same membership changes (4 ranks to c, 3 to c + 4, 4 to the end)
to 1e-6 of each tensor's scale; every step's loss equals one rank's at the
same global batch (accumulation 12) to 1e-5 relative, so the data order
and the math are the global batch's whatever the world; and a launch on 5
ranks, which 24 sequences of micro batch 2 do not split over, and a plan
for two nodes of two ranks launched on 3, are refused with exit 1 and a
message that says so. A 2-stage layer split launched on 3 ranks is compiled
again as 3 stages and ends with one rank's adapter, bit for bit. Under
torchrun's elastic agent (two agents of 2 CPU ranks, which Gloo joins), one
agent killed with its workers leaves the other's restarted workers to
re-plan for 2 ranks and resume; a 4-rank torchrun launch grows it back; the
adapter and losses equal an mpirun run with the same membership.

  train_elastic.py --bin build/bin --work build/test/train-elastic
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

STEPS = 16
ACCUMULATION_AT_4 = 3
GLOBAL_MICRO_BATCHES = 4 * ACCUMULATION_AT_4
TOL = 1e-5
SAME_MEMBERSHIP_TOL = 1e-6


def tailor_train(args, plan, ranks, data, out, max_steps, log):
    """`tailor train --elastic` on `ranks` ranks; (ok, output)."""
    cmd = [os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
           "--max-steps", str(max_steps), "--output-dir", out, "--threads",
           "1", "--elastic"]
    if ranks > 1:
        cmd = tc.mpirun(ranks) + cmd
    return tc.run(cmd, 600, log)


def complete_checkpoints(out):
    return sorted(
        int(d.split("-")[1]) for d in os.listdir(out)
        if d.startswith("checkpoint-") and d.split("-")[1].isdigit()
        and os.path.exists(os.path.join(out, d, "trainer_state.json")))



def killed_run(args, plan, data, out, rng):
    """4 ranks until checkpoint k exists, then SIGKILL of a random rank.
    Returns (the last complete checkpoint, None) or (None, the error)."""
    k, victim_rank = rng.randint(2, 5), rng.randint(0, 3)
    shutil.rmtree(out, ignore_errors=True)
    cmd = tc.mpirun(4) + [os.path.join(args.bin, "tailor"), "train", plan,
                          "--data", data, "--output-dir", out, "--threads",
                          "1", "--elastic"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    target = os.path.join(out, f"checkpoint-{k}", "trainer_state.json")
    while time.time() < deadline and not os.path.exists(target):
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    victim = tc.rank_pid(proc.pid, victim_rank)
    if victim is None or proc.poll() is not None:
        proc.kill()
        text = proc.communicate()[0]
        return None, (f"the 4-rank run ended before checkpoint-{k} "
                      f"(exit {proc.poll()}): {tc.first_lines(text)}")
    os.kill(victim, signal.SIGKILL)
    try:
        text, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None, "the ranks still ran 120 s after the kill"
    with open(os.path.join(out, "..", "killed.log"), "w") as f:
        f.write(text)
    if proc.returncode == 0:
        return None, "the 4-rank run finished although a rank was killed"
    done = complete_checkpoints(out)
    if not done:
        return None, "no complete checkpoint after the kill"
    print(f"killed rank {victim_rank} after checkpoint-{k} appeared; mpirun "
          f"exit {proc.returncode}; last complete checkpoint-{done[-1]}")
    return done[-1], None


def membership_run(args, plan, data, out, log, changes):
    """Runs `changes` [(ranks, max_steps), ...] in order in `out`."""
    for ranks, max_steps in changes:
        ok, msg = tailor_train(args, plan, ranks, data, out, max_steps, log)
        if not ok:
            return msg
        if ranks == 3 and "compiled it again for 3" not in msg:
            return f"the 3-rank launch did not say it re-planned: {msg[:400]}"
    return None


def compare_adapters(got_dir, ref_dir, tol, name):
    import numpy as np

    got = tc.load_safetensors(os.path.join(got_dir,
                                           "adapter_model.safetensors"))
    ref = tc.load_safetensors(os.path.join(ref_dir,
                                           "adapter_model.safetensors"))
    worst = 0.0
    for key, r in ref.items():
        if key not in got:
            return [f"{name}: adapter lacks {key}"], worst
        r = r.astype(np.float64)
        scale = float(np.abs(r).max()) or 1.0
        worst = max(worst, float(np.abs(got[key].astype(np.float64) - r).max())
                    / scale)
    return ([f"{name}: adapter differs by {worst:.2e} of scale (limit "
             f"{tol:g})"] if worst > tol else []), worst


def compare_losses(got, ref, name):
    failures, worst = [], 0.0
    for step in range(1, STEPS + 1):
        if step not in got or step not in ref:
            return [f"{name}: step {step} missing from metrics.jsonl"], worst
        a, b = got[step]["loss"], ref[step]["loss"]
        err = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, err)
        if err > TOL:
            failures.append(f"{name}: step {step} loss {a} vs one rank's {b}")
    return failures, worst


def check_refused_world(args, plan, data):
    proc = subprocess.run(tc.mpirun(5) + [
        os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
        "--output-dir", os.path.join(args.work, "world5"), "--elastic"],
        capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0 or "does not split over 5 ranks" not in text:
        return [f"5 ranks: exit {proc.returncode}: {tc.first_lines(text)}"]
    line = next(l for l in text.splitlines() if "does not split" in l)
    print(f"5 ranks: exit {proc.returncode}: {line.strip()}")
    return []


def check_refused_nodes(args, onnx_path, recipe, data):
    """A plan for two nodes of two ranks cannot become 3 ranks."""
    plan, err = tc.compile_plan(args.bin, onnx_path, dict(
        recipe, gradient_accumulation_steps=ACCUMULATION_AT_4),
        os.path.join(args.work, "plan2x2"), "2x2xcpu")
    if err:
        return [f"compile 2x2xcpu: {err}"]
    proc = subprocess.run(tc.mpirun(3) + [
        os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
        "--output-dir", os.path.join(args.work, "nodes3"), "--elastic"],
        capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0 or "whole nodes" not in text:
        return [f"2x2xcpu on 3 ranks: exit {proc.returncode}: "
                f"{tc.first_lines(text)}"]
    line = next(l for l in text.splitlines() if "whole nodes" in l)
    print(f"2x2xcpu on 3 ranks: exit {proc.returncode}: {line.strip()}")
    return []


def check_layer_split(args, data):
    """A 2-stage layer split of a 4-layer Llama, 4 steps on 2 ranks, then
    launched on 3: compiled again as 3 stages, it resumes at step 4 and
    ends with the adapter one rank trains, bit for bit (a split computes
    what one rank does)."""
    import numpy as np

    onnx4 = tc.export_llama(args.work, 4)
    recipe = tc.recipe_defaults()
    recipe.update(max_steps=8, save_steps=1, gradient_accumulation_steps=4)
    one, err = tc.compile_plan(args.bin, onnx4, recipe,
                               os.path.join(args.work, "split-one"), "cpu")
    if err:
        return [f"layer split: compile one rank: {err}"]
    split, err = tc.compile_plan(args.bin, onnx4,
                                 dict(recipe, pipeline_stages=2),
                                 os.path.join(args.work, "split"), "2xcpu")
    if err:
        return [f"layer split: compile 2 stages: {err}"]
    out = os.path.join(args.work, "split", "out")
    shutil.rmtree(out, ignore_errors=True)
    log = os.path.join(args.work, "split", "tailor.log")
    err = membership_run(args, split, data, out, log, [(2, 4), (3, 8)])
    if err:
        return [f"layer split: {err}"]
    with open(log) as f:
        if "(a layer split of 3 stages)" not in f.read():
            return ["layer split: the 3-rank launch did not re-plan 3 stages"]
    ref = os.path.join(args.work, "split-one", "out")
    ok, msg = tailor_train(args, one, 1, data, ref, 8,
                           os.path.join(args.work, "split-one", "tailor.log"))
    if not ok:
        return [f"layer split: one rank: {msg}"]
    got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    want = tc.load_safetensors(os.path.join(ref, "adapter_model.safetensors"))
    differ = [k for k in want if not np.array_equal(got.get(k), want[k])]
    if differ:
        return [f"layer split: 2 -> 3 stages differs from one rank in "
                f"{differ[:3]}"]
    print(f"layer split: 2 stages to step 4, then 3 stages to 8: the "
          f"adapter equals one rank's bit for bit ({len(want)} tensors)")
    return []


def torchrun_agent(rdzv, is_host):
    """One torchrun elastic agent ("node") of 2 CPU ranks: nodes 1 to 2,
    c10d rendezvous at `rdzv`, restarts allowed, a quick last call."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1:2",
            "--nproc-per-node", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", rdzv, "--rdzv-id", "tailor-elastic",
            "--rdzv-conf", f"is_host={str(is_host).lower()},"
            "join_timeout=120,last_call_timeout=10",
            "--max-restarts", "3", "--monitor-interval", "1", "--no-python"]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_agent(proc):
    """SIGKILL of a torchrun agent and its workers (a node lost whole)."""
    children = subprocess.run(["pgrep", "-P", str(proc.pid)],
                              capture_output=True, text=True).stdout.split()
    for pid in [proc.pid] + [int(c) for c in children]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def check_torchrun_elastic(args, plan, data, rng):
    """Under torchrun's elastic agent: two agents of 2 CPU ranks (Gloo) start
    the 4-rank plan; once checkpoint k exists one agent is killed with its
    workers; the other's agent restarts its workers as a world of 2, which
    compile the plan again for 2 ranks and resume from the last complete
    checkpoint c to step 24; a plain 4-rank torchrun launch then continues
    to 32. The adapter and every step's loss equal an mpirun run with the
    same membership (4 ranks to c, 2 to 24, 4 to 32)."""
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError:
        print("torchrun elastic: skipped (no torch.distributed.run)")
        return []
    work = os.path.join(args.work, "torchrun")
    out = os.path.join(work, "out")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    k, shrink_end, grow_end = rng.randint(2, 5), 24, 32
    rdzv = f"127.0.0.1:{free_port()}"
    train = [os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
             "--output-dir", out, "--threads", "1", "--elastic",
             "--max-steps", str(shrink_end)]
    logs = [open(os.path.join(work, f"agent-{n}.log"), "w") for n in "ab"]
    agents = [subprocess.Popen(torchrun_agent(rdzv, n == 0) + train,
                               stdout=logs[n], stderr=subprocess.STDOUT,
                               start_new_session=True) for n in (0, 1)]
    deadline = time.time() + 300
    target = os.path.join(out, f"checkpoint-{k}", "trainer_state.json")
    while time.time() < deadline and not os.path.exists(target):
        if any(a.poll() is not None for a in agents):
            break
        time.sleep(0.01)
    if not os.path.exists(target) or agents[1].poll() is not None:
        for a in agents:
            kill_agent(a)
        return [f"torchrun elastic: no checkpoint-{k} while both agents ran "
                f"(see {work})"]
    kill_agent(agents[1])
    try:
        rc = agents[0].wait(timeout=300)
    except subprocess.TimeoutExpired:
        kill_agent(agents[0])
        return ["torchrun elastic: the surviving agent ran 300 s on"]
    for f in logs:
        f.close()
    with open(os.path.join(work, "agent-a.log")) as f:
        text = f.read()
    found = re.findall(r"resuming from .*checkpoint-(\d+) \(step (\d+)\)",
                       text)
    if rc != 0 or "compiled it again for 2" not in text or not found:
        return [f"torchrun elastic: the surviving agent exited {rc} "
                f"without re-planning for 2 ranks and resuming (see {work})"]
    c = int(found[-1][0])
    print(f"torchrun elastic: agent b killed after checkpoint-{k}; agent a's "
          f"restarted workers re-planned for 2 ranks and resumed from "
          f"checkpoint-{c}")
    grow = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "4", "--no-python"] + train[:-1] + [
                str(grow_end)]
    ok, msg = tc.run(grow, 600, os.path.join(work, "grow.log"))
    if not ok:
        return [f"torchrun elastic: 4 ranks again: {msg}"]
    reference = os.path.join(work, "reference")
    err = membership_run(args, plan, data, reference,
                         os.path.join(work, "reference.log"),
                         [(4, c), (2, shrink_end), (4, grow_end)])
    if err:
        return [f"torchrun elastic: reference: {err}"]
    failures, worst = compare_adapters(out, reference, TOL,
                                       "torchrun elastic vs mpirun")
    got, ref = tc.read_metrics(out), tc.read_metrics(reference)
    loss_worst = max(abs(got[s]["loss"] - ref[s]["loss"]) /
                     max(abs(ref[s]["loss"]), 1e-12)
                     for s in range(1, grow_end + 1) if s in got and s in ref)
    missing = [s for s in range(1, grow_end + 1) if s not in got]
    if missing or loss_worst > TOL:
        failures.append(f"torchrun elastic: steps {missing[:3]} missing, "
                        f"losses within {loss_worst:.2e} of mpirun's")
    print(f"torchrun elastic: 4 ranks to {c}, 2 to {shrink_end}, 4 to "
          f"{grow_end}: adapter {worst:.2e} of scale and losses within "
          f"{loss_worst:.2e} of the mpirun run with the same membership")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found")
        return 77
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed} (--seed repeats the kill)")
    rng = random.Random(seed)
    onnx_path = os.path.join(args.work, "llama", "model.onnx")
    if not os.path.exists(onnx_path):
        tc.build_and_export(onnx_path, seed=0, family="llama")
    data = os.path.join(args.work, "rows.jsonl")
    tc.write_jsonl(tc.make_rows(n_rows=STEPS * GLOBAL_MICRO_BATCHES * tc.B),
                   data)
    recipe = tc.recipe_defaults()
    recipe.update(lora_target_modules=["q_proj", "k_proj", "v_proj",
                                       "o_proj"],
                  max_steps=STEPS, save_steps=1, max_grad_norm=1.0,
                  zero_stage=0,
                  gradient_accumulation_steps=ACCUMULATION_AT_4)
    plan, err = tc.compile_plan(args.bin, onnx_path, recipe,
                                os.path.join(args.work, "plan4"), "4xcpu")
    if err:
        print("FAIL: compile:", err)
        return 1
    one = dict(recipe, gradient_accumulation_steps=GLOBAL_MICRO_BATCHES)
    plan1, err = tc.compile_plan(args.bin, onnx_path, one,
                                 os.path.join(args.work, "plan1"), "cpu")
    if err:
        print("FAIL: compile world 1:", err)
        return 1

    failures = check_refused_world(args, plan, data)
    failures += check_refused_nodes(args, onnx_path, recipe, data)
    failures += check_layer_split(args, data)
    elastic = os.path.join(args.work, "elastic", "out")
    c, err = killed_run(args, plan, data, elastic, rng)
    if err:
        print("FAIL:", err)
        return 1
    log = os.path.join(args.work, "elastic", "tailor.log")
    changes = [(3, c + 4), (4, STEPS)]
    err = membership_run(args, plan, data, elastic, log, changes)
    if err:
        print("FAIL: elastic:", err)
        return 1
    with open(log) as f:
        text = f.read()
    resumed = f"resuming from {os.path.join(elastic, f'checkpoint-{c}')} " \
        f"(step {c})"
    if resumed not in text:
        failures.append(f"the 3-rank run does not say it resumed from "
                        f"checkpoint-{c}")
    got = tc.read_metrics(elastic)
    first_after = min(s for s in got if s > c)
    if first_after != c + 1:
        failures.append(f"steps after checkpoint-{c} start at {first_after}")

    reference = os.path.join(args.work, "reference", "out")
    shutil.rmtree(reference, ignore_errors=True)
    err = membership_run(args, plan, data, reference,
                         os.path.join(args.work, "reference", "tailor.log"),
                         [(4, c)] + changes)
    if err:
        print("FAIL: reference:", err)
        return 1
    more, worst = compare_adapters(elastic, reference, SAME_MEMBERSHIP_TOL,
                                   "killed vs reference")
    failures += more
    print(f"final adapter after kill at {c}, 3 ranks to {c + 4}, 4 to "
          f"{STEPS}: {worst:.2e} of scale from the run without a kill")

    failures += check_torchrun_elastic(args, plan, data, rng)

    single = os.path.join(args.work, "world1", "out")
    ok, msg = tailor_train(args, plan1, 1, data, single, STEPS,
                           os.path.join(args.work, "world1", "tailor.log"))
    if not ok:
        failures.append(f"world 1: {msg}")
    else:
        more, worst = compare_losses(got, tc.read_metrics(single),
                                     "elastic vs one rank")
        failures += more
        print(f"losses of all {STEPS} steps within {worst:.2e} relative of "
              f"one rank at the same global batch")
    for failure in failures:
        print("FAIL:", failure)
    print("summary:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
