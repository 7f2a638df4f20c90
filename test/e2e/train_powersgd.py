#!/usr/bin/env python3
"""PowerSGD on DDP against PyTorch's PowerSGD communication hook (issue 21).

The tiny Hugging Face Llama of train_common (exported by torch.onnx) is
trained with LoRA (r 8 on q_proj and v_proj, AdamW, constant lr 1e-3) for
STEPS steps, one micro-batch of B sequences per rank and step, on N ranks:

  * tailor: `tailor compile --hardware Nxcpu` with `gradient_compression:
    powersgd`, `compression_rank R`, `compression_start_step 3` (error
    feedback and warm start on, the defaults), then `mpirun -np N tailor
    train`, starting from PEFT's initial adapter (--init-adapter);
  * PyTorch: N processes on `gloo` (torch.multiprocessing), each the PEFT
    model in DistributedDataParallel with the hook registered
    (PowerSGDState(matrix_approximation_rank=R, start_powerSGD_iter=3,
    min_compression_rate=2, use_error_feedback=True, warm_start=True)),
    rank r reading micro-batch (step - 1) * N + r, as tailor's ranks do.

Q's first values: the hook draws them from torch.randn under a seeded
generator; tailor's tg.lowrank_init writes a documented function of the
position (element k: ((k * 2654435761 + 12345) mod 2^32 >> 8) mod 2001,
minus 1000, over 1000). The PyTorch processes replace torch.randn by that
function, so both sides start PowerSGD from the same Q and the comparison
checks the algorithm, not two random generators.

Checks, for (N, R) in (4, 1), (4, 2), (2, 1) and (2, 1) again without
error feedback and warm start (use_error_feedback and warm_start False:
Q set afresh every step), the third with min_compression_rate 7 (v_proj's
lora_B, 32 x 8, is then all-reduced uncompressed, the other LoRA tensors
compressed, in one bucket):
  * every step's loss (mean over ranks) and grad_norm (of the averaged,
    decompressed gradient) within TOL (1e-5) relative of PyTorch's; the
    steps after the third are compressed, where a wrong P, Q, error or
    orthogonalization moves the norm far beyond that;
  * the final adapter's tensors within TOL of max|ref| per tensor;
  * bytes_sent of every step (metrics.jsonl, as the communicator counted
    them) equal to inspect --json's prediction: the uncompressed figure for
    steps 1-3, the compressed one after, and the compressed one smaller;
  * the compression changes the result: the same recipe without it ends
    with another adapter;
  * resume: a run stopped at step 5 (checkpoint-5, holding Q and the
    error) and resumed to STEPS ends with the uninterrupted run's adapter,
    bit for bit (N 4, R 1);
  * ACP-SGD (gradient_compression: acp-sgd, world 4, rank 1,
    min_compression_rate 7) against acp_hook, the variant
    CompressGradients.cpp states written as a DDP communication hook in
    PyTorch (on gloo, Q's first values from lowrank_init): the same
    checks, with the bytes of its alternating P and Q steps;
  * the refusals: zero_stage 2, topk with compression_ratio 0, and one
    rank, each with its message.

  train_powersgd.py --bin build/bin --work build/test/train-powersgd
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

STEPS = 8
START = 3
TOL = 1e-5


def lowrank_init(shape):
    """tg.lowrank_init's values for a row-major tensor of `shape`."""
    import torch

    n = 1
    for d in shape:
        n *= d
    vals = [float((((k * 2654435761 + 12345) % 2**32) >> 8) % 2001 - 1000)
            for k in range(n)]
    return torch.tensor(vals, dtype=torch.float32).div_(1000.0).reshape(shape)


def recipe_for(world, rank, compress=True, min_rate=2.0, cold=False,
               method="powersgd"):
    r = tc.recipe_defaults()
    r.update(max_steps=STEPS, zero_stage=0, save_steps=5)
    if compress:
        r.update(gradient_compression=method, compression_rank=rank,
                 compression_start_step=START, compression_min_rate=min_rate,
                 compression_error_feedback=not cold,
                 compression_warm_start=not cold)
    return r


# ---------------------------------------------------------------------------
# PyTorch: DDP + the PowerSGD hook on gloo
# ---------------------------------------------------------------------------

class AcpState:
    """The ACP-SGD hook's state: the step, and per gradient its error, P
    and Q (keyed by position in the bucket)."""

    def __init__(self, approx_rank, min_rate):
        self.rank = approx_rank
        self.min_rate = min_rate
        self.iter = 0
        self.error, self.p, self.q = {}, {}, {}


def acp_orthogonalize(m, epsilon=1e-8):
    """Gram-Schmidt over the columns of m [rows, r], in place (the hook's
    _orthogonalize_gram_schmidt with epsilon)."""
    import torch

    for i in range(m.shape[1]):
        col = m[:, i:i + 1]
        col.div_(torch.linalg.vector_norm(col) + epsilon)
        if i + 1 < m.shape[1]:
            rest = m[:, i + 1:]
            rest.sub_(torch.sum(col * rest, dim=0) * col)


def acp_hook(state, bucket):
    """ACP-SGD (Zhang et al. 2023, Algorithm 1) as a DDP communication hook,
    in the variant passes/parallel/CompressGradients.cpp states: START
    plain steps, then error feedback, small tensors averaged as they are,
    and per matrix M alternately P = M orth(Q) averaged (even compressed
    steps, Q set by lowrank_init in the first) and Q = M^T orth(P)
    averaged (odd ones), M = P Q^T."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    buf = bucket.buffer()
    k = state.iter - START
    if bucket.is_last():
        state.iter += 1
    if k < 0:
        dist.all_reduce(buf)
        buf.div_(world)
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut
    key = bucket.index()
    if key not in state.error:
        state.error[key] = torch.zeros_like(buf)
    buf.add_(state.error[key])
    sent = buf.clone()
    for i, g in enumerate(bucket.gradients()):
        rows = g.shape[0] if g.dim() > 0 else 1
        cols = g.numel() // rows
        r = min(rows, cols, state.rank)
        m = g.view(rows, cols)
        if (rows + cols) * r * state.min_rate >= rows * cols:
            dist.all_reduce(m)
            m.div_(world)
            continue
        name = (key, i)
        if k == 0:
            state.q[name] = lowrank_init((cols, r))
            state.p[name] = torch.zeros(rows, r)
        p, q = state.p[name], state.q[name]
        if k % 2 == 0:
            acp_orthogonalize(q)
            torch.matmul(m, q, out=p)
            dist.all_reduce(p)
            p.div_(world)
        else:
            acp_orthogonalize(p)
            torch.matmul(m.t(), p, out=q)
            dist.all_reduce(q)
            q.div_(world)
        m.copy_(torch.matmul(p, q.t()))
    state.error[key] = sent - buf
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def torch_worker(rank, world, port, model_path, rows, recipe, approx_rank,
                 out_path):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    model = torch.load(model_path, weights_only=False)
    model.train()
    ddp = DDP(model)
    if recipe.get("gradient_compression") == "acp-sgd":
        ddp.register_comm_hook(AcpState(approx_rank, recipe.get(
            "compression_min_rate", 2.0)), acp_hook)
    else:
        register_powersgd(ddp, ps, recipe, approx_rank)
    train_torch(rank, world, model, ddp, rows, recipe, out_path)


def register_powersgd(ddp, ps, recipe, approx_rank):
    import torch

    state = ps.PowerSGDState(process_group=None,
                             matrix_approximation_rank=approx_rank,
                             start_powerSGD_iter=START,
                             min_compression_rate=recipe.get(
                                 "compression_min_rate", 2.0),
                             use_error_feedback=recipe.get(
                                 "compression_error_feedback", True),
                             warm_start=recipe.get("compression_warm_start",
                                                   True))
    ddp.register_comm_hook(state, ps.powerSGD_hook)

    def fixed_randn(*shape, **kwargs):
        # The hook fills each Q (batch 1 x cols x rank) from torch.randn.
        return lowrank_init(shape).to(kwargs.get("dtype", torch.float32))

    torch.randn = fixed_randn


def train_torch(rank, world, model, ddp, rows, recipe, out_path):
    import torch
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    opt = tc.make_optimizer(params, recipe)
    records = []
    for step in range(1, STEPS + 1):
        ids, labels = tc.micro_batch(rows, (step - 1) * world + rank,
                                     recipe["micro_batch_size"])
        out = ddp(input_ids=ids, labels=labels, use_cache=False)
        out.loss.backward()
        norm = float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(p.grad.double()) for p in params])))
        loss = torch.tensor([out.loss.item()], dtype=torch.float64)
        dist.all_reduce(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        records.append(dict(step=step, loss=float(loss) / world,
                            grad_norm=norm))
    if rank == 0:
        tensors = tc.peft_tensors(model)
        import numpy as np

        np.savez(out_path + ".npz", **tensors)
        with open(out_path + ".json", "w") as f:
            json.dump(records, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_reference(work, model_path, rows, recipe, world, approx_rank):
    import numpy as np
    import torch.multiprocessing as mp

    out_path = os.path.join(work, f"torch-{recipe['gradient_compression']}"
                            f"-w{world}-r{approx_rank}")
    mp.spawn(torch_worker, args=(world, free_port(), model_path, rows, recipe,
                                 approx_rank, out_path), nprocs=world)
    with open(out_path + ".json") as f:
        records = json.load(f)
    tensors = dict(np.load(out_path + ".npz"))
    return records, tensors


# ---------------------------------------------------------------------------
# tailor
# ---------------------------------------------------------------------------

def compile_plan(args, onnx_path, recipe, work, hardware):
    return tc.compile_plan(args.bin, onnx_path, recipe, work, hardware)


def train(args, plan, work, world, data, init, out, max_steps=STEPS,
          resume=None):
    if resume is None:
        shutil.rmtree(out, ignore_errors=True)
    cmd = tc.mpirun(world) + [
        os.path.join(args.bin, "tailor"), "train", plan, "--data", data,
        "--max-steps", str(max_steps), "--output-dir", out, "--threads", "1",
        "--init-adapter", init]
    if resume:
        cmd += ["--resume", resume]
    ok, msg = tc.run(cmd, 900, os.path.join(work, "tailor.log"))
    return None if ok else f"train: {msg}"


def inspect(args, plan):
    return json.loads(subprocess.run(
        [os.path.join(args.bin, "tailor"), "inspect", plan, "--json"],
        capture_output=True, text=True, check=True).stdout)


def compare(name, rows, ref_records, tensors, ref_tensors):
    import numpy as np

    failures, worst = [], 0.0
    if len(rows) != len(ref_records):
        return [f"{name}: {len(rows)} steps logged, PyTorch {len(ref_records)}"]
    for m, ref in zip(rows, ref_records):
        for what in ("loss", "grad_norm"):
            err = tc.rel_err(m[what], ref[what])
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"{name}: step {ref['step']} {what} "
                                f"{m[what]} vs PyTorch's {ref[what]} "
                                f"(relative {err:.2e})")
    tensor_worst = 0.0
    for key, ref in ref_tensors.items():
        if key not in tensors:
            failures.append(f"{name}: the adapter lacks {key}")
            continue
        err = tc.tensor_err(tensors[key], ref)
        tensor_worst = max(tensor_worst, err)
        if err > TOL:
            failures.append(f"{name}: {key} differs by {err:.2e} of max|ref|")
    norms = " ".join(f"{m['grad_norm']:.6f}" for m in rows)
    print(f"{name}: {len(rows)} steps (compressed from step {START + 1}), "
          f"worst loss/grad_norm relative error {worst:.2e}, worst adapter "
          f"tensor {tensor_worst:.2e}; grad norms {norms}")
    return failures


def check_bytes(name, rows, doc):
    rank0 = doc["ranks"][0]
    compressed = rank0["predicted_bytes_sent_per_step"]
    plain = rank0["predicted_bytes_sent_per_uncompressed_step"]
    # One figure a compressed step (PowerSGD), or ACP-SGD's P and Q steps'
    # in turn from predicted_steady_from_step (step START + 1 differs from
    # its place in the cycle only by a launch: Q's first values).
    cycle = rank0["predicted_bytes_sent_per_cycle_step"]
    steady = rank0["predicted_steady_from_step"]
    sent = [m.get("bytes_sent") for m in rows]
    want = [plain if step <= START else cycle[(step - steady) % len(cycle)]
            for step in range(1, len(rows) + 1)]
    failures = []
    if sent != want:
        failures.append(f"{name}: bytes sent per step {sent}, predicted "
                        f"{want}")
    if not 0 < compressed < plain:
        failures.append(f"{name}: compressed steps send {compressed} bytes, "
                        f"uncompressed ones {plain}")
    print(f"{name}: bytes sent per step as predicted: {plain} uncompressed "
          f"(steps 1-{START}), {' / '.join(f'{c:.0f}' for c in cycle)} "
          f"compressed ({plain / max(compressed, 1):.1f}x fewer)")
    return failures


def run_case(args, onnx_path, model_path, data, rows, init, world, rank,
             min_rate, cold=False, method="powersgd"):
    name = (f"{method}-world{world}-rank{rank}-minrate{min_rate:g}" +
            ("-cold" if cold else ""))
    work = os.path.join(args.work, name)
    recipe = recipe_for(world, rank, min_rate=min_rate, cold=cold,
                        method=method)
    plan, err = compile_plan(args, onnx_path, recipe, work, f"{world}xcpu")
    if err:
        return [f"{name}: compile: {err}"], None
    out = os.path.join(work, "out")
    err = train(args, plan, work, world, data, init, out)
    if err:
        return [f"{name}: {err}"], None
    metrics = [m for _, m in sorted(tc.read_metrics(out).items())]
    tensors = tc.load_safetensors(os.path.join(out,
                                               "adapter_model.safetensors"))
    ref_records, ref_tensors = torch_reference(work, model_path, rows, recipe,
                                               world, rank)
    failures = compare(name, metrics, ref_records, tensors, ref_tensors)
    failures += check_bytes(name, metrics, inspect(args, plan))
    return failures, dict(plan=plan, work=work, tensors=tensors)


def check_changes_result(args, onnx_path, data, init, compressed):
    """Without compression the same run ends elsewhere (so the comparison
    above tests PowerSGD, not plain DDP)."""
    work = os.path.join(args.work, "plain-world4")
    plan, err = compile_plan(args, onnx_path, recipe_for(4, 1, False), work,
                             "4xcpu")
    if err:
        return [f"plain-world4: compile: {err}"]
    out = os.path.join(work, "out")
    err = train(args, plan, work, 4, data, init, out)
    if err:
        return [f"plain-world4: {err}"]
    plain = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    worst = max(tc.tensor_err(compressed[k], plain[k]) for k in plain)
    print(f"plain DDP ends {worst:.2e} (of max|ref|) from PowerSGD's adapter")
    return [] if worst > 100 * TOL else [
        f"PowerSGD's adapter is within {worst:.2e} of plain DDP's"]


def check_resume(args, case, data, init):
    """Steps 1-5, then a resumed 6-8: the uninterrupted run's adapter, bit
    for bit (Q and the error are checkpointed states)."""
    work = case["work"]
    out = os.path.join(work, "resumed")
    err = train(args, case["plan"], work, 4, data, init, out, max_steps=5)
    if err:
        return [f"resume: first half: {err}"]
    err = train(args, case["plan"], work, 4, data, init, out,
                resume=os.path.join(out, "checkpoint-5"))
    if err:
        return [f"resume: second half: {err}"]
    got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    differ = [k for k in case["tensors"]
              if got[k].tobytes() != case["tensors"][k].tobytes()]
    if differ:
        return [f"resume: {differ} differ from the uninterrupted run"]
    print("resume at step 5 (compressed phase): the adapter is bit-identical "
          "to the uninterrupted run's")
    return []


def check_refusals(args, onnx_path):
    cases = [(name, dict(recipe_for(2, 1), **extra), hardware, expect)
             for name, extra, hardware, expect in (
                 ("zero2", dict(zero_stage=2), "2xcpu", "ddp only"),
                 ("topk-ratio", dict(gradient_compression="topk",
                                     compression_ratio=0), "2xcpu",
                  "'compression_ratio' must be in (0, 1]"),
                 ("one-rank", {}, "cpu", "needs several ranks"))]
    return tc.check_refusals(args.bin, onnx_path, args.work, cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    if shutil.which("mpirun") is None:
        print("SKIP: no mpirun")
        return 77
    import torch

    os.makedirs(args.work, exist_ok=True)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, _ = tc.build_and_export(onnx_path, seed=0, family="llama")
    rows = tc.make_rows(n_rows=STEPS * 4 * tc.B)
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    recipe = recipe_for(4, 1)
    peft = tc.make_peft(base, recipe, init_seed=7)
    init = os.path.join(args.work, "init_adapter")
    peft.save_pretrained(init)
    model_path = os.path.join(args.work, "peft_model.pt")
    torch.save(peft, model_path)

    failures, cases = [], {}
    # Rate 7 leaves v_proj's lora_B (32 x 8) uncompressed beside the rest:
    # a bucket of both kinds.
    # "cold": no error feedback, no warm start (Q set afresh every step).
    for world, rank, min_rate, cold in ((4, 1, 2.0, False),
                                        (4, 2, 2.0, False),
                                        (2, 1, 7.0, False),
                                        (2, 1, 2.0, True)):
        got, case = run_case(args, onnx_path, model_path, data, rows, init,
                             world, rank, min_rate, cold)
        failures += got
        cases[(world, rank, min_rate, cold)] = case
    # ACP-SGD against acp_hook, the same algorithm in PyTorch; rate 7
    # again, so a bucket of both kinds (P steps 4, 6, 8; Q steps 5, 7).
    got, _ = run_case(args, onnx_path, model_path, data, rows, init, 4, 1,
                      7.0, method="acp-sgd")
    failures += got
    main_case = cases.get((4, 1, 2.0, False))
    if main_case:
        failures += check_changes_result(args, onnx_path, data, init,
                                         main_case["tensors"])
        failures += check_resume(args, main_case, data, init)
    failures += check_refusals(args, onnx_path)
    for f in failures:
        print("FAIL " + f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
