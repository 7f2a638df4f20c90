#!/usr/bin/env python3
"""Interrupt-and-resume is exact: a LoRA run of the tiny Llama stopped after
step 10 (as SIGINT would: TAILOR_TRAIN_STOP_AFTER=10) and resumed with
`--resume` reaches step 20 with bit-identical per-step losses, learning
rates and gradient norms, adapter, optimizer state and checkpoint files as
an uninterrupted run. The run exercises what a resume must restore: dropout
(the RNG), shuffling across epochs (the data position), gradient
accumulation, clipping and a cosine schedule with warmup (the step).

A second, real interruption sends SIGTERM to a running `tailor train` and
checks that it exits 0 after writing a complete checkpoint, from which the
run resumes to the same final adapter.

  train_resume.py --bin BUILD/bin --work DIR
"""

import argparse
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_common as tc  # noqa: E402


def recipe():
    r = tc.recipe_defaults()
    r.update(lora_dropout=0.1, lora_target_modules=["all-linear"],
             gradient_accumulation_steps=2, learning_rate=5e-3,
             lr_scheduler="cosine", warmup_steps=3, max_grad_norm=0.5,
             max_steps=20, save_steps=5, shuffle=True)
    return r


def metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in rows]


def train(tailor, plan, data, out, extra=(), env=None):
    cmd = [tailor, "train", plan, "--data", data, "--output-dir", out,
           "--threads", "2", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}:\n"
                         f"{proc.stdout}{proc.stderr}")
    return proc.stdout


def same_files(a, b, names):
    bad = [n for n in names
           if not filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)]
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tailor = os.path.join(args.bin, "tailor")

    onnx_path = os.path.join(args.work, "model.onnx")
    if not os.path.exists(onnx_path):
        tc.build_and_export(onnx_path)
    data = os.path.join(args.work, "data.jsonl")
    # 30 rows of 16: an epoch is 15 micro-batches, so 20 steps x 2
    # micro-batches cross two epoch boundaries (reshuffles).
    tc.write_jsonl(tc.make_rows(n_rows=30), data)
    recipe_path = os.path.join(args.work, "recipe.yaml")
    tc.write_recipe(recipe(), recipe_path)
    plan = os.path.join(args.work, "plan.tplan")
    subprocess.run([tailor, "compile", onnx_path, "--recipe", recipe_path,
                    "-o", plan], check=True)

    failures = []
    whole = os.path.join(args.work, "whole")
    parts = os.path.join(args.work, "parts")
    for d in (whole, parts):
        shutil.rmtree(d, ignore_errors=True)
    train(tailor, plan, data, whole)
    stop_env = dict(os.environ, TAILOR_TRAIN_STOP_AFTER="10")
    out = train(tailor, plan, data, parts, env=stop_env)
    if "interrupted: checkpoint written to" not in out or "step 11/" in out:
        failures.append("the stopped run did not stop after step 10:\n" + out)
    out = train(tailor, plan, data, parts, extra=["--resume"])
    if "resuming from" not in out or "steps 11..20" not in out:
        failures.append("the resumed run did not continue at step 11:\n" + out)

    a, b = metrics(whole), metrics(parts)
    print(f"{'step':>4} {'loss (whole)':>14} {'loss (resumed)':>14}")
    for ra, rb in zip(a, b):
        mark = "" if ra == rb else "   <-- differs"
        print(f"{ra[0]:>4} {ra[1]:>14.9f} {rb[1]:>14.9f}{mark}")
    if a != b or len(a) != 20:
        failures.append("per-step loss/lr/grad_norm differ between the whole "
                        "and the interrupted run")
    bad = same_files(whole, parts, ["adapter_model.safetensors",
                                    "adapter_config.json"])
    for step in (15, 20):
        ck = f"checkpoint-{step}"
        bad += [f"{ck}/{n}" for n in same_files(
            os.path.join(whole, ck), os.path.join(parts, ck),
            ["adapter_model.safetensors", "optimizer.safetensors"])]
    if bad:
        failures.append("files differ: " + ", ".join(bad))
    else:
        print("adapter, checkpoint-15 and checkpoint-20 (adapter and optimizer "
              "state) are byte-identical")

    # A real SIGTERM in the middle of a long run.
    term = os.path.join(args.work, "term")
    shutil.rmtree(term, ignore_errors=True)
    proc = subprocess.Popen([tailor, "train", plan, "--data", data,
                             "--output-dir", term, "--max-steps", "100000",
                             "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    done = [d for d in os.listdir(term) if d.startswith("checkpoint-")
            and not ".tmp" in d] if os.path.isdir(term) else []
    if proc.returncode != 0 or "interrupted: checkpoint written to" not in out:
        failures.append(f"SIGTERM: exit {proc.returncode}, output tail:\n"
                        + "\n".join(out.splitlines()[-3:]))
    elif not done or not os.path.exists(os.path.join(term, sorted(
            done, key=lambda d: int(d.split("-")[1]))[-1], "trainer_state.json")):
        failures.append("SIGTERM: no complete checkpoint was written")
    else:
        print(f"SIGTERM: exit 0 after {out.splitlines()[-1].split()[-1]}")

    if failures:
        for f in failures:
            print("FAIL:", f)
        print("summary: interrupt-and-resume FAILED")
        return 1
    print("summary: resumed run identical to the uninterrupted one "
          "(20 steps, stopped after 10); SIGTERM exits 0 with a checkpoint")
    return 0


if __name__ == "__main__":
    sys.exit(main())
