#!/usr/bin/env python3
"""Sampling in `tailor generate` against transformers' logits warpers.

Checks that:
  - the distribution tailor draws from (tailor.sampling_probabilities, the
    C API's tailor_sampling_probabilities) equals softmax after
    transformers' TemperatureLogitsWarper, TopKLogitsWarper and
    TopPLogitsWarper, applied in generate's order, on random logits, to
    1e-6, for a grid of temperatures, top-k and top-p (and top-k with
    ties at the k-th logit);
  - on a generation plan of the tiny llama export: a seed repeats its
    tokens, another seed changes them, --top-k 1 gives the greedy ids, and
    the Python Generator draws what the command draws;
  - many draws of the first generated token follow the distribution
    transformers' warpers give the PyTorch model's own last logits (a
    chi-square test at p = 0.001);
  - --temperature < 0, --top-p outside (0, 1], --top-k < 0, and --top-k
    without --temperature exit 1 with a message.

  generate_sampling.py --tailor build/bin/tailor --cache build/test/hf-exports \
      --runtime-lib build/lib/libtailor_runtime.so
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from hf_common import cache_key, case_name, export_case  # noqa: E402

ATOL = 1e-6
DRAWS = 20000
# Pearson's chi-square quantile at p = 0.001 by degrees of freedom.
CHI2_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46,
            7: 24.32, 8: 26.12, 9: 27.88, 10: 29.59, 11: 31.26, 12: 32.91,
            13: 34.53, 14: 36.12, 15: 37.70}


def hf_probabilities(logits, temperature, top_k, top_p):
    """softmax after transformers' warpers, in generate's order."""
    import torch
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)
    scores = torch.tensor(logits, dtype=torch.float32)[None]
    scores = TemperatureLogitsWarper(temperature)(None, scores)
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.softmax(scores, dim=-1)[0].double().numpy()


def check_warpers():
    import numpy as np
    import tailor
    rng = np.random.default_rng(22)
    failures, cases, worst = [], 0, 0.0
    for vocab in (7, 100, 4096):
        for trial in range(3):
            logits = rng.normal(0, 3, vocab).astype(np.float32)
            if trial == 2:  # ties, some at the k-th largest
                logits = np.round(logits).astype(np.float32)
            for temperature in (0.3, 1.0, 1.7):
                for top_k in (0, 1, 5, 50):
                    # torch.sort orders equal logits as it likes (not
                    # stably past small sizes), so with ties top-p's set at
                    # its boundary is unspecified: ties check top-k alone.
                    for top_p in ((1.0,) if trial == 2 else
                                  (1.0, 0.95, 0.5, 0.05)):
                        got = tailor.sampling_probabilities(
                            logits, temperature, top_k, top_p)
                        want = hf_probabilities(logits, temperature, top_k,
                                                top_p)
                        diff = float(np.max(np.abs(got - want)))
                        same_support = np.array_equal(got > 0, want > 0)
                        worst = max(worst, diff)
                        cases += 1
                        if diff > ATOL or not same_support:
                            failures.append(
                                f"warpers: vocab {vocab} trial {trial} T "
                                f"{temperature} top_k {top_k} top_p {top_p}: "
                                f"max |diff| {diff:.2e}, same support "
                                f"{same_support}")
    print(f"warpers: {cases} cases equal transformers' (max |diff| "
          f"{worst:.2e}, filtered sets identical)")
    return failures


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def generate(args, plan, *flags):
    proc = run([args.tailor, "generate", plan, "--prompt-ids", "5,17,42,7",
                "--max-new-tokens", "16", "--json", *flags])
    if proc.returncode != 0:
        return None, proc.stderr[-600:]
    return json.loads(proc.stdout)["generated_ids"], ""


def check_plan_sampling(args, plan):
    import tailor
    failures = []
    greedy, err = generate(args, plan)
    a, err_a = generate(args, plan, "--temperature", "0.9", "--top-p", "0.9",
                        "--seed", "11")
    b, _ = generate(args, plan, "--temperature", "0.9", "--top-p", "0.9",
                    "--seed", "11")
    c, _ = generate(args, plan, "--temperature", "0.9", "--top-p", "0.9",
                    "--seed", "12")
    k1, _ = generate(args, plan, "--temperature", "1.3", "--top-k", "1",
                     "--seed", "3")
    if greedy is None or a is None:
        return [f"generate failed: {err or err_a}"]
    if a != b:
        failures.append(f"seed 11 twice: {a} != {b}")
    if a == c:
        failures.append(f"seeds 11 and 12 gave the same ids {a}")
    if k1 != greedy:
        failures.append(f"--top-k 1: {k1} != greedy {greedy}")
    gen = tailor.Generator(plan, temperature=0.9, top_p=0.9, seed=11)
    py = gen.generate([5, 17, 42, 7], max_new_tokens=16)
    if py != a:
        failures.append(f"Python Generator seed 11: {py} != tailor generate "
                        f"{a}")
    if not failures:
        print(f"plan: seed 11 repeats {a[:6]}..., seed 12 differs, top-k 1 "
              f"is greedy, Python draws the same")
    return failures


def check_frequencies(args, plan, model):
    """Draws of the first new token against transformers' warped
    distribution of the PyTorch model's logits."""
    import numpy as np
    import torch
    import tailor
    prompt = [5, 17, 42, 7]
    temperature, top_k, top_p = 1.5, 12, 0.9
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0, -1].numpy()
    want = hf_probabilities(logits, temperature, top_k, top_p)
    gen = tailor.Generator(plan, temperature=temperature, top_k=top_k,
                           top_p=top_p, seed=2026)
    gen.prefill(prompt)
    counts = np.zeros(len(want))
    for _ in range(DRAWS):
        counts[gen.sample()] += 1
    outside = int(counts[want == 0].sum())
    kept = want > 0
    expected = want[kept] * DRAWS
    chi2 = float((((counts[kept] - expected) ** 2) / expected).sum())
    dof = int(kept.sum()) - 1
    limit = CHI2_999.get(dof)
    print(f"frequencies: {DRAWS} draws over {int(kept.sum())} tokens, "
          f"chi-square {chi2:.2f} (limit {limit} at df {dof}), {outside} "
          f"outside transformers' support")
    failures = []
    if outside:
        failures.append(f"{outside} draws of tokens transformers filters out")
    if limit is None or dof < 2:
        failures.append(f"the check kept {dof + 1} tokens; it needs 3 to 16")
    elif chi2 > limit:
        failures.append(f"chi-square {chi2:.2f} > {limit} (df {dof}): draws "
                        "do not follow transformers' distribution")
    return failures


def check_refusals(args, plan):
    failures = []
    for flags, expect in ((["--temperature", "-0.5"], "--temperature"),
                          (["--temperature", "1", "--top-p", "0"], "--top-p"),
                          (["--temperature", "1", "--top-p", "1.5"],
                           "--top-p"),
                          (["--temperature", "1", "--top-k", "-2"], "--top-k"),
                          (["--top-k", "5"], "applies to sampling only")):
        proc = run([args.tailor, "generate", plan, "--prompt-ids", "1,2",
                    *flags])
        if proc.returncode != 1 or expect not in proc.stderr:
            failures.append(f"{flags}: expected exit 1 with '{expect}', got "
                            f"{proc.returncode}: {proc.stderr[-300:]}")
    if not failures:
        print("refusals: negative temperature, top-p outside (0, 1], "
              "negative top-k and top-k without temperature exit 1")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--runtime-lib", required=True)
    args = parser.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.runtime_lib
    # torch first: its CUDA libraries must load before the runtime's NCCL.
    import torch  # noqa: F401
    failures = check_warpers()

    from generate_hf import hf_model
    case = ("llama", "torchscript", 17)
    tag = case_name(*case, False)
    out_dir = os.path.join(args.cache, cache_key(), tag)
    model_path, err = export_case((*case, False, out_dir))
    if err:
        failures.append(f"{tag}: export failed: {err[-500:]}")
    else:
        sidecar = json.load(open(os.path.join(out_dir, "model.json")))
        model = hf_model("llama", sidecar)
        with tempfile.TemporaryDirectory() as work:
            onnx_path = os.path.join(work, "model.onnx")
            shutil.copy(model_path, onnx_path)
            model.config.to_json_file(os.path.join(work, "config.json"))
            plan = os.path.join(work, "generate.tplan")
            proc = run([args.tailor, "compile", onnx_path, "--task",
                        "generate", "--max-seq-len", "64", "-o", plan])
            if proc.returncode != 0:
                failures.append(f"compile failed: {proc.stderr[-800:]}")
            else:
                failures += check_plan_sampling(args, plan)
                failures += check_frequencies(args, plan, model)
                failures += check_refusals(args, plan)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("generate_sampling: all checks passed")


if __name__ == "__main__":
    main()
