#!/usr/bin/env python3
"""End-to-end: gathers, scatters, cumsum and remainder on run-time tensors.

A tiny trainable PyTorch module whose forward pass computes what Hugging Face
models compute at run time: position ids as the cumulative sum of the
attention mask (masked_fill of padding, as HF's
`create_position_ids_from_input_ids`), per-token feature picks with
torch.gather, a scatter_add back into zeros, torch.remainder on token ids,
torch.sign, and a running mean over the sequence with torch.cumsum. It is
exported with torch.onnx (TorchScript at opset 17, the dynamo exporter at
opset 18), compiled with `tailor compile` (static shapes), run with
tailor-run on seeded input_ids and a left-padded attention_mask, and its
logits compared with PyTorch's to --tol (1e-4). The graphs must keep
GatherElements, ScatterElements, CumSum and Mod as run-time tg ops (nothing
here is known at compile time).

  indexing_model.py --tailor build/bin/tailor --tailor-run build/bin/tailor-run \\
      --work build/test/indexing-model
"""

import argparse
import os
import subprocess
import sys

VOCAB, DIM, BATCH, SEQ, PICKS = 37, 16, 2, 9, 4


def build():
    import torch
    import torch.nn as nn

    class IndexingLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Embedding(SEQ + 1, DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.head = nn.Linear(DIM, VOCAB)

        def forward(self, input_ids, attention_mask):
            # HF's position ids: cumsum of the mask, padding set to 1.
            pos_ids = attention_mask.long().cumsum(-1) - 1
            pos_ids = pos_ids.masked_fill(attention_mask == 0, 1)
            h = self.embed(input_ids) + self.pos(pos_ids)
            h = torch.tanh(self.proj(h))
            # Per-token feature picks (GatherElements on run-time indices)
            # scattered back with scatter_add (ScatterElements add).
            offsets = torch.arange(PICKS, device=input_ids.device) * 3
            idx = torch.remainder(input_ids.unsqueeze(-1) * 5 + offsets, DIM)
            picked = torch.gather(h, -1, idx)
            h = h + torch.zeros_like(h).scatter_add(-1, idx, picked * 0.5)
            parity = torch.remainder(input_ids, 2).unsqueeze(-1).to(h.dtype)
            h = h + torch.sign(h) * parity * 0.1
            # A running mean over the sequence (CumSum of floats).
            count = torch.cumsum(attention_mask.to(h.dtype), -1).clamp(min=1)
            h = torch.cumsum(h * attention_mask.unsqueeze(-1).to(h.dtype), 1)
            h = h / count.unsqueeze(-1)
            return self.head(h)

    torch.manual_seed(11)
    return IndexingLM().eval()


def inputs():
    import numpy as np

    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[1, :3] = 0  # left padding
    return ids, mask


def export(model, path, exporter, opset):
    import torch

    ids, mask = inputs()
    args = (torch.from_numpy(ids), torch.from_numpy(mask))
    kwargs = dict(input_names=["input_ids", "attention_mask"],
                  output_names=["logits"], opset_version=opset)
    if exporter == "dynamo":
        torch.onnx.export(model, args, path, dynamo=True, **kwargs)
    else:
        torch.onnx.export(model, args, path, dynamo=False, **kwargs)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check(args, exporter, opset):
    import numpy as np
    import torch

    name = f"indexing-{exporter}-{opset}"
    model = build()
    path = os.path.join(args.work, name + ".onnx")
    export(model, path, exporter, opset)
    ids, mask = inputs()
    with torch.no_grad():
        want = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    graph = os.path.join(args.work, name + ".mlir")
    r = run([args.tailor, "compile", path, "--compile-to=graph", "-o", graph])
    if r.returncode != 0:
        return f"{name}: compile failed: {r.stderr.strip()}"
    text = open(graph).read()
    missing = [op for op in ("tg.gather_elements", "tg.scatter_elements",
                             "tg.cumsum", "tg.mod", "tg.sign")
               if f" = {op} " not in text]
    if missing:
        return f"{name}: expected run-time {', '.join(missing)} in the graph"
    plan = os.path.join(args.work, name + ".tplan")
    r = run([args.tailor, "compile", path, "-o", plan])
    if r.returncode != 0:
        return f"{name}: plan failed: {r.stderr.strip()}"
    feeds = []
    for key, value in (("input_ids", ids), ("attention_mask", mask)):
        f = os.path.join(args.work, f"{name}.{key}.npy")
        np.save(f, value)
        feeds += ["--input", f"{key}={f}"]
    out = os.path.join(args.work, name + ".logits.npy")
    r = run([args.tailor_run, plan, *feeds, "--output", f"logits={out}"])
    if r.returncode != 0:
        return f"{name}: tailor-run failed: {r.stderr.strip()}"
    err = float(np.abs(np.load(out) - want).max())
    print(f"{name}: max |tailor - PyTorch| = {err:.2e}")
    if not err <= args.tol:
        return f"{name}: logits differ by {err:.3e} (tolerance {args.tol})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tailor", required=True)
    ap.add_argument("--tailor-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    problems = []
    for exporter, opset in (("torchscript", 17), ("dynamo", 18)):
        problem = check(args, exporter, opset)
        if problem:
            print(problem)
            problems.append(problem)
    print(f"summary: {2 - len(problems)}/2 indexing model exports match PyTorch")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
