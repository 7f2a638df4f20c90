#!/usr/bin/env python3
"""Sample packing end to end: `tailor train` with `sample_packing: true`
against PyTorch running every packed example on its own.

The tiny models of train_common (hidden 64, 2 layers, vocab 256, fp32) are
exported to ONNX: the Llama (rotary positions, whose tables the TorchScript
export folds to constants; also exported by the dynamo exporter at opset 18,
which computes the tables at run time from inv_freq), GPT-2 (learned position embeddings), Mistral with a sliding
window of 4 keys and Gemma-2 (sliding windows on alternate layers, soft-capped
scores): document masking combined with the other masks. A seeded JSONL set of
short examples of different lengths (input_ids rows, rows with their own
labels, prompt + completion rows, one longer than sequence_len, so
truncated) is packed by tailor greedily, in file order, into sequences of
sequence_len (16) with position ids restarting per example and document
masking in attention; micro-batches of 2 sequences. PEFT's LoRA (r 8;
q_proj and v_proj, GPT-2's c_attn) starts from PEFT's init with lora_B drawn
non-zero, so every adapter tensor has a gradient, and both sides start from
that adapter (--init-adapter).

The reference packs the examples the same way (re-implemented here), then
per micro-batch runs each example alone through the Hugging Face model
(batch 1, no padding, HF's own positions 0..n-1): the micro-batch loss is
the token-weighted mean over its examples (summed token cross-entropy of
label t + 1 scored from token t within each example / counted tokens), and
that loss is backpropagated.

Cases, per model:
  - `grad`: one SGD step (lr 1, no momentum, no weight decay), so the
    adapter tailor writes is init - gradient: the packed step's loss,
    grad_norm and every LoRA gradient (max|diff| / max|ref| per tensor)
    within 1e-4 of PyTorch's;
  - `train`: 4 AdamW steps over more than an epoch of packed sequences:
    per-step loss and grad_norm within 1e-4 relative, and the final adapter
    within 1e-4.
and that tailor describes the packing as the reference sees it.

  train_packing.py --bin build/bin --work build/test/train-packing
"""

import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_common as tc  # noqa: E402

TOL = 1e-4
IGNORE = -100
T, B = 16, 2
TARGETS = {"llama": ["q_proj", "v_proj"], "gpt2": ["c_attn"],
           "mistral-window": ["q_proj", "v_proj"],
           "gemma2": ["q_proj", "v_proj"],
           "llama-dynamo": ["q_proj", "v_proj"]}
# Cases exported by the dynamo exporter (opset 18), whose rotary tables are
# computed at run time from inv_freq: their model family.
DYNAMO = {"llama-dynamo": "llama"}


# ---------------------------------------------------------------------------
# Data and tailor's packing (runtime/train/DataLoader.h), re-implemented
# ---------------------------------------------------------------------------

def make_rows(seed, vocab=256):
    """Seeded JSONL rows of different lengths and kinds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = lambda k: rng.integers(0, vocab, int(k)).tolist()  # noqa: E731
    rows = []
    for i, n in enumerate([5, 3, 7, 4, 6, 9, 2, 11, 8, 5, 12, 3, 6, 20, 4]):
        kind = i % 4
        if kind == 1 and n >= 4:
            rows.append({"prompt": ids(n // 2), "completion": ids(n - n // 2)})
        elif kind == 2:
            x = ids(n)
            labels = list(x)
            labels[int(rng.integers(1, n))] = IGNORE
            rows.append({"input_ids": x, "labels": labels})
        else:
            rows.append({"input_ids": ids(n)})
    return rows


def example_of(row):
    """(ids, labels) truncated to T, or None when nothing after the first
    label counts (the loader leaves such examples out)."""
    if "input_ids" in row:
        ids, labels = row["input_ids"], row.get("labels", row["input_ids"])
    else:
        ids = row["prompt"] + row["completion"]
        labels = [IGNORE] * len(row["prompt"]) + row["completion"]
    ids, labels = ids[:T], labels[:T]
    if all(x == IGNORE for x in labels[1:]):
        return None
    return ids, labels


def pack(examples):
    """Greedy, in order: a sequence takes the next examples while they fit."""
    packs, used = [], T
    for e in examples:
        if used + len(e[0]) > T:
            packs.append([])
            used = 0
        packs[-1].append(e)
        used += len(e[0])
    return packs


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------

def packed_loss(model, examples):
    """Token-weighted mean cross-entropy over `examples`, each run alone."""
    import torch

    total, count = 0, 0
    for x, y in examples:
        logits = model(input_ids=torch.tensor([x]), use_cache=False).logits
        target = torch.tensor(y[1:])
        total = total + torch.nn.functional.cross_entropy(
            logits[0, :-1], target, ignore_index=IGNORE, reduction="sum")
        count += int((target != IGNORE).sum())
    return total / count


def grad_name(param_name):
    """PEFT parameter name -> the adapter file's tensor name."""
    return param_name.replace(".default", "")


def torch_run(base, r, packs, work):
    """Trains PEFT on the packed micro-batches; returns (records, grads of
    step 1, initial adapter, final adapter, initial adapter dir)."""
    import torch

    torch.manual_seed(11)
    model = tc.make_peft(base, r)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.05)
    init_dir = os.path.join(work, "init_adapter")
    model.save_pretrained(init_dir)
    init = tc.peft_tensors(model)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = tc.make_optimizer([p for _, p in params], r)
    records, first_grads = [], None
    model.train()
    for step in range(1, r["max_steps"] + 1):
        lr = opt.param_groups[0]["lr"]
        batch = [e for i in range(B)
                 for e in packs[((step - 1) * B + i) % len(packs)]]
        loss = packed_loss(model, batch)
        loss.backward()
        norm = float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(p.grad.double()) for _, p in params])))
        if first_grads is None:
            first_grads = {grad_name(n): p.grad.detach().numpy().copy()
                           for n, p in params}
        opt.step()
        opt.zero_grad(set_to_none=True)
        records.append(dict(step=step, loss=loss.item(), lr=lr, grad_norm=norm))
    return records, first_grads, init, tc.peft_tensors(model), init_dir


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def check_steps(metrics, records, problems):
    for rec in records:
        m = metrics.get(rec["step"])
        if m is None:
            problems.append(f"step {rec['step']}: missing from metrics.jsonl")
            continue
        errs = {k: tc.rel_err(float(m[k]), rec[k]) for k in ("loss", "grad_norm")}
        print(f"  step {rec['step']}: loss torch {rec['loss']:.7f} tailor "
              f"{float(m['loss']):.7f} (rel {errs['loss']:.1e}), grad_norm torch "
              f"{rec['grad_norm']:.6f} tailor {float(m['grad_norm']):.6f} (rel "
              f"{errs['grad_norm']:.1e})")
        for k, e in errs.items():
            if not e <= TOL:
                problems.append(f"step {rec['step']}: {k} {m[k]} vs torch "
                                f"{rec[k]:.8g} (rel {e:.2e})")


def run_case(name, family, args, base, onnx_path, rows, overrides):
    """Returns problems (empty: the case passed)."""
    work = os.path.join(args.work, f"{family}-{name}")
    os.makedirs(work)
    r = tc.recipe_defaults()
    r.update(sequence_len=T, micro_batch_size=B, sample_packing=True,
             shuffle=False, save_steps=0, lora_target_modules=TARGETS[family])
    r.update(overrides)
    data = os.path.join(work, "train.jsonl")
    tc.write_jsonl(rows, data)
    examples = [e for e in (example_of(row) for row in rows) if e is not None]
    packs = pack(examples)
    print(f"case {family}-{name}: {len(examples)} examples packed into "
          f"{len(packs)} sequences of {T} (lengths "
          + " | ".join(",".join(str(len(e[0])) for e in p) for p in packs)
          + "); " + ", ".join(f"{k} {v}" for k, v in overrides.items()))
    records, grads, init, final, init_dir = torch_run(base, r, packs, work)
    out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                       init_adapter=init_dir,
                                       threads=args.threads)
    if err:
        return [err]
    problems = []
    log = open(os.path.join(work, "tailor.log")).read()
    data_line = next((ln for ln in log.splitlines() if ln.startswith("data ")), "")
    print(f"  tailor: {data_line}")
    want = f": {len(examples)} examples, packed into {len(packs)} sequences of {T}"
    if want not in data_line:
        problems.append(f"tailor's data line does not say{want!r}: {data_line!r}")
    check_steps(tc.read_metrics(out), records, problems)
    got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    if name == "grad":
        # One SGD step at lr 1: the adapter moved by minus the gradient.
        tailor_grads = {k: init[k] - got[k] for k in got if k in init}
        w, wname, probs = tc.compare_tensors(tailor_grads, grads, TOL)
        problems += [f"gradient: {p}" for p in probs]
        print(f"  gradients of {len(grads)} LoRA tensors: worst max|diff|/max|ref| "
              f"{w:.2e} ({wname})")
    else:
        w, wname, probs = tc.compare_tensors(got, final, TOL)
        problems += [f"final adapter: {p}" for p in probs]
        print(f"  final adapter: worst max|diff|/max|ref| {w:.2e} ({wname}); it "
              f"moved {tc.movement(final, init):.2g} from its start")
    return problems


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor (default %(default)s)")
    ap.add_argument("--work", required=True, help="scratch directory (recreated)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--family", action="append", choices=sorted(TARGETS),
                    help="model families to run (default: all)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    ok, why = tc.tailor_available(args.bin)
    if not ok:
        print(f"error: {why}", file=sys.stderr)
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rows = make_rows(2025)
    cases = [("grad", dict(optimizer="sgd", learning_rate=1.0, momentum=0.0,
                           weight_decay=0.0, max_steps=1)),
             ("train", dict(optimizer="adamw", learning_rate=2e-3,
                            max_steps=4))]
    failures, total = [], 0
    for family in args.family or list(TARGETS):
        onnx_path = os.path.join(args.work, f"{family}.onnx")
        base, info = tc.build_and_export(
            onnx_path, family=DYNAMO.get(family, family),
            exporter="dynamo" if family in DYNAMO else "torchscript")
        print(f"model: tiny {info['model_class']}, {info['params']:,} parameters")
        for name, overrides in cases:
            total += 1
            problems = run_case(name, family, args, base, onnx_path, rows,
                                overrides)
            label = f"{family}-{name}"
            if problems:
                failures.append(label)
                print(f"  FAIL {label}:")
                for p in problems[:20]:
                    print(f"    {p}")
            else:
                print(f"  ok   {label}")
    print(f"summary: {total - len(failures)}/{total} packing cases match PyTorch "
          f"run per example (loss, grad_norm, gradients, adapter to {TOL:g})" +
          (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
