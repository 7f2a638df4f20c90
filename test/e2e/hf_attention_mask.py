#!/usr/bin/env python3
"""Exports that take an attention_mask, as optimum's and most hand-made
exports do, against Hugging Face (issue: real-world inputs).

For Llama, Qwen2 and GPT-2 (export_hf's seeded tiny models), a wrapper
forward(input_ids, attention_mask) -> logits, and for Llama also
forward(input_ids, attention_mask, position_ids) as optimum exports decoders,
is exported by the TorchScript exporter (opset 17) and the dynamo exporter
(opset 18), both with dynamic batch and sequence. Checks, per export:

  - `tailor compile` (inference, B=2, T=16) raises attention in every
    layer from the run-time mask (inspect: one `attention` launch a layer),
    as causal attention plus a [B, 1, 1, S] bias over the keys (the IR);
  - `tailor-run` with the mask all ones, right-padded (row 2 ends in 5
    pads) and left-padded (row 2 starts with 5 pads): the logits of every
    real token equal transformers' model(input_ids, attention_mask) within
    LOGITS_TOL. A left pad is a query row whose mask hides every key it
    could see: the CPU kernels give it zeros, not NaN (NaN there would
    reach the real rows through P V, as 0 x NaN);
  - `tailor generate` of the export (the decode step's mask is all ones:
    the cache holds no padding) equals transformers' greedy generate;
  - with position_ids, sample packing feeds each example's positions
    there: the same losses as the export without them, packed by
    tailor-pack-sequences;
  - LoRA training of the export (`tailor train`, which feeds the mask all
    ones: its loaders pad on the right, and no real token of a causal model
    sees a right pad) against PEFT from the same initial adapter: every
    step's loss within LOSS_TOL.

  hf_attention_mask.py --bin BUILD/bin --work DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

import train_common as tc  # noqa: E402

# (family, with position_ids): optimum's decoder exports take position_ids
# as a third input.
VARIANTS = (("llama", False), ("qwen2", False), ("gpt2", False),
            ("llama", True))
LORA_TARGETS = {"gpt2": ["c_attn"]}  # the others: q_proj, v_proj
EXPORTERS = ("torchscript", "dynamo")
B, T = 2, 16
PADS = 5
LOGITS_TOL = 1e-4
STEPS = 8
LOSS_TOL = 1e-5
GEN_LEN = 32
PROMPT = [1, 2, 3, 4, 5]
NEW_TOKENS = 8


def masks():
    import torch

    ones = torch.ones(B, T, dtype=torch.int64)
    right, left = ones.clone(), ones.clone()
    right[1, T - PADS:] = 0
    left[1, :PADS] = 0
    return [("ones", ones), ("right-padded", right), ("left-padded", left)]


def build(family):
    """The HF model of export_hf's tiny `family` (eval, dropout off)."""
    import export_hf

    wrapped, ess, _ = export_hf.build_model(family, 0, None)
    wrapped.__class__ = type(wrapped).__mro__[1]
    model = wrapped.eval()
    tc.disable_dropout(model)
    return model, ess


class MaskedForward:
    """Within the block, `model` computes its logits from (input_ids,
    attention_mask[, position_ids]): a subclass, so the initializers keep
    the module paths PEFT and tailor name adapters by."""

    def __init__(self, model, positions):
        self.model, self.cls, self.positions = model, type(model), positions

    def __enter__(self):
        cls = self.cls

        class WithMask(cls):
            def forward(self, input_ids, attention_mask):
                return cls.forward(self, input_ids=input_ids,
                                   attention_mask=attention_mask,
                                   use_cache=False).logits

        class WithPositions(cls):
            def forward(self, input_ids, attention_mask, position_ids):
                return cls.forward(self, input_ids=input_ids,
                                   attention_mask=attention_mask,
                                   position_ids=position_ids,
                                   use_cache=False).logits

        self.model.__class__ = WithPositions if self.positions else WithMask
        return self.model

    def __exit__(self, *exc):
        self.model.__class__ = self.cls


def export(module, exporter, path, positions):
    import torch

    import export_hf

    ids = torch.randint(0, 256, (B, T), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(B, T, dtype=torch.int64)
    inputs = ["input_ids", "attention_mask"]
    example = (ids, mask)
    if positions:
        inputs.append("position_ids")
        example += (torch.arange(T).unsqueeze(0).expand(B, T).contiguous(),)
    names = dict(input_names=inputs, output_names=["logits"])
    with torch.no_grad(), warnings.catch_warnings(), export_hf._quiet_stdout():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            batch = torch.export.Dim("batch", min=1, max=64)
            seq = torch.export.Dim("seq", min=2, max=export_hf.MAXPOS)
            dims = {0: batch, 1: seq}
            prog = torch.onnx.export(
                module, example, dynamo=True, opset_version=18,
                dynamic_shapes={name: dims for name in inputs},
                optimize=True, verbose=False, report=False, **names)
            prog.save(path)
        else:
            axes = {0: "batch", 1: "seq"}
            with export_hf._ts_symbolics(17):
                torch.onnx.export(
                    module, example, path, dynamo=False, opset_version=17,
                    dynamic_axes={name: axes for name in inputs + ["logits"]},
                    do_constant_folding=True, **names)


def check_logits(args, model, path, layers, work, positions):
    """Compiles an inference plan and compares its logits with HF's under
    each mask. Returns the problems."""
    import numpy as np
    import torch

    plan = os.path.join(work, "forward.tplan")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", path,
                      "--batch", str(B), "--seq", str(T), "-o", plan], 300)
    if not ok:
        return [f"compile: {msg}"]
    launches = subprocess.run([os.path.join(args.bin, "tailor"), "inspect", plan],
                              capture_output=True, text=True).stdout
    raised = sum(int(line.split()[1]) for line in launches.splitlines()
                 if line.split()[:1] == ["attention"])
    problems = []
    if raised != layers:
        problems.append(f"{raised} attention launches for {layers} layers")
    # Raised as causal attention plus a [B, 1, 1, S] padding bias, not as a
    # [B, 1, T, S] bias of both (which would score the masked half too, and
    # keep generation and sample packing out).
    graph = os.path.join(work, "graph.mlir")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", path,
                      "--batch", str(B), "--seq", str(T), "--compile-to=graph",
                      "-o", graph], 300)
    split = 0
    if ok:
        with open(graph) as f:
            split = sum(1 for line in f if "tg.attention" in line and
                        "{causal" in line and f"tensor<{B}x1x1x{T}xf32>) ->" in line)
    if split != layers:
        problems.append(f"{split} of {layers} attentions raised as causal with "
                        f"a padding bias over the keys ({msg if not ok else ''})")
    ids = torch.randint(0, 256, (B, T), generator=torch.Generator().manual_seed(9))
    report = []
    position_ids = torch.arange(T).unsqueeze(0).expand(B, T).contiguous()
    np.save(os.path.join(work, "positions.npy"), position_ids.numpy())
    for name, mask in masks():
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=mask, use_cache=False,
                        position_ids=position_ids if positions else None).logits
        np.save(os.path.join(work, "ids.npy"), ids.numpy())
        np.save(os.path.join(work, "mask.npy"), mask.numpy())
        out = os.path.join(work, "logits.npy")
        extra = (["--input", f"position_ids={work}/positions.npy"]
                 if positions else [])
        ok, msg = tc.run([os.path.join(args.bin, "tailor-run"), plan,
                          "--input", f"input_ids={work}/ids.npy",
                          "--input", f"attention_mask={work}/mask.npy",
                          *extra, "--output", f"logits={out}"], 300)
        if not ok:
            problems.append(f"{name}: {msg}")
            continue
        real = mask.numpy().astype(bool)
        err = float(np.abs(np.load(out) - ref.numpy())[real].max())
        report.append(f"{name} {err:.1e}")
        if not err <= LOGITS_TOL:
            problems.append(f"{name}: logits of real tokens differ by {err:.2e}")
    print(f"  attention raised in {raised}/{layers} layers ({split} causal with "
          f"a [B, 1, 1, S] padding bias); logits of real "
          f"tokens vs HF: {', '.join(report)}")
    return problems


def check_generate(args, model, path, work):
    """`tailor generate` (the cache holds no padding: the mask is ones)
    against transformers' greedy generate."""
    import json

    import torch

    plan = os.path.join(work, "generate.tplan")
    ok, msg = tc.run([os.path.join(args.bin, "tailor"), "compile", path,
                      "--task", "generate", "--max-seq-len", str(GEN_LEN),
                      "-o", plan], 300)
    if not ok:
        return [f"generate compile: {msg}"]
    ok, out = tc.run([os.path.join(args.bin, "tailor"), "generate", plan,
                      "--prompt-ids", ",".join(map(str, PROMPT)),
                      "--max-new-tokens", str(NEW_TOKENS), "--json"], 300)
    if not ok:
        return [f"generate: {out}"]
    got = json.loads(out.strip().splitlines()[-1])["generated_ids"]
    with torch.no_grad():
        ref = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS,
                             do_sample=False, min_new_tokens=NEW_TOKENS,
                             pad_token_id=0)[0, len(PROMPT):].tolist()
    print(f"  generate {NEW_TOKENS} tokens: tailor {got}, transformers {ref}")
    return [] if got == ref else [f"generated {got}, transformers {ref}"]


def check_training(args, family, model, path, work):
    """LoRA through `tailor train` (mask fed as ones) against PEFT."""
    r = tc.recipe_defaults()
    r.update(max_steps=STEPS, save_steps=0, sequence_len=T, micro_batch_size=B,
             learning_rate=2e-3)
    if family in LORA_TARGETS:
        r["lora_target_modules"] = LORA_TARGETS[family]
    rows = tc.make_rows(n_rows=STEPS * B, seq=T)
    data = os.path.join(work, "data.jsonl")
    tc.write_jsonl(rows, data)
    peft = tc.make_peft(model, r)
    init = os.path.join(work, "init_adapter")
    peft.save_pretrained(init)
    ref, _ = tc.torch_train(peft, rows, r, lambda m: None)
    lora = os.path.join(work, "lora")
    os.makedirs(lora)
    out, err = tc.tailor_compile_train(args.bin, path, r, lora, data,
                                       init_adapter=init)
    if err:
        return [f"train: {err}"]
    got = tc.read_metrics(out)
    worst = max(tc.rel_err(float(got[x["step"]]["loss"]), x["loss"]) for x in ref)
    print(f"  LoRA {STEPS} steps vs PEFT: worst loss rel err {worst:.1e}")
    return [] if worst <= LOSS_TOL else [f"losses differ from PEFT's by {worst:.2e}"]


PACKED_LENGTHS = [5, 3, 7, 4, 6, 9, 11, 8, 5, 12, 3, 6, 16, 4, 7, 9]


def check_packing(args, path, plain, work):
    """sample_packing: true on the export that takes position_ids (the
    trainer feeds each example's restarting positions there) against the
    same model exported without them (tailor-pack-sequences gives it its
    positions; e2e.train_packing checks that one against PyTorch): the same
    losses, from the same initial adapter."""
    import random

    rng = random.Random(11)
    rows = [{"input_ids": [rng.randrange(256) for _ in range(n)]}
            for n in PACKED_LENGTHS]
    data = os.path.join(work, "packed.jsonl")
    with open(data, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    r = tc.recipe_defaults()
    r.update(max_steps=3, save_steps=0, sequence_len=T, micro_batch_size=B,
             learning_rate=2e-3, sample_packing=True)
    init = os.path.join(work, "init_adapter")
    losses = {}
    for name, model in (("position_ids", path), ("plain", plain)):
        out_dir = os.path.join(work, f"packed-{name}")
        os.makedirs(out_dir)
        out, err = tc.tailor_compile_train(args.bin, model, r, out_dir, data,
                                           init_adapter=init)
        if err:
            return [f"packing ({name}): {err}"]
        losses[name] = [float(m["loss"]) for _, m in
                        sorted(tc.read_metrics(out).items())]
    worst = max(tc.rel_err(a, b) for a, b in zip(losses["position_ids"],
                                                  losses["plain"]))
    print(f"  sample packing through the export's position_ids: losses "
          f"{losses['position_ids']}, without them {losses['plain']}")
    return [] if worst <= 1e-6 else [f"packed losses differ by {worst:.2e}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join("build", "bin"))
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    shutil.rmtree(args.work, ignore_errors=True)
    problems = []
    for family, positions in VARIANTS:
        for exporter in EXPORTERS:
            variant = family + ("+position_ids" if positions else "")
            label = f"{variant}/{exporter}"
            print(label)
            work = os.path.join(args.work, variant, exporter)
            os.makedirs(work)
            model, ess = build(family)
            path = os.path.join(work, "model.onnx")
            try:
                with MaskedForward(model, positions) as module:
                    export(module, exporter, path, positions)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{label}: export failed: {type(e).__name__}: "
                                f"{str(e)[:300]}")
                continue
            found = check_logits(args, model, path, ess["num_layers"], work,
                                 positions)
            found += check_generate(args, model, path, work)
            found += check_training(args, family, model, path, work)
            if positions:
                plain = os.path.join(args.work, family, exporter, "model.onnx")
                found += check_packing(args, path, plain, work)
            problems += [f"{label}: {p}" for p in found]
    if problems:
        print("FAIL:")
        for p in problems:
            print(f"  {p}")
        print("summary: exports with an attention_mask do NOT match HF")
        return 1
    print(f"summary: {len(VARIANTS) * len(EXPORTERS)} exports with an "
          f"attention_mask input: attention raised in every layer, logits of "
          f"real tokens within {LOGITS_TOL:g} of HF (ones, right- and "
          f"left-padded), greedy generation as transformers', LoRA losses "
          f"within {LOSS_TOL:g} of PEFT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
