#!/usr/bin/env python3
"""The Python binding (python/, package `tailor`) against the tools and
references no binding code wrote:

(a) The package installs with pip (into WORK/site, from python/) and loads
    libtailor_runtime through TAILOR_RUNTIME_LIBRARY.
(b) Forward: make_tiny_lm.py's model compiled for inference; a
    tailor.InferenceSession's get_inputs/get_outputs describe it and its
    run(["logits"], {"input_ids": ids}) equals `tailor-run`'s .npy output
    bit for bit.
(c) Training: the seeded tiny Llama of train_common with a LoRA recipe
    (q_proj, v_proj, r 8, lr 1e-2, 20 steps, save_steps 10); 5 steps with
    Trainer.step(), a checkpoint, then Trainer.train() with a callback for
    the other 15: every step's loss, lr and grad_norm equal `tailor train`'s
    metrics.jsonl bit for bit, and so does the final adapter file. A second
    Trainer resumes from the checkpoint at step 5 and ends with the same
    adapter bytes.
(d) The adapter loads in PEFT (PeftModel.from_pretrained on the HF model).
    A forward plan compiled with --adapter of the step-10 checkpoint, given
    the final adapter at run time with InferenceSession.apply_adapter, gives
    PEFT's logits within --tol (1e-4) relative to max|logits|, while the
    adapter moves them by more than that.
(e) apply_adapter on a plan without LoRA parameters (full fine-tuning of
    the same model) merges the adapter: each adapted weight equals PEFT's
    merge_and_unload() within 1e-6 relative, every other weight is
    unchanged bit for bit.

  binding_test.py --bin BUILD/bin --lib BUILD/runtime/libtailor_runtime.so
                  --source REPO --work DIR
"""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import train_common as tc  # noqa: E402

STEPS = 20


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}:\n"
                         f"{proc.stdout}{proc.stderr}")
    return proc.stdout


def install(source, work):
    """pip-installs python/ into WORK/site; the imported package."""
    site = os.path.join(work, "site")
    # From a copy: setuptools writes build/ and *.egg-info beside the sources.
    copy = os.path.join(work, "python-src")
    shutil.copytree(os.path.join(source, "python"), copy,
                    ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                  "__pycache__"))
    run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", site, copy])
    sys.path.insert(0, site)
    import tailor

    assert tailor.__file__.startswith(site), tailor.__file__
    print(f"ok   (a) pip-installed tailor {tailor.version()} into {site}")
    return tailor


def check_forward(tailor, bin_dir, source, work):
    import numpy as np

    lm = os.path.join(work, "lm.onnx")
    run([sys.executable,
         os.path.join(source, "test", "tools", "Inputs", "make_tiny_lm.py"),
         lm])
    plan = os.path.join(work, "lm.tplan")
    run([os.path.join(bin_dir, "tailor"), "compile", lm, "--batch", "2",
         "--seq", "5", "-o", plan])
    ids = np.random.default_rng(5).integers(0, 100, (2, 5)).astype(np.int64)
    np.save(os.path.join(work, "ids.npy"), ids)
    out = os.path.join(work, "logits.npy")
    run([os.path.join(bin_dir, "tailor-run"), plan, "--input",
         f"input_ids={work}/ids.npy", "--output", f"logits={out}"])
    session = tailor.InferenceSession(plan)
    (arg,) = session.get_inputs()
    assert (arg.name, arg.shape, arg.type) == ("input_ids", (2, 5),
                                               "tensor(int64)"), arg
    assert [o.name for o in session.get_outputs()] == ["logits"]
    (logits,) = session.run(["logits"], {"input_ids": ids})
    want = np.load(out)
    assert logits.dtype == want.dtype and np.array_equal(logits, want), \
        "InferenceSession's logits differ from tailor-run's"
    try:
        session.run(None, {"input_ids": ids.astype(np.int32)})
    except tailor.TailorError as e:
        assert e.status == 1 and "input_ids" in str(e), e
    else:
        raise SystemExit("FAIL: int32 input_ids were accepted")
    print(f"ok   (b) forward: InferenceSession == tailor-run, "
          f"{logits.size} logits bit for bit")


def recipe():
    r = tc.recipe_defaults()
    r.update(max_steps=STEPS, save_steps=10, learning_rate=1e-2)
    return r


def check_training(tailor, bin_dir, work, onnx_path, data):
    import numpy as np

    cli, err = tc.tailor_compile_train(bin_dir, onnx_path, recipe(), work, data)
    if err:
        raise SystemExit(f"FAIL: tailor train: {err}")
    plan = os.path.join(work, "plan.tplan")
    ref = tc.read_metrics(cli)
    out = os.path.join(work, "python")
    trainer = tailor.Trainer(plan, data=data, output_dir=out, num_threads=2)
    got = [trainer.step() for _ in range(5)]
    checkpoint = trainer.save_checkpoint()
    trainer.train(callback=got.append)
    assert trainer.global_step == STEPS and not trainer.interrupted
    assert [m.step for m in got] == list(range(1, STEPS + 1)), got
    for m in got:
        want = ref[m.step]
        # metrics.jsonl holds the float32 loss, lr and norm exactly (%.9g).
        for key, value in (("loss", m.loss), ("lr", m.lr),
                           ("grad_norm", m.grad_norm)):
            assert np.float32(value) == np.float32(want[key]), \
                f"step {m.step} {key}: {value!r} vs tailor train {want[key]!r}"
    adapter = "adapter_model.safetensors"
    assert filecmp.cmp(os.path.join(cli, adapter), os.path.join(out, adapter),
                       shallow=False), "the final adapters differ"
    trainer.close()
    resumed_out = os.path.join(work, "resumed")
    resumed = tailor.Trainer(plan, data=data, output_dir=resumed_out,
                             resume=checkpoint, num_threads=2)
    assert resumed.global_step == 5, resumed.global_step
    resumed.train()
    assert filecmp.cmp(os.path.join(cli, adapter),
                       os.path.join(resumed_out, adapter), shallow=False), \
        "the adapter resumed from step 5 differs"
    check_fed(tailor, plan, data, ref, work)
    print(f"ok   (c) training: {STEPS} steps through Python == tailor train "
          f"(loss, lr, grad_norm and adapter bit for bit; first loss "
          f"{got[0].loss:.6f}, last {got[-1].loss:.6f}); resumed from "
          f"{os.path.basename(checkpoint)} to the same adapter")
    return out


def check_fed(tailor, plan, data, ref, work):
    """The same rows fed from Python step by step (data=None) train as the
    loader reads them (shuffle off, one row per sequence)."""
    import json

    import numpy as np

    rows = [json.loads(line) for line in open(data)]
    per_step = tc.B * recipe()["gradient_accumulation_steps"]
    fed = tailor.Trainer(plan, data=None, output_dir=os.path.join(work, "fed"),
                         num_threads=2)
    for step in range(1, 4):
        batch = rows[(step - 1) * per_step:step * per_step]
        ids = np.array([r["input_ids"] for r in batch])
        labels = np.array([r.get("labels", r["input_ids"]) for r in batch])
        m = fed.step(ids, labels)
        for key, value in (("loss", m.loss), ("grad_norm", m.grad_norm)):
            assert np.float32(value) == np.float32(ref[step][key]), \
                f"fed step {step} {key}: {value!r} vs {ref[step][key]!r}"
    try:
        fed.step()
    except tailor.TailorError as e:
        assert "tailor_trainer_step_batch" in str(e), e
    else:
        raise SystemExit("FAIL: a fed trainer stepped without a batch")
    fed.close()
    print("ok   (c') fed batches: 3 steps from NumPy == tailor train's")


def check_peft(tailor, bin_dir, work, onnx_path, base, adapter_dir, tol):
    import numpy as np
    import torch
    from peft import PeftModel

    ids = torch.randint(0, 256, (2, 16),
                        generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        base_logits = base(input_ids=ids, use_cache=False).logits.double().numpy()
        peft = PeftModel.from_pretrained(tc.fresh_copy(base), adapter_dir).eval()
        ref = peft(input_ids=ids, use_cache=False).logits.double().numpy()
    plan = os.path.join(work, "forward.tplan")
    run([os.path.join(bin_dir, "tailor"), "compile", onnx_path, "--adapter",
         os.path.join(work, "out", "checkpoint-10"), "--batch", "2", "--seq",
         "16", "-o", plan])
    session = tailor.InferenceSession(plan, num_threads=2)
    (compiled_in,) = session.run(["logits"], {"input_ids": ids.numpy()})
    session.apply_adapter(adapter_dir)
    (got,) = session.run(["logits"], {"input_ids": ids.numpy()})
    scale = np.abs(ref).max()
    # The step-10 adapter the plan was compiled with is not the final one.
    before = np.abs(compiled_in.astype(np.float64) - ref).max() / scale
    assert before > 10 * tol, f"the step-10 adapter is already PEFT's ({before:.3g})"
    err = np.abs(got.astype(np.float64) - ref).max() / scale
    moved = np.abs(ref - base_logits).max() / scale
    assert err <= tol, f"apply_adapter logits vs PEFT: {err:.3g} > {tol}"
    assert moved > 10 * tol, f"the adapter moves the logits by {moved:.3g} only"
    print(f"ok   (d) PEFT loads the adapter; apply_adapter's logits match "
          f"PEFT's to {err:.2e} (the adapter moves them {moved:.2e}, the "
          f"compiled-in step-10 adapter is {before:.2e} off)")
    return peft


def check_merge(tailor, bin_dir, work, onnx_path, base, peft, adapter_dir):
    import numpy as np

    r = tc.recipe_defaults()
    r.update(adapter="full", max_steps=1)
    tc.write_recipe(r, os.path.join(work, "full.yaml"))
    plan = os.path.join(work, "full.tplan")
    run([os.path.join(bin_dir, "tailor"), "compile", onnx_path, "--recipe",
         os.path.join(work, "full.yaml"), "-o", plan])
    merged = {k: v.detach().double().numpy() for k, v in
              peft.merge_and_unload().state_dict().items()}
    original = {k: v.detach().numpy() for k, v in base.state_dict().items()}
    session = tailor.InferenceSession(plan)
    before = {p.name: session.get_tensor(p.name)
              for p in session.plan.parameters()}
    session.apply_adapter(adapter_dir)
    changed = 0
    for p in session.plan.parameters():
        got = session.get_tensor(p.name)
        if p.transposed:
            got = got.T
        if p.file_name.endswith(("q_proj.weight", "v_proj.weight")):
            want = merged[p.file_name]
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err <= 1e-6, f"{p.file_name}: merged {err:.3g} off PEFT's"
            assert not np.array_equal(got, original[p.file_name]), p.file_name
            changed += 1
        else:
            assert np.array_equal(session.get_tensor(p.name),
                                  before[p.name]), f"{p.name} changed"
    assert changed == 4, f"{changed} weights merged, expected 4"
    print(f"ok   (e) apply_adapter merges into a plan without LoRA "
          f"parameters: {changed} weights equal PEFT's merge_and_unload")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.lib
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    import torch

    torch.set_num_threads(2)
    tailor = install(args.source, args.work)
    check_forward(tailor, args.bin, args.source, args.work)
    onnx_path = os.path.join(args.work, "llama", "model.onnx")
    base, _ = tc.build_and_export(onnx_path)
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(tc.make_rows(), data)
    adapter = check_training(tailor, args.bin, args.work, onnx_path, data)
    peft = check_peft(tailor, args.bin, args.work, onnx_path, base, adapter,
                      args.tol)
    check_merge(tailor, args.bin, args.work, onnx_path, base, peft, adapter)
    print("summary: the Python binding matches tailor-run, tailor train and "
          "PEFT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
