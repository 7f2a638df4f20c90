#!/usr/bin/env python3
"""`tailor calibrate` on several ranks measures the link between them
(issue: planning, cost model and calibration).

`mpirun -np 2 tailor calibrate PLAN -o hw.yaml` times all-reduce,
reduce-scatter and all-gather from 4 KiB to 16 MiB over MPI and fits the
cost model's alpha-beta ring formulas. Checks:

  - the hardware file holds the ranks as launched (gpus 2, nodes 1) and the
    fitted link: link_gbs and link_latency_us positive, efficiency_comm 1,
    efficiency_reduce in (0, 1];
  - rank 0 alone reports (one line per collective and size, then the fit)
    and writes the file;
  - the file compiles a 2-rank DDP plan (no --hardware rank count needed),
    whose predicted step inspect prices on it, and its all-reduce time is
    the formula's with the file's figures: 2(p-1) latency + 2(p-1)/p n /
    (link_gbs x efficiency_reduce);
  - under torchrun (CPU ranks on Gloo) calibrate fits Gloo's link into a
    file of 2 ranks.

  calibrate_ranks.py --bin BUILD/bin --work DIR
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

import train_common as tc  # noqa: E402

RANKS = 2


def read_figures(path):
    figures = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^([a-z_]+): (\S+)$", line.strip())
            if m:
                figures[m.group(1)] = m.group(2)
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join("build", "bin"))
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tailor = os.path.join(args.bin, "tailor")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    inputs = os.path.join(HERE, "..", "tools", "Inputs")
    lm = os.path.join(args.work, "lm.onnx")
    subprocess.run([sys.executable, os.path.join(inputs, "make_tiny_lm.py"), lm],
                   check=True)
    plan = os.path.join(args.work, "full.tplan")
    recipe = os.path.join(inputs, "tiny-lm-full.yaml")
    ok, msg = tc.run([tailor, "compile", lm, "--recipe", recipe, "--threads", "1",
                      "-o", plan], 300)
    if not ok:
        print(f"FAIL: {msg}")
        return 1
    problems = []
    hw = os.path.join(args.work, "hw.yaml")
    proc = subprocess.run(tc.mpirun(RANKS) + [tailor, "calibrate", plan,
                                              "--threads", "1", "--rounds", "3",
                                              "-o", hw],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"FAIL: calibrate exited {proc.returncode}: {proc.stderr[-2000:]}")
        return 1
    sizes = [ln for ln in proc.stderr.splitlines() if " KiB on 2 ranks " in ln]
    fit = [ln for ln in proc.stderr.splitlines() if "link between" in ln]
    print("\n".join(ln for ln in sizes if " 16384 KiB" in ln or " 4 KiB" in ln))
    print("\n".join(fit))
    if len(sizes) != 3 * 13 or len(fit) != 1:
        problems.append(f"expected 39 size lines and one fit from rank 0 alone, "
                        f"got {len(sizes)} and {len(fit)}")
    f = read_figures(hw)
    print("hardware file: " + ", ".join(f"{k} {f.get(k)}" for k in (
        "gpus", "nodes", "link_gbs", "link_latency_us", "efficiency_comm",
        "efficiency_reduce")))
    if f.get("gpus") != "2" or f.get("nodes") != "1":
        problems.append(f"gpus/nodes {f.get('gpus')}/{f.get('nodes')}, want 2/1")
    link = float(f.get("link_gbs", 0))
    latency = float(f.get("link_latency_us", -1))
    reduce = float(f.get("efficiency_reduce", 0))
    if not (link > 0 and latency >= 0 and 0 < reduce <= 1
            and f.get("efficiency_comm") == "1.0000"):
        problems.append(f"link figures out of range: {f}")

    r = dict(tc.recipe_defaults(), adapter="full", sequence_len=8,
             micro_batch_size=2, max_steps=2, save_steps=0)
    ddp, err = tc.compile_plan(args.bin, lm, r, os.path.join(args.work, "ddp"), hw)
    if err:
        problems.append(f"compile with the calibrated file: {err}")
    else:
        problems += check_all_reduce(args, ddp, hw, link, latency, reduce)
    # Under torchrun the ranks time Gloo's collectives, which they would run.
    hw_gloo = os.path.join(args.work, "hw-gloo.yaml")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run",
                           "--standalone", "--nproc-per-node", str(RANKS),
                           "--no-python", tailor, "calibrate", plan,
                           "--threads", "1", "--rounds", "1", "-o", hw_gloo],
                          capture_output=True, text=True, timeout=600)
    g = read_figures(hw_gloo) if proc.returncode == 0 else {}
    print("under torchrun (gloo): exit %d; " % proc.returncode + ", ".join(
        f"{k} {g.get(k)}" for k in ("gpus", "link_gbs", "link_latency_us")))
    if proc.returncode != 0 or g.get("gpus") != "2" or not (
            float(g.get("link_gbs", 0)) > 0):
        problems.append("calibrate under torchrun: exit %d, figures %s: %s" % (
            proc.returncode, g, proc.stderr[-1500:]))
    if problems:
        print("FAIL:")
        for p in problems:
            print(f"  {p}")
        return 1
    print("summary: calibrate on 2 ranks fits the link (link_gbs "
          f"{link:g}, link_latency_us {latency:g}, efficiency_reduce {reduce:g}); "
          "the file compiles a 2-rank plan priced with it")
    return 0


def check_all_reduce(args, plan, hw, link, latency, reduce):
    """The plan's ranks, and the predicted time of its collectives (DDP's
    one bucket of gradients: a single all-reduce of every trainable f32)
    against the formula with the file's figures."""
    info = json.loads(subprocess.run(
        [os.path.join(args.bin, "tailor"), "inspect", plan, "--json",
         "--hardware", hw], capture_output=True, text=True, check=True).stdout)
    problems = []
    sharding = info.get("sharding", {})
    if info.get("world_size") != RANKS or sharding.get("strategy") != "ddp":
        problems.append(f"the plan is {info.get('world_size')} ranks of "
                        f"{sharding.get('strategy')}, want {RANKS} of ddp")
    prediction = info.get("prediction", {})
    n = 4.0 * sharding.get("trainable_parameters", 0)
    want = 2 * (RANKS - 1) * latency * 1e-6 + \
        2 * (RANKS - 1) / RANKS * n / (link * 1e9 * reduce)
    got = float(prediction.get("comm_seconds", 0))
    print(f"plan on {prediction.get('hardware')}: all_reduce of {n:.0f} B "
          f"predicted {got * 1e6:.3f} us, formula {want * 1e6:.3f} us")
    if prediction.get("hardware") != "calibrated":
        problems.append("inspect does not price the plan on the calibrated file")
    if not abs(got - want) <= 1e-3 * want:
        problems.append(f"comm predicted {got}, formula {want}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
