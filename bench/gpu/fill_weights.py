#!/usr/bin/env python3
"""Writes the seeded weights of a bench/gen_llama7b_onnx.py model into its
data file, so tailor and the PyTorch baseline train the same model.

The generator leaves the weights out (a sparse data file) and records, in
its side JSON, each initializer's name, offset, length and whether it holds
the transposed weight (`layout`). This script builds the model the JSON
describes -- transformers' LlamaForCausalLM of the preset and layer count,
initialized after torch.manual_seed(SEED) on the CPU, exactly as
bench/gpu/hf_peft_train.py builds it (seeded_model below) -- and writes
every fp32 parameter at its offset, transposed where the layout says, one
tensor at a time with pwrite (no copy of the whole model beyond the model
itself). For a `--tiny` JSON it builds the generator's own tiny model, so
the bytes can be compared with the file the generator wrote.

Before writing, the layout is checked against the ONNX file's external-data
entries (location, offset, length), so what is written is where the plan's
parameter sources point. --check-ort then runs the filled ONNX model with
onnxruntime against PyTorch (seq 8); --out writes to another file (the data
file is created sparse at its full size if missing).

  bench/gpu/fill_weights.py DIR/STEM.json [--seed 0] [--out PATH] [--check-ort]
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import gen_llama7b_onnx as gen  # noqa: E402


def seeded_model(preset="tinyllama", layers=None, seed=0, tiny=False):
    """The benchmark's model: LlamaForCausalLM of the generator's config,
    fp32, initialized on the CPU after torch.manual_seed(seed) (the CPU
    generator, so every machine gets the same weights)."""
    import torch
    from transformers import LlamaForCausalLM

    if layers is None:
        layers = 2 if tiny else gen.PRESETS[preset][1]
    cfg = gen.build_config(layers, tiny, preset)
    if tiny:
        model = gen.build_model(cfg, True, seed)
        model.__class__ = type(model).__mro__[1]  # back from logits-only
        return model
    torch.manual_seed(seed)
    with torch.device("cpu"):
        return LlamaForCausalLM(cfg)


def model_from_side(side, seed):
    return seeded_model(side.get("preset") or "llama7b", side["layers"], seed,
                        bool(side.get("tiny")))


def check_onnx_layout(onnx_path, side):
    """The layout must be what the ONNX file (and so the plan) points at."""
    import onnx

    proto = onnx.load(onnx_path, load_external_data=False)
    ext = {}
    for t in proto.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            kv = {e.key: e.value for e in t.external_data}
            ext[t.name] = (kv.get("location"), int(kv.get("offset", 0)),
                           int(kv["length"]), list(t.dims), t.data_type)
    names = {e["name"] for e in side["layout"]}
    if set(ext) != names:
        extra = sorted(set(ext) ^ names)[:4]
        raise SystemExit(f"error: {onnx_path} and the layout name different "
                         f"initializers (e.g. {extra})")
    for e in side["layout"]:
        loc, off, length, dims, dtype = ext[e["name"]]
        if (loc, off, length, dims) != (side["data_file"], e["offset"],
                                        e["length"], e["dims"]) \
                or dtype != onnx.TensorProto.FLOAT:
            raise SystemExit(f"error: initializer {e['name']}: ONNX has "
                             f"{loc}@{off}+{length} {dims} (type {dtype}), the "
                             f"layout {side['data_file']}@{e['offset']}+"
                             f"{e['length']} {e['dims']} (float)")


def pwrite_all(fd, view, offset):
    while len(view):
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def fill(model, side, path):
    """Writes model's parameters at the layout's offsets; returns bytes."""
    import numpy as np
    import torch

    params = dict(model.named_parameters())
    missing = [e["name"] for e in side["layout"] if e["name"] not in params]
    if missing or len(params) != len(side["layout"]):
        raise SystemExit(f"error: model and layout differ: {len(params)} "
                         f"parameters, {len(side['layout'])} layout entries, "
                         f"missing {missing[:4]}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    written = 0
    try:
        if os.fstat(fd).st_size != side["data_bytes"]:
            os.ftruncate(fd, side["data_bytes"])
        for e in side["layout"]:
            p = params[e["name"]].detach()
            if p.dtype != torch.float32:
                raise SystemExit(f"error: {e['name']} is {p.dtype}, not float32")
            a = (p.t() if e["transposed"] else p).contiguous().numpy()
            if list(a.shape) != e["dims"] or a.nbytes != e["length"]:
                raise SystemExit(f"error: {e['name']}: tensor {list(a.shape)} "
                                 f"({a.nbytes} bytes), layout {e['dims']} "
                                 f"({e['length']} bytes)")
            pwrite_all(fd, memoryview(a).cast("B"), e["offset"])
            written += a.nbytes
            # Read back the ends of the tensor: a cheap guard on the offsets.
            flat = a.reshape(-1)
            for i in (0, flat.size - 4):
                got = np.frombuffer(os.pread(fd, 16, e["offset"] + 4 * i),
                                    dtype=np.float32)
                if not np.array_equal(got, flat[i:i + 4]):
                    raise SystemExit(f"error: read-back of {e['name']} differs")
        os.fsync(fd)
    finally:
        os.close(fd)
    return written


def check_ort(model, onnx_path, seq=8):
    """onnxruntime on the filled model vs PyTorch, batch 1."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    proto = onnx.load(onnx_path, load_external_data=False)
    ort_path, _ = gen.ort_copy(proto, onnx_path)
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(ort_path, so,
                                    providers=["CPUExecutionProvider"])
    finally:
        if ort_path != onnx_path:
            os.remove(ort_path)
    gen_ = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, seq), generator=gen_)
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits.float().numpy()
    got = sess.run(["logits"], {"input_ids": ids.numpy()})[0]
    err = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    print(f"ORT vs PyTorch on the filled model (1x{seq}): max abs diff "
          f"{err:.2e} (logits up to {scale:.2f})")
    if not err <= 1e-3 * max(1.0, scale):
        raise SystemExit("error: the filled model does not match PyTorch")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("json", help="the generator's side JSON (DIR/STEM.json)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write here instead of the JSON's data file")
    ap.add_argument("--check-ort", action="store_true",
                    help="run the filled model with onnxruntime vs PyTorch")
    a = ap.parse_args()

    with open(a.json) as f:
        side = json.load(f)
    base = os.path.dirname(os.path.abspath(a.json))
    onnx_path = os.path.join(base, side["data_file"][:-len(".data")])
    data_path = a.out or os.path.join(base, side["data_file"])
    start = time.perf_counter()
    check_onnx_layout(onnx_path, side)
    model = model_from_side(side, a.seed)
    built = time.perf_counter()
    written = fill(model, side, data_path)
    done = time.perf_counter()
    print(f"fill_weights: {len(side['layout'])} tensors, {written / 2**30:.2f} GiB "
          f"-> {data_path} (model {side.get('preset') or 'tiny'}, "
          f"{side['layers']} layers, seed {a.seed}; build {built - start:.1f} s, "
          f"write {done - built:.1f} s)")
    if a.check_ort:
        if a.out:
            raise SystemExit("error: --check-ort reads the JSON's own data file; "
                             "drop --out")
        check_ort(model, onnx_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
