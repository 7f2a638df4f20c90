#!/usr/bin/env python3
"""Writes a Llama-2-7B-shaped ONNX model whose weights live in a sparse file.

--preset llama13b, llama34b (CodeLlama-34B, 8 kv heads) and llama70b
(Llama-2-70B, 8 kv heads) give the larger shapes (for memory plans: no
weight bytes either). --preset tinyllama gives the TinyLlama-1.1B shape instead (hidden 2048, 32
heads, 4 kv heads, intermediate 5632, vocab 32000, 22 layers, untied head):
the GPU benchmark's model (bench/gpu/), whose weights bench/gpu/fill_weights.py
writes into the sparse file at the offsets of the side JSON's `layout`.

The graph is a real TorchScript (opset 17) export of transformers'
LlamaForCausalLM, forward(input_ids) -> logits, use_cache=False, symbolic
batch and seq dims, default (sdpa) attention. No weight bytes are produced:

  1. The 7B model is built on the meta device; every parameter is then
     replaced by a zero-stride view of its own one-element CPU storage
     (torch.tensor([[v]]).expand(out, in)), and the rotary embedding is
     rebuilt on the CPU. Tracing runs the real forward (seq 16) on these
     views, so RAM stays at a few GB (linear layers copy one weight at a
     time into a contiguous temporary).
  2. torch.onnx.export(dynamo=False, export_params=False,
     keep_initializers_as_inputs=True): the exporter runs its usual passes
     (constant folding included, so linear weights come out pre-transposed
     as inputs "onnx::MatMul_N" [in, out], exactly as in a real export); only
     the weight bytes are left out. keep_initializers_as_inputs=True merely
     skips the value-deduplication of initializers, which would otherwise
     compare multi-GB tensors pairwise and which never fires on a trained
     model whose weights all differ.
  3. Every parameter graph input becomes an initializer with
     data_location=EXTERNAL (location/offset/length, offsets 4096-aligned)
     in DIR/NAME.onnx.data, and is removed from graph.input. Names are module
     paths (model.layers.0.self_attn.q_proj.weight, ...); inputs renamed by
     constant folding (onnx::MatMul_N) are mapped back through the scope
     name of the MatMul that consumes them and checked against the
     parameter's transposed shape; their doc_string records the exporter's
     name and that the tensor holds the transposed weight.

transformers >= 5 calls torch.diff (find_packed_sequence_indices) when
attention_mask is None and there is no cache; the TorchScript exporter has
no symbolic for aten::diff, so the one from test/generators/export_hf.py is
registered (Concat/Slice/Sub), as the project's tiny exports do.
--no-packed-mask instead makes find_packed_sequence_indices return None (its
eager result for unpacked input), which drops that subgraph and lets sdpa
take the is_causal path.

The data file is sparse (truncate to the full size, nothing written) unless
--tiny: then a 2-layer, hidden-64 model with real random weights is written
(real bytes) and checked against PyTorch with onnxruntime, and the mapping
is checked against a normal export_params=True export of the same model.

  bench/gen_llama7b_onnx.py -o DIR [--preset llama7b|tinyllama] [--layers N]
      [--tiny] [--opset 17]
"""

import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALIGN = 4096

SHAPE_7B = dict(hidden_size=4096, num_attention_heads=32,
                num_key_value_heads=32, intermediate_size=11008,
                vocab_size=32000, max_position_embeddings=4096)
SHAPE_TINYLLAMA = dict(hidden_size=2048, num_attention_heads=32,
                       num_key_value_heads=4, intermediate_size=5632,
                       vocab_size=32000, max_position_embeddings=2048)
SHAPE_13B = dict(hidden_size=5120, num_attention_heads=40,
                 num_key_value_heads=40, intermediate_size=13824,
                 vocab_size=32000, max_position_embeddings=4096)
# CodeLlama-34B's shape (grouped-query attention, 8 kv heads).
SHAPE_34B = dict(hidden_size=8192, num_attention_heads=64,
                 num_key_value_heads=8, intermediate_size=22016,
                 vocab_size=32000, max_position_embeddings=4096)
SHAPE_70B = dict(hidden_size=8192, num_attention_heads=64,
                 num_key_value_heads=8, intermediate_size=28672,
                 vocab_size=32000, max_position_embeddings=4096)
# --preset: shape, default layers, parameter count at those layers.
PRESETS = {
    "llama7b": (SHAPE_7B, 32, 6_738_415_616),
    "llama13b": (SHAPE_13B, 40, 13_015_864_320),
    "llama34b": (SHAPE_34B, 48, 33_743_970_304),
    "llama70b": (SHAPE_70B, 80, 68_976_648_192),
    "tinyllama": (SHAPE_TINYLLAMA, 22, 1_100_048_384),
}
SHAPE_TINY = dict(hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=4, intermediate_size=176,
                  vocab_size=320, max_position_embeddings=4096)


def build_config(layers, tiny, preset="llama7b"):
    from transformers import LlamaConfig

    shape = SHAPE_TINY if tiny else PRESETS[preset][0]
    return LlamaConfig(num_hidden_layers=layers, rms_norm_eps=1e-5,
                       tie_word_embeddings=False, use_cache=False,
                       rope_theta=10000.0, **shape)


def logits_only(model):
    """Re-classes the model so forward(input_ids) -> logits.

    A subclass (not a wrapper module) keeps parameter names and scopes as
    in LlamaForCausalLM: model.layers.0..., lm_head.weight.
    """
    base = type(model)

    class LogitsOnly(base):
        def forward(self, input_ids):
            return base.forward(self, input_ids=input_ids, use_cache=False,
                                return_dict=True).logits

    model.__class__ = LogitsOnly
    return model.eval()


def build_model(cfg, tiny, seed=0):
    import torch
    from transformers import LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    if tiny:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
        with torch.no_grad():  # norms init to ones; make them distinct
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.uniform_(0.5, 1.5)
        return logits_only(model)

    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    names = [n for n, _ in model.named_parameters()]
    count = len(names)
    for i, name in enumerate(names):
        mod_path, _, attr = name.rpartition(".")
        mod = model.get_submodule(mod_path)
        shape = getattr(mod, attr).shape
        # Own storage per parameter, distinct small value, zero strides.
        val = 0.01 * (1.0 + i / count)
        cheap = torch.full((1,) * len(shape), val).expand(shape)
        setattr(mod, attr, torch.nn.Parameter(cheap, requires_grad=False))
    model.model.rotary_emb = LlamaRotaryEmbedding(cfg)  # buffers on CPU
    for name, b in model.named_buffers():
        if b.device.type == "meta":
            raise RuntimeError(f"buffer {name} still on meta device")
    return logits_only(model)


def register_diff_symbolic(opset):
    sys.path.insert(0, os.path.join(ROOT, "test", "generators"))
    import export_hf  # noqa: E402

    export_hf._register_diff_symbolic(opset)


def disable_packed_mask():
    import transformers.masking_utils as mu

    mu.find_packed_sequence_indices = lambda position_ids: None


@contextlib.contextmanager
def weightless_shape_inference(model, stats):
    """Keeps weight tensors out of the exporter's whole-graph ONNX shape
    inference.

    torch._C._jit_pass_onnx_graph_shape_type_inference serializes every
    entry of params_dict as an initializer (materializing our zero-stride
    views: 27 GB for 7B) just so onnx::InferShapes can see them. A weight's
    shape is also on its graph input's type, and ONNX shape inference reads
    only int64 initializer values (Reshape/Slice/... operands), never a
    float weight's values, so leaving the parameters (and the constant-
    folded views of them, which share their storage) out of that one call
    gives the same inferred types. Every other pass sees the full dict.
    """
    import torch

    ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    orig = torch._C._jit_pass_onnx_graph_shape_type_inference

    def patched(graph, params_dict, *args):
        kept = {}
        for k, v in params_dict.items():
            if isinstance(v, torch.Tensor) and \
                    v.untyped_storage().data_ptr() in ptrs:
                stats["dropped"] = stats.get("dropped", 0) + 1
            else:
                kept[k] = v
        return orig(graph, kept, *args)

    torch._C._jit_pass_onnx_graph_shape_type_inference = patched
    try:
        yield
    finally:
        torch._C._jit_pass_onnx_graph_shape_type_inference = orig


def torchscript_export(model, opset, seq=16, export_params=False,
                       weightless=True):
    import onnx
    import torch

    ids = torch.zeros(1, seq, dtype=torch.int64)
    buf = io.BytesIO()
    stats = {}
    guard = weightless_shape_inference(model, stats) if weightless \
        else contextlib.nullcontext()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            torch.no_grad(), guard:
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (ids,), buf, dynamo=False, opset_version=opset,
            export_params=export_params,
            keep_initializers_as_inputs=not export_params,
            do_constant_folding=True,
            input_names=["input_ids"], output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                          "logits": {0: "batch", 1: "seq"}})
    proto = onnx.load_from_string(buf.getvalue())
    if os.environ.get("GEN_DEBUG"):
        print(f"debug: shape inference ran without {stats.get('dropped', 0)} weight tensors")
    return proto


def graph_signature(proto):
    """Nodes (op, inputs, outputs, attributes) and value_info, as text."""
    g = proto.graph
    nodes = [(n.op_type, n.name, list(n.input), list(n.output),
              [a.SerializeToString() for a in n.attribute]) for n in g.node]
    vis = sorted(v.SerializeToString() for v in g.value_info)
    outs = [o.SerializeToString() for o in g.output]
    return nodes, vis, outs


def scope_of(node_name):
    """'/model/layers.0/self_attn/q_proj/MatMul' -> 'model.layers.0.self_attn.q_proj'."""
    parts = [p for p in node_name.split("/") if p]
    return ".".join(parts[:-1])


def map_params(proto, model):
    """Returns [(input ValueInfo, param name, transposed)] for weight inputs."""
    params = dict(model.named_parameters())
    consumers = {}
    for node in proto.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    out = []
    seen = set()
    for vi in proto.graph.input:
        if vi.name == "input_ids":
            continue
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name in params:
            name, transposed = vi.name, False
        else:
            users = consumers.get(vi.name, [])
            if len(users) != 1 or users[0].op_type not in ("MatMul", "Gemm"):
                raise RuntimeError(
                    f"input {vi.name}: cannot map back to a parameter "
                    f"(users: {[(n.op_type, n.name) for n in users]})")
            name, transposed = scope_of(users[0].name) + ".weight", True
            if name not in params:
                raise RuntimeError(f"input {vi.name}: scope {name} is no parameter")
        shape = list(params[name].shape)
        want = shape[::-1] if transposed else shape
        if dims != want:
            raise RuntimeError(f"input {vi.name} -> {name}: dims {dims}, expected {want}")
        if name in seen:
            raise RuntimeError(f"parameter {name} mapped twice")
        seen.add(name)
        out.append((vi, name, transposed))
    missing = sorted(set(params) - seen)
    if missing:
        raise RuntimeError(f"parameters not in the graph: {missing[:5]}...")
    return out


def externalize(proto, mapping, data_name):
    """Inputs -> EXTERNAL initializers; returns (layout list, total bytes)."""
    import onnx

    layout = []
    offset = 0
    mapped = {vi.name for vi, _, _ in mapping}
    renames = {}
    for vi, name, transposed in mapping:
        elem = vi.type.tensor_type.elem_type
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize
        numel = 1
        for d in dims:
            numel *= d
        length = numel * itemsize
        t = proto.graph.initializer.add()
        t.name = name
        t.data_type = elem
        t.dims.extend(dims)
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", data_name), ("offset", str(offset)),
                     ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        if transposed:
            t.doc_string = (f"exported as {vi.name}: transpose of {name} "
                            f"(constant-folded, layout [in, out])")
        renames[vi.name] = name
        layout.append(dict(name=name, exported_name=vi.name,
                           transposed=transposed, dims=dims, offset=offset,
                           length=length))
        offset += length
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
    keep = [vi for vi in proto.graph.input if vi.name not in mapped]
    del proto.graph.input[:]
    proto.graph.input.extend(keep)
    if any(k != v for k, v in renames.items()):
        for node in proto.graph.node:
            for i, n in enumerate(node.input):
                if n in renames:
                    node.input[i] = renames[n]
    total = layout[-1]["offset"] + layout[-1]["length"] if layout else 0
    return layout, total


def write_data(path, layout, total, model):
    """Sparse file (model None) or the real bytes of model's parameters."""
    if os.path.exists(path):
        os.remove(path)
    with open(path, "wb") as f:
        if model is not None:
            import numpy as np

            params = dict(model.named_parameters())
            for ent in layout:
                p = params[ent["name"]].detach()
                if ent["transposed"]:
                    p = p.t()
                a = np.ascontiguousarray(p.numpy())
                assert a.nbytes == ent["length"], ent
                f.seek(ent["offset"])
                f.write(a.tobytes())
        f.truncate(total)


def check_tiny(model, onnx_path, opset, layout, no_packed_mask):
    """ORT vs PyTorch, and our mapping vs a normal export_params=True export."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper

    # 1. mapping vs the exporter's own initializers (same model, same passes,
    # shape inference with the weights): same graph, same values
    ref = torchscript_export(model, opset, export_params=True, weightless=False)
    raw = torchscript_export(model, opset)
    if graph_signature(ref) != graph_signature(raw):
        raise RuntimeError("export_params=False + weightless shape inference "
                           "changed the graph")
    ref_init = {t.name: numpy_helper.to_array(t) for t in ref.graph.initializer}
    params = dict(model.named_parameters())
    n_cmp = 0
    for ent in layout:
        src = ent["exported_name"]
        if src not in ref_init:
            # deduplicated in the normal export (equal values) - compare via name
            raise RuntimeError(f"{src} not in the export_params=True export")
        p = params[ent["name"]].detach()
        want = (p.t() if ent["transposed"] else p).numpy()
        if not np.array_equal(ref_init[src], want):
            raise RuntimeError(f"value mismatch for {src} -> {ent['name']}")
        n_cmp += 1
    ref_nodes = [n.op_type for n in ref.graph.node]
    ours = onnx.load(onnx_path, load_external_data=False)
    if ref_nodes != [n.op_type for n in ours.graph.node]:
        raise RuntimeError("node list differs from the export_params=True export")
    # 2. numerics with onnxruntime, three shapes (dynamic batch and seq)
    ort_path, fixes = ort_copy(ours, onnx_path)
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(ort_path, so,
                                    providers=["CPUExecutionProvider"])
    finally:
        if ort_path != onnx_path:
            os.remove(ort_path)
    worst = 0.0
    gen = torch.Generator().manual_seed(1)
    # With the packed-sequence mask the trace bakes in batch 1 (a Python
    # branch on batch_size != position_ids.shape[0] in masking_utils), so
    # only batch 1 is required to work; batch 2 is tried and reported.
    shapes = ((1, 16), (1, 7), (1, 33)) if not no_packed_mask else \
        ((1, 16), (2, 7), (3, 33))
    for b, s in shapes + (((2, 7),) if not no_packed_mask else ()):
        ids = torch.randint(0, model.config.vocab_size, (b, s), generator=gen)
        with torch.no_grad():
            want = model(ids).float().numpy()
        try:
            got = sess.run(["logits"], {"input_ids": ids.numpy()})[0]
        except Exception as e:  # noqa: BLE001
            if (b, s) in shapes:
                raise
            print(f"note: batch {b} does not run in ORT: "
                  f"{str(e).strip().splitlines()[0][-160:]}")
            continue
        if got.shape != want.shape:
            raise RuntimeError(f"shape {got.shape} != {want.shape}")
        err = float(np.max(np.abs(got - want)))
        if err > 1e-4:
            raise RuntimeError(f"ORT vs PyTorch max abs diff {err} at {(b, s)}")
        worst = max(worst, err)
    print(f"tiny check: {n_cmp} initializers equal to the export_params=True "
          f"export, identical {len(ref_nodes)} nodes and value_info; ORT vs PyTorch max abs diff "
          f"{worst:.2e} on shapes {' '.join(f'({b},{q})' for b, q in shapes)}"
          + (f" (ORT copy with {fixes} Cast bool->int64 before CumSum)"
             if fixes else ""))


BOOL_OPS = {"Not", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
            "And", "Or", "Xor", "IsNaN", "IsInf"}


def ort_copy(proto, onnx_path):
    """ONNX Runtime rejects the exporter's CumSum on a bool tensor (torch's
    cumsum promotes bool to int64, the TorchScript symbolic forgets the
    Cast). Returns (path, n): a copy with that Cast inserted, or the model's
    own path when nothing needs fixing. Only used to run ORT."""
    import onnx

    producer = {o: n for n in proto.graph.node for o in n.output}
    fixed = onnx.ModelProto()
    fixed.CopyFrom(proto)
    nodes = []
    n_fix = 0
    for node in fixed.graph.node:
        if node.op_type == "CumSum" and node.input[0] in producer \
                and producer[node.input[0]].op_type in BOOL_OPS:
            cast_out = node.input[0] + "_as_int64"
            nodes.append(onnx.helper.make_node(
                "Cast", [node.input[0]], [cast_out], to=onnx.TensorProto.INT64,
                name=node.name + "_cast_bool"))
            node.input[0] = cast_out
            n_fix += 1
        nodes.append(node)
    if not n_fix:
        return onnx_path, 0
    del fixed.graph.node[:]
    fixed.graph.node.extend(nodes)
    path = onnx_path[:-5] + ".ort.onnx"
    onnx.save_model(fixed, path)
    return path, n_fix


def allocated_bytes(path):
    return os.stat(path).st_blocks * 512


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help="output directory")
    ap.add_argument("--preset", choices=sorted(PRESETS), default=None,
                    help="model shape (default llama7b)")
    ap.add_argument("--layers", type=int, default=None,
                    help="decoder layers (default: the preset's, 32 for "
                         "llama7b and 22 for tinyllama, or 2 with --tiny)")
    ap.add_argument("--tiny", action="store_true",
                    help="hidden 64, real random weights, ORT check")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--name", default=None,
                    help="file stem (default: the preset's name, or "
                         "llama_tiny with --tiny)")
    ap.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                    help="attention implementation to export (eager for the "
                         "grouped-query presets with --no-packed-mask)")
    ap.add_argument("--no-packed-mask", action="store_true",
                    help="drop transformers' packed-sequence mask subgraph")
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    import onnx

    if a.tiny and a.preset:
        ap.error("--tiny has its own shape; drop --preset")
    preset = a.preset or "llama7b"
    _, preset_layers, expected_params = PRESETS[preset]
    layers = a.layers if a.layers is not None else (2 if a.tiny else preset_layers)
    stem = a.name or ("llama_tiny" if a.tiny else preset)
    os.makedirs(a.output, exist_ok=True)
    onnx_path = os.path.join(a.output, stem + ".onnx")
    data_name = stem + ".onnx.data"
    data_path = os.path.join(a.output, data_name)

    if a.no_packed_mask:
        disable_packed_mask()
    else:
        register_diff_symbolic(a.opset)
    cfg = build_config(layers, a.tiny, preset)
    # Eager attention (repeat_kv, matmul, softmax): TorchScript cannot export
    # sdpa's grouped-query path (enable_gqa), which --no-packed-mask takes
    # for the 8-kv-head presets. tailor raises either form to tg.attention.
    cfg._attn_implementation = a.attn
    model = build_model(cfg, a.tiny)
    n_model_params = sum(p.numel() for p in model.parameters())
    t_build = time.perf_counter()

    proto = torchscript_export(model, a.opset)
    t_export = time.perf_counter()
    mapping = map_params(proto, model)
    layout, total = externalize(proto, mapping, data_name)
    proto.producer_name = "tailor bench/gen_llama7b_onnx.py via " + proto.producer_name
    write_data(data_path, layout, total, model if a.tiny else None)
    onnx.save_model(proto, onnx_path)
    t_write = time.perf_counter()

    # Verification.
    loaded = onnx.load(onnx_path, load_external_data=False)
    onnx.checker.check_model(onnx_path)
    full_check = "ok"
    try:  # strict type/shape inference: rejects the exporter's CumSum(bool)
        onnx.checker.check_model(onnx_path, full_check=True)
    except Exception as e:  # noqa: BLE001
        full_check = str(e).strip().splitlines()[0]
    n_params = 0
    data_size = os.path.getsize(data_path)
    for t in loaded.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_location == onnx.TensorProto.EXTERNAL:
            n_params += n
            ext = {e.key: e.value for e in t.external_data}
            off, length = int(ext["offset"]), int(ext["length"])
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
            if ext["location"] != data_name or off % ALIGN or \
                    length != n * itemsize or off + length > data_size:
                raise RuntimeError(f"bad external data for {t.name}: {ext}")
    if n_params != n_model_params:
        raise RuntimeError(f"{n_params} parameters in initializers, model has {n_model_params}")
    if not a.tiny and layers == preset_layers and n_params != expected_params:
        raise RuntimeError(f"{n_params} parameters, expected {expected_params}")
    if a.tiny:
        check_tiny(model, onnx_path, a.opset, layout, a.no_packed_mask)
    seconds = time.perf_counter() - t0

    ops = Counter(n.op_type for n in loaded.graph.node)
    opset = {(o.domain or "ai.onnx"): o.version for o in loaded.opset_import}
    n_inline = sum(1 for t in loaded.graph.initializer
                   if t.data_location != onnx.TensorProto.EXTERNAL)
    side = dict(
        approach="torchscript export_params=False on zero-stride parameter "
                 "views, inputs -> external initializers",
        exporter="torchscript", opset=opset,
        preset=None if a.tiny else preset, layers=layers, tiny=a.tiny,
        packed_sequence_mask=not a.no_packed_mask,
        attn_implementation=model.config._attn_implementation,
        nodes=len(loaded.graph.node), ops=dict(sorted(ops.items())),
        initializers=len(loaded.graph.initializer), inline_initializers=n_inline,
        parameters=n_params, checker_full_check=full_check, data_file=data_name, data_bytes=total,
        inputs=[i.name for i in loaded.graph.input],
        outputs=[o.name for o in loaded.graph.output],
        seconds=dict(build=round(t_build - t0, 2),
                     export=round(t_export - t_build, 2),
                     write=round(t_write - t_export, 2),
                     total=round(seconds, 2)),
        layout=layout)
    with open(os.path.join(a.output, stem + ".json"), "w") as f:
        json.dump(side, f, indent=1)
        f.write("\n")

    if full_check != "ok":
        print(f"note: onnx.checker full_check fails: {full_check}")
    print("ops (opset %s): %s" % (opset.get("ai.onnx"), ", ".join(
        f"{k} {v}" for k, v in sorted(ops.items()))))
    print(f"{onnx_path}: {len(loaded.graph.node)} nodes, "
          f"{len(loaded.graph.initializer)} initializers, {n_params:,} parameters, "
          f".onnx {os.path.getsize(onnx_path) / 2**20:.2f} MiB, "
          f".data {os.path.getsize(data_path) / 2**30:.2f} GiB apparent / "
          f"{allocated_bytes(data_path) / 2**20:.2f} MiB allocated, "
          f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
