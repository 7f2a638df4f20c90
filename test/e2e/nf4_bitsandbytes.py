#!/usr/bin/env python3
"""NF4 quantization: tailor's runtime/quant against bitsandbytes, bit for bit.

For each case a float32 weight is written to WORK/<case>/w.npy and quantized
twice: by `tailor-nf4-tool quantize w.npy OUT [--no-double-quant]
[--blocksize N]` and by bitsandbytes on the CPU,
`F.quantize_4bit(w, blocksize=N, compress_statistics=DQ, quant_type='nf4')`,
then dequantized by both (`F.dequantize_4bit`, float32). A case passes when

  packed bytes          identical
  absmax                identical codes (double quantization) or fp32 bits
  nested absmax, offset identical fp32 bits (double quantization)
  dequantized weight    identical fp32 bits

so a weight tailor quantizes is the one bitsandbytes writes, and a QLoRA
checkpoint dequantizes in tailor to exactly what PEFT computes with.

Cases, each with and without double quantization (block size 64 unless
named): random normal (std 0.02) of numel a multiple of 64, not a multiple
of 64 (partial block), odd with an odd last dimension, not a multiple of
64*256 (partial nested block), an exact multiple of 64*256, and over 32768
blocks (where PyTorch's float32 mean, the offset, is summed on several
threads); large-magnitude outliers; zero rows, an all-zero tensor with a
partial block, subnormal weights; values on the rounding edges (exact
NF4 midpoints, and values whose code differs between multiplying by
1 / absmax, bitsandbytes' rule for full blocks, and dividing by absmax, its
rule for the partial last block); block sizes 32, 128 and 4096; and a
seeded transformers LlamaForCausalLM (hidden 1024, intermediate 2816, its
default normal(0, 0.02) initialization): q_proj, k_proj, down_proj,
embed_tokens, and gate_proj rounded to bfloat16 (given to bitsandbytes as
bfloat16, as a checkpoint's weight would be).

The offset is torch's float32 mean, whose rounding depends on the order
PyTorch sums in: the vector width of its sum kernel (found once by probing
8, 16, 4, 32 against bitsandbytes on one tensor) and torch.get_num_threads(),
both passed to the tool (--sum-lanes, --sum-threads). The codebooks are
checked too: `tailor-nf4-tool maps` against F.get_4bit_type('nf4') and
F.create_dynamic_map(signed=True), element by element.

Prints one line per case with the round-trip error of the dequantized
weight (max |w - deq| and RMS relative, rms(w - deq) / rms(w)) and
`summary: N/M NF4 cases bit-exact against bitsandbytes`; exits 1 on any
mismatch.

  nf4_bitsandbytes.py --bin build/bin --work build/test/nf4-bitsandbytes
"""

import argparse
import os
import shutil
import subprocess
import sys

import numpy as np


def bits(a):
    """float32 array -> its uint32 bit patterns (compares -0.0, NaN exactly)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def run_tool(tool, args, timeout=600):
    proc = subprocess.run([tool] + args, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join([tool] + args)} failed "
                           f"({proc.returncode}): {proc.stderr.strip()[:400]}")
    return proc.stdout.strip()


def bnb_quantize(w, blocksize, double, dtype=None):
    """bitsandbytes' quantization of w (a torch tensor, float32 or bfloat16)
    and its float32 dequantization, as numpy arrays."""
    import torch
    import bitsandbytes.functional as F

    packed, state = F.quantize_4bit(w, blocksize=blocksize,
                                    compress_statistics=double,
                                    quant_type="nf4")
    # Dequantize to float32 whatever the input dtype (state.dtype is w's).
    state.dtype = torch.float32
    deq = F.dequantize_4bit(packed, state)
    out = dict(packed=packed.numpy().reshape(-1),
               absmax=state.absmax.numpy().reshape(-1),
               deq=deq.float().numpy().reshape(-1))
    if double:
        out["nested"] = state.state2.absmax.numpy().reshape(-1)
        out["offset"] = state.offset.numpy().reshape(-1)
    return out


def tailor_quantize(tool, w32, work, blocksize, double, lanes, threads):
    """Runs tailor-nf4-tool on w32 (numpy float32) and returns its outputs."""
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "w.npy")
    if not os.path.exists(src):
        np.save(src, w32)
    out_dir = os.path.join(work, f"{'dq' if double else 'fp32'}-bs{blocksize}")
    args = ["quantize", src, out_dir, "--blocksize", str(blocksize),
            "--sum-lanes", str(lanes), "--sum-threads", str(threads)]
    if not double:
        args.append("--no-double-quant")
    run_tool(tool, args)
    load = lambda name: np.load(os.path.join(out_dir, name))  # noqa: E731
    out = dict(packed=load("packed.npy").reshape(-1),
               absmax=load("absmax.npy").reshape(-1),
               deq=load("dequantized.npy").reshape(-1))
    if double:
        out["nested"] = load("nested_absmax.npy").reshape(-1)
        out["offset"] = load("offset.npy").reshape(-1)
    return out


def compare(got, ref, double):
    """Returns a list of mismatch descriptions (empty when bit-exact)."""
    bad = []
    if got["packed"].shape != ref["packed"].shape:
        bad.append(f"packed shape {got['packed'].shape} vs {ref['packed'].shape}")
    elif not np.array_equal(got["packed"], ref["packed"]):
        n = int((got["packed"] != ref["packed"]).sum())
        bad.append(f"packed: {n}/{got['packed'].size} bytes differ")
    if double:
        if got["absmax"].dtype != np.uint8 or not np.array_equal(got["absmax"], ref["absmax"]):
            n = int((got["absmax"] != ref["absmax"]).sum()) \
                if got["absmax"].shape == ref["absmax"].shape else -1
            bad.append(f"absmax codes: {n}/{ref['absmax'].size} differ")
        for key in ("nested", "offset"):
            if got[key].shape != ref[key].shape or \
                    not np.array_equal(bits(got[key]), bits(ref[key])):
                bad.append(f"{key}: tailor {got[key][:4]} vs bitsandbytes {ref[key][:4]}")
    elif got["absmax"].shape != ref["absmax"].shape or \
            not np.array_equal(bits(got["absmax"]), bits(ref["absmax"])):
        bad.append("absmax (fp32) bits differ")
    if got["deq"].shape != ref["deq"].shape:
        bad.append(f"dequantized shape {got['deq'].shape} vs {ref['deq'].shape}")
    elif not np.array_equal(bits(got["deq"]), bits(ref["deq"])):
        g, r = got["deq"].astype(np.float64), ref["deq"].astype(np.float64)
        n = int((bits(got["deq"]) != bits(ref["deq"])).sum())
        ulp = np.abs(bits(got["deq"]).astype(np.int64) - bits(ref["deq"]).astype(np.int64)).max()
        bad.append(f"dequantized: {n} values differ (max |diff| "
                   f"{np.abs(g - r).max():.3g}, max {ulp} ulp)")
    return bad


def round_trip(w32, deq):
    err = deq.astype(np.float64) - w32.reshape(-1).astype(np.float64)
    ref = np.sqrt(np.mean(w32.astype(np.float64) ** 2))
    rms = np.sqrt(np.mean(err ** 2)) / ref if ref > 0 else 0.0
    return np.abs(err).max(), rms


def rounding_edges():
    """A weight whose scaled values sit on the rounding edges bitsandbytes'
    kernel decides: block 0 (absmax 1) holds every NF4 midpoint exactly (a
    tie takes the lower code) and the next float above it; each further full
    block, and the partial last block, holds its absmax a and the values x
    near a midpoint whose code differs between x * (1 / a), the rule of full
    blocks, and x / a, the rule of the partial block."""
    import torch
    import bitsandbytes.functional as F

    f32 = np.float32
    code = F.get_4bit_type("nf4", device="cpu").numpy()
    bounds = ((code[:-1] + code[1:]) / f32(2)).astype(f32)

    def edges(a):
        inv = f32(f32(1) / a)
        found = []
        for mid in bounds:
            x = f32(mid * a)
            xs = [x]
            lo = hi = x
            for _ in range(64):
                lo, hi = np.nextafter(lo, f32(-np.inf)), np.nextafter(hi, f32(np.inf))
                xs += [lo, hi]
            xs = np.array(xs, f32)
            by_mul = np.searchsorted(bounds, (xs * inv).astype(f32), side="left")
            by_div = np.searchsorted(bounds, (xs / a).astype(f32), side="left")
            found += list(xs[by_mul != by_div])
        return found

    rng = np.random.default_rng(7)

    def block(a, values, size):
        out = (rng.standard_normal(size) * 0.2 * a).astype(f32)
        head = np.array([a] + list(values), f32)
        assert len(head) <= size and np.abs(out).max() < a
        out[:len(head)] = head
        return out

    ties = list(bounds) + [np.nextafter(b, f32(np.inf)) for b in bounds]
    blocks = [block(f32(1.0), ties, 64)]
    for a in (0.0371, 0.3, 1.7, 0.021, 0.05, 0.0123):
        blocks.append(block(f32(a), edges(f32(a)), 64))
    blocks.append(block(f32(1.7), edges(f32(1.7)), 40))
    if sum(len(edges(f32(a))) for a in (0.0371, 0.3, 1.7)) == 0:
        raise RuntimeError("no rounding edges found")
    return torch.from_numpy(np.concatenate(blocks))


def build_cases():
    """(name, torch tensor given to bitsandbytes, block sizes)."""
    import torch

    gen = torch.Generator().manual_seed(1234)

    def normal(*shape, std=0.02):
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    cases = []
    add = lambda name, w, sizes=(64,): cases.append((name, w, sizes))  # noqa: E731
    add("normal-4096", normal(4096))
    add("normal-1000", normal(1000), (32, 64, 128))
    add("normal-333x77", normal(333, 77))
    add("normal-257x1031", normal(257, 1031), (64, 4096))
    add("normal-64x16384", normal(64, 16384))
    add("normal-1536x2048", normal(1536, 2048))
    w = normal(512, 1024)
    idx = torch.randint(0, w.numel(), (500,), generator=gen)
    w.view(-1)[idx] *= 1000.0
    w.view(-1)[idx[:5]] = torch.tensor([1e4, -1e4, 3e3, -65504.0, 5e4])
    add("outliers-512x1024", w)
    w = normal(128, 100)
    w[10:40] = 0.0
    w[-3:] = 0.0
    add("zero-rows-128x100", w)
    add("all-zero-1000", torch.zeros(1000))
    add("subnormal-640", normal(640, std=1e-40))
    add("tiny-scale-2000", normal(2000, std=1e-30))
    add("rounding-edges", rounding_edges())

    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=2048, hidden_size=1024, intermediate_size=2816,
        num_hidden_layers=1, num_attention_heads=16, num_key_value_heads=4)
    model = transformers.LlamaForCausalLM(cfg)
    params = dict(model.named_parameters())
    for short, name in [("q_proj", "model.layers.0.self_attn.q_proj.weight"),
                        ("k_proj", "model.layers.0.self_attn.k_proj.weight"),
                        ("down_proj", "model.layers.0.mlp.down_proj.weight"),
                        ("embed_tokens", "model.embed_tokens.weight")]:
        add(f"llama-{short}", params[name].detach().clone())
    add("llama-gate_proj-bf16",
        params["model.layers.0.mlp.gate_proj.weight"].detach().to(torch.bfloat16))
    return cases


def find_lanes(tool, work, threads):
    """The vector width of PyTorch's float32 sum: the first of 8, 16, 4, 32
    whose summation order reproduces bitsandbytes' offset on a probe whose
    partial sums round differently in each order."""
    import torch

    gen = torch.Generator().manual_seed(99)
    w = torch.randn(3001, 64, generator=gen) * torch.rand(3001, 1, generator=gen) * 10
    ref = bnb_quantize(w, 64, True)
    probe = os.path.join(work, "lane-probe")
    for lanes in (8, 16, 4, 32):
        got = tailor_quantize(tool, w.numpy(), probe, 64, True, lanes, threads)
        if np.array_equal(bits(got["offset"]), bits(ref["offset"])):
            return lanes
    return None


def check_maps(tool, work):
    import bitsandbytes.functional as F

    out = os.path.join(work, "maps")
    run_tool(tool, ["maps", out])
    nf4 = np.load(os.path.join(out, "nf4_code.npy"))
    dyn = np.load(os.path.join(out, "dynamic_map.npy"))
    ref_nf4 = F.get_4bit_type("nf4", device="cpu").numpy()
    ref_dyn = F.create_dynamic_map(signed=True).numpy()
    same_nf4 = int((bits(nf4) == bits(ref_nf4)).sum()) if nf4.shape == ref_nf4.shape else 0
    same_dyn = int((bits(dyn) == bits(ref_dyn)).sum()) if dyn.shape == ref_dyn.shape else 0
    ok = same_nf4 == 16 and same_dyn == 256
    print(f"{'ok  ' if ok else 'FAIL'} codebooks: nf4 {same_nf4}/16, dynamic map "
          f"{same_dyn}/256 identical to bitsandbytes", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor-nf4-tool")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("-k", dest="filter", help="run cases whose name contains this")
    ap.add_argument("--keep", action="store_true", help="keep passing cases' files")
    args = ap.parse_args()

    import torch
    import bitsandbytes

    tool = os.path.join(args.bin, "tailor-nf4-tool")
    if not os.access(tool, os.X_OK):
        print(f"error: {tool} not found (build the tailor-nf4-tool target)")
        return 1
    os.makedirs(args.work, exist_ok=True)
    threads = torch.get_num_threads()
    maps_ok = check_maps(tool, args.work)
    lanes = find_lanes(tool, args.work, threads)
    if lanes is None:
        print("FAIL no summation order reproduces torch's float32 mean; "
              "offsets cannot match")
        return 1
    print(f"bitsandbytes {bitsandbytes.__version__}, torch {torch.__version__} "
          f"({torch.backends.cpu.get_cpu_capability()}): float32 sum in "
          f"{lanes} lanes on {threads} threads", flush=True)

    cases = build_cases()
    if args.filter:
        cases = [c for c in cases if args.filter in c[0]]
    good = total = 0
    for name, w, sizes in cases:
        w32 = w.float().numpy()
        work = os.path.join(args.work, name)
        shutil.rmtree(work, ignore_errors=True)
        case_ok = True
        for bs in sizes:
            for double in (True, False):
                label = f"{name} {'dq' if double else 'fp32-absmax'} bs{bs}"
                total += 1
                try:
                    ref = bnb_quantize(w, bs, double)
                    got = tailor_quantize(tool, w32, work, bs, double, lanes, threads)
                    bad = compare(got, ref, double)
                    max_err, rms = round_trip(w32, got["deq"])
                    line = (f"numel {w32.size:>8}  round trip max|err| {max_err:.3e} "
                            f"rms rel {rms:.4f}")
                    if bad:
                        line += "  " + "; ".join(bad)
                except Exception as e:  # noqa: BLE001 - report and go on
                    bad, line = ["error"], f"harness error: {type(e).__name__}: {e}"
                ok = not bad
                good += ok
                case_ok = case_ok and ok
                print(f"{'ok  ' if ok else 'FAIL'} {label:<36} {line}", flush=True)
        if case_ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"summary: {good}/{total} NF4 cases bit-exact against bitsandbytes")
    return 0 if good == total and maps_ok else 1


if __name__ == "__main__":
    sys.exit(main())
