#!/usr/bin/env python3
"""SFT data end to end: `tailor train` on JSONL examples of varied length
against PyTorch + PEFT running the same padded batches.

The tiny Llama of train_common (hidden 64, 2 layers, vocab 256, fp32) is
exported to ONNX and trained with LoRA (r 8 on q_proj, v_proj, AdamW) on a
seeded JSONL set whose examples are shorter than sequence_len (16), exactly
as long, longer (truncated), `prompt` + `completion` rows (loss on the
completion only; one whose completion is cut off by sequence_len, so it has
nothing to train and is left out), and rows with their own labels. Each
case trains twice:

  - PyTorch: peft.get_peft_model on the HF model, its initial adapter saved
    and given to tailor (--init-adapter); each example on its own row,
    truncated to sequence_len and right-padded with pad_token_id whose
    labels are -100, the rows taken in file order or in tailor's documented
    seeded order (std::mt19937_64 Fisher-Yates, re-implemented here);
    HF's causal-LM loss with attention_mask marking the pads (what
    DataCollatorWithPadding gives a Trainer); per micro-batch loss / accum
    backpropagated, AdamW, zero_grad. After every eval_steps steps and the
    last, the validation loss: the mean over every counted token of the
    validation examples (summed token losses / counted tokens), no grad.
  - tailor: `tailor compile` with the same recipe and `tailor train`.

and checks, per step, loss and grad_norm within 1e-4 relative; eval_loss at
exactly the expected steps within 1e-4 relative; the final adapter within
1e-4 (max|diff| / max|ref| per tensor); and that tailor describes the data
as the reference sees it (examples kept, held out, truncated).

Cases: `evaldata` (sample_packing: false, pad_token_id 3, file order,
gradient accumulation 2, eval_steps 2, --eval-data val.jsonl) and `heldout`
(sample_packing unset, shuffled, val_set_size 0.2 held out of the training
examples by tailor's seeded choice, eval_steps 3).

  train_sft_data.py --bin build/bin --work build/test/train-sft-data
"""

import argparse
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_common as tc  # noqa: E402

TOL = 1e-4
WEIGHT_TOL = 1e-4
IGNORE = -100
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------
# tailor's documented orders (runtime/train/DataLoader.cpp), re-implemented
# ---------------------------------------------------------------------------

class MT19937_64:
    """std::mt19937_64 (the C++ standard fixes its output)."""

    def __init__(self, seed):
        self.mt = [seed & MASK64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64)
        self.index = 312

    def __call__(self):
        if self.index >= 312:
            for i in range(312):
                x = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                y = x >> 1
                if x & 1:
                    y ^= 0xB5026F5AA96619E9
                self.mt[i] = self.mt[(i + 156) % 312] ^ y
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def shuffled_order(n, seed):
    """Fisher-Yates over mt19937_64 with rejection of the lowest
    (2^64 - i) % i draws."""
    order = list(range(n))
    rng = MT19937_64(seed)
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i
        x = rng()
        while x < threshold:
            x = rng()
        j = x % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def split_mix64(x):
    x = (x + 0x9e3779b97f4a7c15) & MASK64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & MASK64
    return x ^ (x >> 31)


def held_out(n, fraction, seed):
    """The indexes val_set_size holds out: ceil(fraction * n) of a seeded
    permutation, in file order."""
    count = math.ceil(fraction * n) if fraction < 1 else int(fraction)
    order = shuffled_order(n, split_mix64(seed ^ 0x76616c6964617465))
    return sorted(order[:count])


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def make_examples(n, seed, T, vocab=256):
    """Seeded JSONL rows of every kind an SFT set has (see the docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = lambda k: rng.integers(0, vocab, int(k)).tolist()  # noqa: E731
    rows = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            rows.append({"input_ids": ids(rng.integers(4, T))})
        elif kind == 1:
            rows.append({"prompt": ids(rng.integers(3, 9)),
                         "completion": ids(rng.integers(3, 9))})
        elif kind == 2:
            rows.append({"input_ids": ids(T)})
        elif kind == 3:
            x = ids(rng.integers(T + 2, T + 9))
            k = int(rng.integers(2, 6))
            rows.append({"input_ids": x, "labels": [IGNORE] * k + x[k:]})
        elif kind == 4:
            x = ids(rng.integers(5, 13))
            labels = list(x)
            for j in rng.choice(len(x), size=2, replace=False):
                labels[int(j)] = IGNORE
            rows.append({"input_ids": x, "labels": labels})
        else:
            rows.append({"prompt": ids(rng.integers(T - 3, T)),
                         "completion": ids(rng.integers(4, 7))})
    # Nothing to train once truncated: left out by the loader.
    rows.append({"prompt": ids(T), "completion": ids(3)})
    return rows


def example_of(row, T):
    """(ids, labels) truncated to T, or None when no label after the first
    counts (the loader leaves such examples out)."""
    if "input_ids" in row:
        ids = row["input_ids"]
        labels = row.get("labels", ids)
    else:
        ids = row["prompt"] + row["completion"]
        labels = [IGNORE] * len(row["prompt"]) + row["completion"]
    ids, labels = ids[:T], labels[:T]
    if all(x == IGNORE for x in labels[1:]):
        return None
    return ids, labels


def padded_batch(examples, T, pad_id):
    """(input_ids, labels, attention_mask) int64 tensors of right-padded
    rows."""
    import torch

    ids, labels, mask = [], [], []
    for x, y in examples:
        n = len(x)
        ids.append(x + [pad_id] * (T - n))
        labels.append(y + [IGNORE] * (T - n))
        mask.append([1] * n + [0] * (T - n))
    as_tensor = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    return as_tensor(ids), as_tensor(labels), as_tensor(mask)


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------

def validation_loss(model, examples, T, pad_id):
    """Summed token cross-entropy over every counted token / their count
    (label t + 1 scored from token t, as HF's causal-LM loss)."""
    import torch

    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in examples:
            ids, labels, mask = padded_batch([(x, y)], T, pad_id)
            logits = model(input_ids=ids, attention_mask=mask,
                           use_cache=False).logits.double()
            target = labels[:, 1:]
            total += float(torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), target.reshape(-1),
                ignore_index=IGNORE, reduction="sum"))
            count += int((target != IGNORE).sum())
    model.train(was_training)
    return total / count


def torch_run(base, r, train_examples, val_examples):
    """Trains PEFT as tailor should; returns (records, {step: eval_loss},
    initial adapter, final adapter, initial adapter dir)."""
    import torch

    T, B = r["sequence_len"], r["micro_batch_size"]
    pad_id = r.get("pad_token_id", 0)
    accum = r["gradient_accumulation_steps"]
    model = tc.make_peft(base, r)
    init_dir = os.path.join(r["_work"], "init_adapter")
    model.save_pretrained(init_dir)
    init = tc.peft_tensors(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = tc.make_optimizer(params, r)
    sched = tc.make_scheduler(opt, r)
    n = len(train_examples)
    counter = 0

    def next_example():
        nonlocal counter
        epoch, index = divmod(counter, n)
        counter += 1
        if r["shuffle"]:
            index = shuffled_order(n, r["seed"] + epoch)[index]
        return train_examples[index]

    records, evals = [], {}
    model.train()
    for step in range(1, r["max_steps"] + 1):
        lr = opt.param_groups[0]["lr"]
        losses = []
        for _ in range(accum):
            ids, labels, mask = padded_batch([next_example() for _ in range(B)],
                                             T, pad_id)
            out = model(input_ids=ids, attention_mask=mask, labels=labels,
                        use_cache=False)
            (out.loss / accum).backward()
            losses.append(out.loss.item())
        norm = float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(p.grad.double()) for p in params])))
        if r["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(params, r["max_grad_norm"])
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        records.append(dict(step=step, loss=sum(losses) / len(losses), lr=lr,
                            grad_norm=norm))
        every = r.get("eval_steps", 0)
        if (every and step % every == 0) or step == r["max_steps"]:
            evals[step] = validation_loss(model, val_examples, T, pad_id)
    return records, evals, init, tc.peft_tensors(model), init_dir


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def run_case(name, args, base, onnx_path, rows, val_rows, overrides):
    """Returns problems (empty: the case passed)."""
    work = os.path.join(args.work, name)
    os.makedirs(work)
    r = tc.recipe_defaults()
    r.update(max_steps=6, save_steps=0, learning_rate=2e-3)
    r.update(overrides)
    T = r["sequence_len"]
    data = os.path.join(work, "train.jsonl")
    tc.write_jsonl(rows, data)
    usable = [e for e in (example_of(row, T) for row in rows) if e is not None]
    truncated = sum(len(row.get("input_ids", row.get("prompt", []) +
                                row.get("completion", []))) > T for row in rows)
    train_args = []
    if val_rows is not None:
        val_path = os.path.join(work, "val.jsonl")
        tc.write_jsonl(val_rows, val_path)
        train_args = ["--eval-data", val_path]
        val = [e for e in (example_of(row, T) for row in val_rows) if e is not None]
        train = usable
    else:
        held = set(held_out(len(usable), r["val_set_size"], r["seed"]))
        val = [e for i, e in enumerate(usable) if i in held]
        train = [e for i, e in enumerate(usable) if i not in held]
    print(f"case {name}: {len(rows)} rows, {len(usable)} with tokens to train "
          f"({truncated} truncated to {T}), {len(train)} train / {len(val)} "
          f"validation examples; " +
          ", ".join(f"{k} {v}" for k, v in overrides.items()))
    r["_work"] = work
    records, evals, init, final, init_dir = torch_run(base, r, train, val)
    del r["_work"]
    out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                       init_adapter=init_dir,
                                       threads=args.threads,
                                       train_args=train_args)
    if err:
        return [err]
    problems = []
    moved = tc.movement(final, init)
    if not moved > 100 * WEIGHT_TOL:
        problems.append(f"the reference adapter moved only {moved:.2e} (vacuous)")
    log = open(os.path.join(work, "tailor.log")).read()
    data_line = next((ln for ln in log.splitlines() if ln.startswith("data ")), "")
    print(f"  tailor: {data_line}")
    if f": {len(train)} examples, one per sequence of {T}" not in data_line:
        problems.append(f"tailor's data line does not say {len(train)} examples: "
                        f"{data_line!r}")
    val_line = next((ln for ln in log.splitlines()
                     if ln.startswith("validation ")), "")
    print(f"  tailor: {val_line}")
    if f": {len(val)} examples" not in val_line:
        problems.append(f"tailor's validation line does not say {len(val)} "
                        f"examples: {val_line!r}")

    metrics = tc.read_metrics(out)
    print(f"  {'step':>4} {'loss torch':>11} {'rel err':>8} {'gnorm torch':>11} "
          f"{'rel err':>8} {'eval torch':>11} {'eval tailor':>11} {'rel err':>8}")
    worst = {"loss": 0.0, "grad_norm": 0.0, "eval_loss": 0.0}
    for rec in records:
        s = rec["step"]
        m = metrics.get(s)
        if m is None:
            problems.append(f"step {s}: missing from metrics.jsonl")
            continue
        errs = {k: tc.rel_err(float(m[k]), rec[k]) for k in ("loss", "grad_norm")}
        line = (f"  {s:>4} {rec['loss']:>11.7f} {errs['loss']:>8.1e} "
                f"{rec['grad_norm']:>11.6f} {errs['grad_norm']:>8.1e}")
        if s in evals:
            got = m.get("eval_loss")
            e = tc.rel_err(float(got), evals[s]) if got is not None else float("inf")
            errs["eval_loss"] = e
            line += (f" {evals[s]:>11.7f} "
                     f"{float(got) if got is not None else float('nan'):>11.7f} {e:>8.1e}")
        elif "eval_loss" in m:
            problems.append(f"step {s}: eval_loss {m['eval_loss']} where none "
                            "was due")
        print(line)
        for k, e in errs.items():
            worst[k] = max(worst[k], e)
            if not e <= TOL:
                problems.append(f"step {s}: {k} {m.get(k)} vs torch "
                                f"{rec[k] if k in rec else evals[s]:.8g} (rel {e:.2e})")
    got = tc.load_safetensors(os.path.join(out, "adapter_model.safetensors"))
    w, wname, probs = tc.compare_tensors(got, final, WEIGHT_TOL)
    problems += [f"final adapter: {p}" for p in probs]
    print(f"  worst rel err: loss {worst['loss']:.2e}, grad_norm "
          f"{worst['grad_norm']:.2e}, eval_loss {worst['eval_loss']:.2e}; final "
          f"adapter max|diff|/max|ref| {w:.2e} ({wname}); the adapter moved "
          f"{moved:.2g} from its start")
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
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    ok, why = tc.tailor_available(args.bin)
    if not ok:
        print(f"error: {why}", file=sys.stderr)
        return 1
    # The orders re-implemented here are tailor's: its unit test pins this one.
    if shuffled_order(10, 42) != [1, 7, 9, 0, 3, 8, 4, 2, 5, 6]:
        print("error: shuffled_order does not reproduce std::mt19937_64's "
              "pinned order", file=sys.stderr)
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, info = tc.build_and_export(onnx_path)
    print(f"model: tiny {info['model_class']}, {info['params']:,} parameters, "
          f"exported to {onnx_path}")
    T = tc.T
    rows = make_examples(24, 2024, T)
    cases = [
        ("evaldata", make_examples(7, 77, T),
         dict(sample_packing=False, pad_token_id=3, shuffle=False,
              gradient_accumulation_steps=2, eval_steps=2)),
        ("heldout", None,
         dict(shuffle=True, val_set_size=0.2, eval_steps=3, max_grad_norm=1.0)),
    ]
    failures = []
    for name, val_rows, overrides in cases:
        problems = run_case(name, args, base, onnx_path, rows, val_rows, overrides)
        if problems:
            failures.append(name)
            print(f"  FAIL {name}:")
            for p in problems[:20]:
                print(f"    {p}")
        else:
            print(f"  ok   {name}")
    print(f"summary: {len(cases) - len(failures)}/{len(cases)} SFT data cases match "
          f"PyTorch (loss, grad_norm, eval_loss rel {TOL:g})" +
          (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
