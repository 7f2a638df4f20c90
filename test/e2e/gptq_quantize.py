#!/usr/bin/env python3
"""End-to-end GPTQ: `tailor quantize`, its checkpoint, and training on it.

On train_common's seeded tiny Llama (hidden 64, 2 layers, intermediate 128,
exported to ONNX) with a seeded JSONL calibration set:

  1. `tailor quantize model.onnx --scheme gptq --calib data.jsonl
     --compare-rtn -o DIR/model.safetensors` for 4-bit group 32, 3-bit group
     32, 4-bit group 32 with act-order, 8-bit and 4-bit with one group per
     row. For every quantized module the layer-wise reconstruction error
     ||(W - Q) X^T|| / ||W X^T|| on the calibration inputs must be lower for
     GPTQ than for round-to-nearest at the same bits and group size.
  2. The checkpoint is read back in Python (safetensors) and checked for
     AutoGPTQ's layout: <module>.qweight I32 [in * bits / 32, out],
     .qzeros I32 [groups, out * bits / 32], .scales F16 [groups, out],
     .g_idx I32 [in], and quantize_config.json with bits, group_size,
     desc_act, sym and checkpoint_format "gptq". Its weights are dequantized
     by this script's own unpacking of that layout (AutoGPTQ's v1 zero
     convention: zero = stored + 1; W = scale[g_idx] * (q - zero)), and
     must be close to the float weights (a checkpoint of the wrong weights
     would not be).
  3. The checkpoint loads back into a plan: LoRA (r=8, all linear layers) on
     the GPTQ weights (`quantization: gptq`, `gptq_checkpoint: ...`) trains
     10 steps with `tailor train`, and must match PEFT on the HF model whose
     linear weights are this script's dequantization of the same checkpoint,
     per-step loss within 1e-4 relative: tailor binds the checkpoint's bytes
     unchanged and its kernels dequantize them as the layout says.

  gptq_quantize.py --bin build/bin --work build/test/gptq-quantize
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import train_common as tc

LOSS_TOL = 1e-4
CONFIGS = [  # (name, bits, group size, act order)
    ("4bit-g32", 4, 32, False),
    ("3bit-g32", 3, 32, False),
    ("4bit-g32-act-order", 4, 32, True),
    ("8bit-g32", 8, 32, False),
    ("4bit-row", 4, -1, False),
]
ROW = re.compile(r"^\s+(\S+)\s+\[(\d+), (\d+)\]\s+\|\|\(W-Q\)X\|\|/\|\|WX\|\|: "
                 r"gptq ([0-9.e+-]+)\s+rtn ([0-9.e+-]+)")


def unpack(words, bits, count):
    """Values of `bits` bits packed little-endian along axis 0 of the int32
    array `words` [count * bits / 32, n] (3-bit values cross word
    boundaries: 32 values fill 3 words), as AutoGPTQ's pack writes them."""
    import numpy as np

    w = words.astype(np.int64) & 0xFFFFFFFF
    per = 32 // bits if 32 % bits == 0 else None
    out = np.zeros((count,) + w.shape[1:], dtype=np.int64)
    mask = (1 << bits) - 1
    if per:
        for k in range(count):
            out[k] = (w[k // per] >> (bits * (k % per))) & mask
        return out
    # 3 bits: each run of 3 words holds 32 values in one 96-bit integer.
    for k in range(count):
        base, j = 3 * (k // 32), k % 32
        bit = 3 * j
        lo = bit // 32
        v = w[base + lo] >> (bit % 32)
        if bit % 32 > 32 - bits:
            v = v | (w[base + lo + 1] << (32 - bit % 32))
        out[k] = v & mask
    return out


def dequantize(tensors, module, bits, rows, cols):
    """W [rows, cols] of `module` from its four checkpoint tensors."""
    import numpy as np

    qweight = tensors[module + ".qweight"]
    qzeros = tensors[module + ".qzeros"]
    scales = tensors[module + ".scales"].astype(np.float32)
    g_idx = tensors[module + ".g_idx"].astype(np.int64)
    q = unpack(qweight, bits, cols)                   # [cols, rows]
    zeros = unpack(qzeros.T, bits, rows).T + 1        # [groups, rows]
    w = scales[g_idx] * (q - zeros[g_idx]).astype(np.float32)  # [cols, rows]
    return np.ascontiguousarray(w.T)


def check_layout(path, bits, group, act_order, model):
    """Problems with the checkpoint's tensors and config; and the
    dequantized weights {module: W}."""
    import numpy as np
    import torch

    problems, weights = [], {}
    tensors = tc.load_safetensors(path)
    cfg_path = os.path.join(os.path.dirname(path), "quantize_config.json")
    try:
        cfg = json.load(open(cfg_path))
    except (OSError, ValueError) as e:
        return [f"quantize_config.json: {e}"], {}
    want = {"bits": bits, "group_size": group, "desc_act": act_order, "sym": True,
            "checkpoint_format": "gptq", "quant_method": "gptq"}
    for k, v in want.items():
        if cfg.get(k) != v:
            problems.append(f"quantize_config.json {k} = {cfg.get(k)!r}, expected {v!r}")
    linears = {n: m for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not n.endswith("lm_head")}
    for name, m in linears.items():
        rows, cols = m.weight.shape
        groups = 1 if group == -1 else -(-cols // group)
        shapes = {".qweight": ("int32", (cols * bits // 32, rows)),
                  ".qzeros": ("int32", (groups, rows * bits // 32)),
                  ".scales": ("float16", (groups, rows)),
                  ".g_idx": ("int32", (cols,))}
        for suffix, (dtype, shape) in shapes.items():
            t = tensors.get(name + suffix)
            if t is None:
                problems.append(f"{name}{suffix} missing")
            elif str(t.dtype) != dtype or tuple(t.shape) != shape:
                problems.append(f"{name}{suffix}: {t.dtype} {t.shape}, expected "
                                f"{dtype} {shape}")
        if problems:
            continue
        g_idx = tensors[name + ".g_idx"]
        if not act_order and group != -1 and not np.array_equal(
                g_idx, np.arange(cols) // group):
            problems.append(f"{name}.g_idx is not c / group_size")
        w = dequantize(tensors, name, bits, rows, cols)
        ref = m.weight.detach().numpy()
        rel = float(np.abs(w - ref).max() / np.abs(ref).max())
        bound = {3: 0.5, 4: 0.3, 8: 0.02}[bits]
        if not rel < bound:
            problems.append(f"{name}: dequantized weight off by {rel:.3g} of max|W|")
        weights[name] = w
    return problems, weights


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join("build", "bin"))
    ap.add_argument("--work", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    onnx_path = os.path.join(args.work, "model.onnx")
    base, info = tc.build_and_export(onnx_path)
    rows = tc.make_rows()
    data = os.path.join(args.work, "data.jsonl")
    tc.write_jsonl(rows, data)
    tailor = os.path.join(args.bin, "tailor")
    failures = []
    checkpoints = {}
    for name, bits, group, act_order in CONFIGS:
        out_dir = os.path.join(args.work, name)
        os.makedirs(out_dir)
        path = os.path.join(out_dir, "model.safetensors")
        cmd = [tailor, "quantize", onnx_path, "--scheme", "gptq", "--calib", data,
               "--samples", "32", "--seq", str(tc.T), "--bits", str(bits),
               "--group-size", str(group), "--compare-rtn", "-o", path,
               "--threads", str(args.threads)]
        if act_order:
            cmd.append("--act-order")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        print(f"case {name}: {' '.join(cmd[1:3])} ... --bits {bits} --group-size "
              f"{group}{' --act-order' if act_order else ''}")
        if proc.returncode != 0:
            failures.append(name)
            print(f"  FAIL: exit {proc.returncode}: {proc.stderr.strip()[:600]}")
            continue
        problems, count, worst = [], 0, 0.0
        for line in proc.stdout.splitlines():
            m = ROW.match(line)
            if not m:
                continue
            count += 1
            module, g, r = m.group(1), float(m.group(4)), float(m.group(5))
            worst = max(worst, g / r if r > 0 else float("inf"))
            print(f"  {module:<36} gptq {g:.5f}  rtn {r:.5f}  ratio {g / r:.3f}")
            if not g < r:
                problems.append(f"{module}: GPTQ error {g} is not below RTN's {r}")
        if count != 14:
            problems.append(f"expected 14 modules in the report, got {count}")
        layout, weights = check_layout(path, bits, group, act_order, base)
        problems += layout
        checkpoints[name] = (path, weights)
        if problems:
            failures.append(name)
            print("  FAIL:\n    " + "\n    ".join(problems[:12]))
        else:
            print(f"  ok   {name}: GPTQ below RTN on all {count} modules (worst "
                  f"ratio {worst:.3f}); AutoGPTQ layout and config as expected")

    # --- The checkpoint loads back: LoRA on the GPTQ weights vs PEFT --------
    name = "4bit-g32-act-order"
    if name in checkpoints and checkpoints[name][1]:
        path, weights = checkpoints[name]
        r = tc.recipe_defaults()
        r.update(lora_target_modules=["all-linear"], max_steps=10, save_steps=0,
                 quantization="gptq", gptq_checkpoint=path)
        work = os.path.join(args.work, "lora-on-gptq")
        os.makedirs(work)
        ref_model = tc.fresh_copy(base)
        for module, w in weights.items():
            ref_model.get_submodule(module).weight.data = torch.from_numpy(w.copy())
        peft_model = tc.make_peft(ref_model, r)
        init_dir = os.path.join(work, "init_adapter")
        peft_model.save_pretrained(init_dir)
        records, _ = tc.torch_train(peft_model, rows, r, tc.peft_tensors)
        print(f"case lora-on-gptq: LoRA r=8 all-linear on {name}, 10 steps")
        out, err = tc.tailor_compile_train(args.bin, onnx_path, r, work, data,
                                           init_adapter=init_dir,
                                           threads=args.threads)
        problems = [err] if err else []
        if out:
            metrics = tc.read_metrics(out)
            for rec in records:
                got = metrics.get(rec["step"], {}).get("loss")
                e = tc.rel_err(float(got), rec["loss"]) if got is not None else 1.0
                print(f"  step {rec['step']:>2}: loss torch {rec['loss']:.7f} tailor "
                      f"{float(got) if got is not None else float('nan'):.7f} rel {e:.1e}")
                if not e <= LOSS_TOL:
                    problems.append(f"step {rec['step']}: loss rel err {e:.2e}")
        if problems:
            failures.append("lora-on-gptq")
            print("  FAIL:\n    " + "\n    ".join(problems[:12]))
        else:
            print("  ok   lora-on-gptq: every step's loss within "
                  f"{LOSS_TOL:g} of PEFT on the checkpoint's weights")
    else:
        failures.append("lora-on-gptq")
        print("case lora-on-gptq: not run (no usable checkpoint)")
    n = len(CONFIGS) + 1
    print(f"summary: {n - len(failures)}/{n} GPTQ cases pass (GPTQ below RTN, "
          "AutoGPTQ layout, training on the checkpoint matches PEFT)"
          + (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
