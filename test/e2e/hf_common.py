"""The Hugging Face export matrix shared by the e2e tests (hf_import.py,
hf_logits.py): which families and export paths are tested, and the cached
exports made by test/generators/export_hf.py.

Exports live in CACHE/<key>/<case>/model.{onnx,json,ref.npz}, where the key
hashes the exporter script and the torch/transformers/onnx/onnxscript
versions, so a changed generator or library makes fresh exports and reruns
only compile.
"""

import concurrent.futures as futures
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "..", "generators", "export_hf.py")

FAMILIES = ("llama", "mistral", "qwen2", "gpt2", "phi", "mistral-window",
            "gemma2", "falcon", "bloom")

# (family, exporter, opset, external data): TorchScript opsets 14 and 17 and
# dynamo opset 18 for every family, plus one export with external data.
CASES = [(f, e, o, False)
         for f in FAMILIES
         for (e, o) in (("torchscript", 14), ("torchscript", 17), ("dynamo", 18))]
CASES.append(("llama", "torchscript", 17, True))


def case_name(family, exporter, opset, external):
    tag = "ts" if exporter == "torchscript" else "dynamo"
    return f"{family}_{tag}{opset}" + ("_ext" if external else "")


def cache_key():
    import importlib.metadata as md
    h = hashlib.sha256(open(EXPORTER, "rb").read())
    for pkg in ("torch", "transformers", "onnx", "onnxscript"):
        h.update(f"{pkg}={md.version(pkg)}".encode())
    return h.hexdigest()[:16]


def export_case(args):
    """Exports one (family, exporter, opset, external, out_dir) case unless
    out_dir already holds it; returns (model path, error text or None)."""
    family, exporter, opset, external, out_dir = args
    model = os.path.join(out_dir, "model.onnx")
    if os.path.exists(os.path.join(out_dir, "done")):
        return model, None
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    cmd = [sys.executable, EXPORTER, "--family", family, "--exporter", exporter,
           "--opset", str(opset), "-o", model]
    if external:
        cmd.append("--external-data")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return model, proc.stdout[-2000:] + proc.stderr[-4000:]
    open(os.path.join(out_dir, "done"), "w").write("ok\n")
    return model, None


def export_all(cache_root, jobs=2):
    """Exports (or finds cached) every case in CASES under cache_root.

    Returns [((family, exporter, opset, external, out_dir), (model, err))],
    in CASES order.
    """
    cache = os.path.join(cache_root, cache_key())
    todo = [(f, e, o, x, os.path.join(cache, case_name(f, e, o, x)))
            for (f, e, o, x) in CASES]
    with futures.ThreadPoolExecutor(jobs) as pool:
        exported = list(pool.map(export_case, todo))
    return list(zip(todo, exported))
