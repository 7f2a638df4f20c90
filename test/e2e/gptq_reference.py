#!/usr/bin/env python3
"""GPTQ: tailor's runtime/quant against AutoGPTQ 0.7.1 on the CPU.

Packing, bit for bit. For each bit width (2, 3, 4, 8) and group layout
(group 32, group -1, group 32 with a shuffled act-order g_idx), random
codes, zero points, fp16 scales and g_idx are packed by
`tailor-gptq-tool pack` and by AutoGPTQ's `QuantLinear.pack`
(nn_modules/qlinear/qlinear_cuda.py) from the weight they dequantize to. A
case passes when

  qweight, qzeros, g_idx   identical int32 tensors
  scales                   identical fp16 bits
  dequantized weight       tailor's, rounded to fp16, identical to
                           AutoGPTQ's torch path (QuantLinear.forward on an
                           identity) on tailor's own checkpoint tensors

The algorithm, statistically. For a 128 x 256 layer with 1024 correlated
calibration rows and outlier columns, AutoGPTQ's `GPTQ.add_batch` gives the
Hessian; both `GPTQ.fasterquant` and `tailor-gptq-tool quantize` quantize
the same weight with it (4, 3, 2 and 8 bits, group 128, 64 and -1,
act-order, asymmetric). They cannot agree bit for bit -- tailor factors the
Hessian in double, AutoGPTQ in float32, and a code rounded the other way
moves every later column's error feedback a little -- so a case passes when

  g_idx                    identical
  codes                    at least 99% identical
  ||W X^T - Q X^T||_F      within 1% of AutoGPTQ's, and below RTN's

Prints one line per case and `summary: N/M GPTQ cases agree with AutoGPTQ`;
exits 1 on any mismatch, and 77 (skipped) when AutoGPTQ is not importable:
it is not part of the project's environment (`pip install --no-deps
--target DIR auto-gptq==0.7.1`, DIR passed as --autogptq or
$TAILOR_AUTOGPTQ, is enough; its wheel's CUDA extensions need not load).

  gptq_reference.py --bin build/bin --work build/test/gptq-reference \\
      [--autogptq DIR]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np

SKIP = 77


def load_autogptq(path):
    """AutoGPTQ's GPTQ and QuantLinear classes, or None if not installed.

    The package's __init__ imports its model zoo, which needs transformers
    4; the two modules used here do not, so they are imported under a bare
    package object instead."""
    if path:
        sys.path.insert(0, path)
    spec = importlib.util.find_spec("auto_gptq")
    if spec is None:
        return None
    package = types.ModuleType("auto_gptq")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["auto_gptq"] = package
    import torch
    # fasterquant synchronizes CUDA at the end; there may be no GPU.
    torch.cuda.synchronize = lambda *args, **kwargs: None
    from auto_gptq.quantization.gptq import GPTQ
    from auto_gptq.nn_modules.qlinear.qlinear_cuda import QuantLinear
    return GPTQ, QuantLinear


def run_tool(tool, args):
    proc = subprocess.run([tool] + args, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join([tool] + args)} failed "
                           f"({proc.returncode}): {proc.stderr.strip()[:400]}")


def tool_args(bits, group_size, act_order, sym=True):
    args = ["--bits", str(bits), "--group-size", str(group_size)]
    if act_order:
        args.append("--act-order")
    if not sym:
        args.append("--asym")
    return args


def read_tailor(case_dir):
    from safetensors.numpy import load_file
    tensors = load_file(os.path.join(case_dir, "tailor", "model.safetensors"))
    with open(os.path.join(case_dir, "tailor", "quantize_config.json")) as f:
        config = json.load(f)
    deq = np.load(os.path.join(case_dir, "tailor", "dequantized.npy"))
    return {k[len("layer."):]: v for k, v in tensors.items()}, config, deq


def unpack_codes(qweight, bits):
    """[cols, rows] codes from qweight: column c of output r is bits
    [c * bits, (c + 1) * bits) of the little-endian stream down column r."""
    words = qweight.astype(np.uint32).astype(np.uint64)
    cols = words.shape[0] * 32 // bits
    codes = np.zeros((cols, words.shape[1]), dtype=np.int64)
    for c in range(cols):
        bit = c * bits
        word, shift = divmod(bit, 32)
        value = words[word] >> np.uint64(shift)
        if shift + bits > 32:
            value |= words[word + 1] << np.uint64(32 - shift)
        codes[c] = (value & np.uint64((1 << bits) - 1)).astype(np.int64)
    return codes


def autogptq_weight(QuantLinear, bits, group_size, tensors, rows, cols):
    """The fp16 weight [rows, cols] AutoGPTQ's torch path computes from
    checkpoint tensors."""
    import torch
    layer = QuantLinear(bits, group_size, cols, rows, bias=False)
    layer.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v))
                           for k, v in tensors.items()})
    layer.eval()
    with torch.no_grad():
        out = layer(torch.eye(cols, dtype=torch.float16))
    return out.t().contiguous().numpy()


def half_bits(a):
    return np.ascontiguousarray(a, dtype=np.float16).view(np.uint16)


def pack_case(tool, work, classes, bits, group_size, act_order, seed):
    import torch
    _, QuantLinear = classes
    rows, cols = 64, 128
    gs = cols if group_size == -1 else group_size
    groups = -(-cols // gs)
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2**bits, (rows, cols)).astype(np.int32)
    zeros = rng.integers(1, 2**bits + 1, (groups, rows)).astype(np.int32)
    scales = rng.uniform(1e-3, 0.1, (groups, rows)).astype(np.float16)
    g_idx = (np.arange(cols) // gs).astype(np.int32)
    if act_order:
        rng.shuffle(g_idx)
    name = f"pack-{bits}bit-g{group_size}{'-act' if act_order else ''}"
    case_dir = os.path.join(work, name)
    os.makedirs(case_dir, exist_ok=True)
    for key, value in (("codes", codes), ("zeros", zeros), ("g_idx", g_idx),
                       ("scales", scales.astype(np.float32))):
        np.save(os.path.join(case_dir, f"{key}.npy"), value)
    run_tool(tool, ["pack", case_dir] + tool_args(bits, group_size, act_order))
    tensors, _, deq = read_tailor(case_dir)

    # The weight the codes stand for (exact in float32), packed by AutoGPTQ
    # from an fp16 layer as it packs a quantized model.
    s = scales.astype(np.float32)[g_idx].T
    z = zeros[g_idx].T
    weight = s * (codes - z).astype(np.float32)
    linear = torch.nn.Linear(cols, rows, bias=False).half()
    linear.weight.data = torch.from_numpy(weight).half()
    ref = QuantLinear(bits, group_size, cols, rows, bias=False)
    # pack takes scales and zeros as [rows, groups], fasterquant's layout.
    ref.pack(linear, torch.from_numpy(scales.astype(np.float32).T.copy()),
             torch.from_numpy(zeros.T.astype(np.float32).copy()),
             torch.from_numpy(g_idx))
    problems = []
    for key in ("qweight", "qzeros", "g_idx"):
        if not np.array_equal(tensors[key], getattr(ref, key).numpy()):
            problems.append(f"{key} differs")
    if not np.array_equal(half_bits(tensors["scales"]),
                          half_bits(ref.scales.numpy())):
        problems.append("scales differ")
    if not np.array_equal(deq.view(np.uint32), weight.view(np.uint32)):
        problems.append("tailor's float32 dequantization is not exact")
    ref_weight = autogptq_weight(QuantLinear, bits, group_size, tensors,
                                 rows, cols)
    if not np.array_equal(half_bits(deq), half_bits(ref_weight)):
        problems.append("AutoGPTQ dequantizes tailor's checkpoint differently")
    return name, problems, ""


def calibration(n, cols, rng):
    """Correlated inputs (64 latent factors plus noise) with outlier columns,
    as in GptqTest."""
    latent = rng.standard_normal((n, 64)).astype(np.float32)
    mix = (rng.standard_normal((64, cols)) / 8).astype(np.float32)
    x = latent @ mix + 0.1 * rng.standard_normal((n, cols)).astype(np.float32)
    x[:, [7, 100, 201]] *= 20
    return x.astype(np.float32)


def recon_error(w, q, x):
    d = (w.astype(np.float64) - q.astype(np.float64)) @ x.T.astype(np.float64)
    return float(np.sqrt(np.sum(d * d)))


def rtn(w, bits, group_size, sym):
    """Round-to-nearest with GPTQ's quantizer, in float32."""
    maxq = np.float32(2**bits - 1)
    gs = w.shape[1] if group_size == -1 else group_size
    out = np.empty_like(w)
    for c0 in range(0, w.shape[1], gs):
        g = w[:, c0:c0 + gs]
        lo = np.minimum(g.min(1), 0)
        hi = np.maximum(g.max(1), 0)
        if sym:
            hi = np.maximum(-lo, hi)
            lo = np.where(lo < 0, -hi, lo)
        both = (lo == 0) & (hi == 0)
        lo, hi = np.where(both, -1, lo), np.where(both, 1, hi)
        scale = ((hi - lo) / maxq).astype(np.float32)[:, None]
        zero = (np.full_like(scale, (maxq + 1) / 2) if sym
                else np.maximum(1, np.round(-lo[:, None] / scale)))
        q = np.clip(np.round(g / scale) + zero, 0, maxq)
        out[:, c0:c0 + gs] = scale * (q - zero)
    return out


def gptq_case(tool, work, classes, bits, group_size, act_order, sym, seed):
    import torch
    GPTQ, QuantLinear = classes
    rows, cols, n = 128, 256, 1024
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    x = calibration(n, cols, rng)
    name = (f"gptq-{bits}bit-g{group_size}{'-act' if act_order else ''}"
            f"{'' if sym else '-asym'}")
    case_dir = os.path.join(work, name)
    os.makedirs(case_dir, exist_ok=True)

    layer = torch.nn.Linear(cols, rows, bias=False)
    layer.weight.data = torch.from_numpy(w.copy())
    gptq = GPTQ(layer)
    gptq.quantizer.configure(bits, perchannel=True, sym=sym, mse=False)
    gptq.add_batch(torch.from_numpy(x).reshape(8, n // 8, cols), None)
    np.save(os.path.join(case_dir, "hessian.npy"), gptq.H.numpy())
    np.save(os.path.join(case_dir, "weight.npy"), w)
    scale, zero, g_idx = gptq.fasterquant(blocksize=128, percdamp=0.01,
                                          group_size=group_size,
                                          actorder=act_order)
    layer.half()
    ref = QuantLinear(bits, group_size, cols, rows, bias=False)
    ref.pack(layer, scale, zero, g_idx)
    ref_tensors = {k: getattr(ref, k).numpy()
                   for k in ("qweight", "qzeros", "scales", "g_idx")}

    run_tool(tool, ["quantize", case_dir] +
             tool_args(bits, group_size, act_order, sym))
    tensors, _, deq = read_tailor(case_dir)
    ref_q = autogptq_weight(QuantLinear, bits, group_size, ref_tensors,
                            rows, cols).astype(np.float32)
    problems = []
    if not np.array_equal(tensors["g_idx"], ref_tensors["g_idx"]):
        problems.append("g_idx differs")
    codes = unpack_codes(tensors["qweight"], bits)
    differ = int(np.sum(codes != unpack_codes(ref_tensors["qweight"], bits)))
    if differ > 0.01 * codes.size:
        problems.append(f"{differ} of {codes.size} codes differ")
    scales_differ = int(np.sum(half_bits(tensors["scales"]) !=
                               half_bits(ref_tensors["scales"])))
    e_tailor = recon_error(w, deq, x)
    e_ref = recon_error(w, ref_q, x)
    e_rtn = recon_error(w, rtn(w, bits, group_size, sym), x)
    if abs(e_tailor / e_ref - 1) > 0.01:
        problems.append("reconstruction error differs by more than 1%")
    if not e_tailor < e_rtn:
        problems.append("no better than RTN")
    detail = (f"{differ}/{codes.size} codes, {scales_differ}/"
              f"{tensors['scales'].size} scales differ; ||WX^T - QX^T||_F tailor "
              f"{e_tailor:.2f}, AutoGPTQ {e_ref:.2f}, RTN {e_rtn:.2f}")
    return name, problems, detail


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor-gptq-tool")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--autogptq", default=os.environ.get("TAILOR_AUTOGPTQ"),
                    help="directory AutoGPTQ is installed in (pip install "
                    "--target), if not on the path; default $TAILOR_AUTOGPTQ")
    args = ap.parse_args()

    classes = load_autogptq(args.autogptq)
    if classes is None:
        print("skipped: auto_gptq is not importable (see --autogptq)")
        return SKIP
    tool = os.path.join(args.bin, "tailor-gptq-tool")
    if not os.access(tool, os.X_OK):
        print(f"error: {tool} not found (build the tailor-gptq-tool target)")
        return 1
    os.makedirs(args.work, exist_ok=True)

    cases = []
    seed = 0
    for bits in (2, 3, 4, 8):
        for group_size, act_order in ((32, False), (-1, False), (32, True)):
            seed += 1
            cases.append(lambda b=bits, g=group_size, a=act_order, s=seed:
                         pack_case(tool, args.work, classes, b, g, a, s))
    for bits, group_size, act_order, sym in (
            (4, 128, False, True), (3, 128, False, True),
            (2, 64, False, True), (8, 128, False, True),
            (4, -1, False, True), (4, 64, True, True),
            (4, 128, False, False)):
        seed += 1
        cases.append(lambda b=bits, g=group_size, a=act_order, y=sym, s=seed:
                     gptq_case(tool, args.work, classes, b, g, a, y, s))

    passed = 0
    for case in cases:
        name, problems, detail = case()
        status = "ok  " if not problems else "FAIL"
        print(f"{status} {name:24s} {detail}"
              f"{'; '.join([''] + problems) if problems else ''}", flush=True)
        passed += not problems
    print(f"summary: {passed}/{len(cases)} GPTQ cases agree with AutoGPTQ")
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
