#!/usr/bin/env python3
"""Exports a tiny, randomly initialized Hugging Face decoder-only LLM to ONNX.

Models are built from configs only (no hub access). The exported graph has
exactly one input, ``input_ids`` (int64 [batch, seq]), and one output,
``logits`` (float32 [batch, seq, vocab]), with symbolic batch and seq dims.

  export_hf.py --family llama --exporter torchscript --opset 17 -o /tmp/l.onnx
  export_hf.py --family gpt2 --exporter dynamo --opset 18 --external-data -o g.onnx

Next to OUT.onnx it writes OUT.json (family, exporter, actual opset read back
from the saved model, config essentials, workarounds and failed attempts) and
OUT.ref.npz (a seeded input_ids [2, 8] and the PyTorch logits for it), which
tests use to check numerics. --external-data puts the weights in OUT.onnx.data.

The library-default attention implementation (sdpa) is tried first, then
eager. With transformers 5.x every TorchScript export additionally needs two
custom symbolics (aten::diff, bool aten::cumsum; see _ts_symbolic_fns);
they are only registered after the plain export has failed, and the sidecar
records that. Parameters whose values are all equal (norm weights = 1,
biases = 0) get small seeded noise so exporters do not deduplicate them.

Importable: ``export(family, exporter, opset, out_path, external_data=False,
seed=0)`` returns the sidecar dict; ``build_model(family, seed)`` returns the
same logits-only PyTorch model for computing other references.
"""

import argparse
import contextlib
import io
import json
import os
import sys
import warnings

FAMILIES = ("llama", "mistral", "qwen2", "gpt2", "phi", "mistral-window",
            "gemma2", "falcon", "bloom")
EXPORTERS = ("torchscript", "dynamo")

# Example input used for tracing / export and for the numeric reference.
BATCH, SEQ = 2, 8

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, VOCAB, MAXPOS = 64, 2, 4, 2, 128, 256, 128


def _build_model(family, attn_implementation=None):
    """Returns (model, essentials): the eval-mode HF model and a dict of
    config essentials plus attn_implementation and model_class."""
    import transformers as tf

    kw = {}
    if attn_implementation is not None:
        kw["attn_implementation"] = attn_implementation
    if family in ("llama", "mistral", "qwen2", "mistral-window", "gemma2"):
        cfg_cls, model_cls = {
            "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
            "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
            "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
            "mistral-window": (tf.MistralConfig, tf.MistralForCausalLM),
            "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM),
        }[family]
        # Windows of 4 keys, so the example's 8 tokens see them. Gemma-2
        # alternates sliding and full layers, soft-caps attention scores and
        # the final logits, and scales queries by query_pre_attn_scalar.
        if family == "mistral-window":
            kw["sliding_window"] = 4
        if family == "gemma2":
            kw.update(sliding_window=4, head_dim=HIDDEN // HEADS,
                      attn_logit_softcapping=50.0,
                      final_logit_softcapping=30.0, query_pre_attn_scalar=16)
        cfg = cfg_cls(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                      intermediate_size=INTER, vocab_size=VOCAB,
                      max_position_embeddings=MAXPOS, **kw)
        model = model_cls(cfg)
        ess = dict(hidden_size=cfg.hidden_size, num_layers=cfg.num_hidden_layers,
                   heads=cfg.num_attention_heads, kv_heads=cfg.num_key_value_heads,
                   intermediate=cfg.intermediate_size, vocab=cfg.vocab_size)
    elif family == "falcon":
        # Falcon-7B's layout: fused query_key_value with one shared kv head
        # (multi-query), attention and MLP in parallel off one LayerNorm,
        # rotary embeddings, no biases.
        cfg = tf.FalconConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                              num_attention_heads=HEADS, vocab_size=VOCAB,
                              new_decoder_architecture=False, multi_query=True,
                              parallel_attn=True, alibi=False, bias=False,
                              max_position_embeddings=MAXPOS, **kw)
        model = tf.FalconForCausalLM(cfg)
        ess = dict(hidden_size=cfg.hidden_size, num_layers=cfg.num_hidden_layers,
                   heads=cfg.num_attention_heads, kv_heads=1,
                   intermediate=4 * cfg.hidden_size, vocab=cfg.vocab_size)
    elif family == "bloom":
        # BLOOM: ALiBi position biases added to the scores (no rotary or
        # learned positions), fused query_key_value, LayerNorm after the
        # embedding, tied lm_head.
        cfg = tf.BloomConfig(hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                             vocab_size=VOCAB, **kw)
        model = tf.BloomForCausalLM(cfg)
        ess = dict(hidden_size=cfg.hidden_size, num_layers=cfg.n_layer,
                   heads=cfg.n_head, kv_heads=cfg.n_head,
                   intermediate=4 * cfg.hidden_size, vocab=cfg.vocab_size)
    elif family == "gpt2":
        cfg = tf.GPT2Config(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                            n_inner=INTER, vocab_size=VOCAB, n_positions=MAXPOS,
                            bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                            **kw)
        model = tf.GPT2LMHeadModel(cfg)
        ess = dict(hidden_size=cfg.n_embd, num_layers=cfg.n_layer,
                   heads=cfg.n_head, kv_heads=cfg.n_head,
                   intermediate=cfg.n_inner, vocab=cfg.vocab_size)
    elif family == "phi":
        try:
            cfg = tf.PhiConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                               num_attention_heads=HEADS,
                               num_key_value_heads=KV_HEADS,
                               intermediate_size=INTER, vocab_size=VOCAB,
                               max_position_embeddings=MAXPOS,
                               bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                               **kw)
            model = tf.PhiForCausalLM(cfg)
        except Exception:  # pragma: no cover - fallback if Phi-1/2 is missing
            cfg = tf.Phi3Config(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                num_attention_heads=HEADS,
                                num_key_value_heads=KV_HEADS,
                                intermediate_size=INTER, vocab_size=VOCAB,
                                max_position_embeddings=MAXPOS,
                                pad_token_id=0, **kw)
            model = tf.Phi3ForCausalLM(cfg)
        ess = dict(hidden_size=cfg.hidden_size, num_layers=cfg.num_hidden_layers,
                   heads=cfg.num_attention_heads,
                   kv_heads=getattr(cfg, "num_key_value_heads", None)
                   or cfg.num_attention_heads,
                   intermediate=cfg.intermediate_size, vocab=cfg.vocab_size)
    else:
        raise ValueError(f"unknown family {family!r}")
    ess["tied"] = bool(getattr(cfg, "tie_word_embeddings", False))
    ess["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
    ess["model_class"] = type(model).__name__
    model.eval()
    return model, ess


@contextlib.contextmanager
def _quiet_stdout():
    """Silences stdout at the file-descriptor level (torch's C++ side prints
    the whole partial graph when the TorchScript exporter fails)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            with contextlib.redirect_stdout(io.StringIO()):
                yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _logits_wrapper(model):
    """Makes ``model`` return only logits from forward(input_ids).

    Rather than wrapping it in a new nn.Module (which would prefix every
    parameter name with the wrapper's attribute name), the model's class is
    swapped for a subclass overriding forward, so ONNX initializer names stay
    the Hugging Face checkpoint names (``model.embed_tokens.weight``...)
    wherever the exporter keeps them.
    """
    base = type(model)

    class LogitsOnly(base):
        def forward(self, input_ids):
            return base.forward(self, input_ids=input_ids, use_cache=False,
                                return_dict=True).logits

    LogitsOnly.__name__ = LogitsOnly.__qualname__ = base.__name__ + "LogitsOnly"
    model.__class__ = LogitsOnly
    return model.eval()


def _perturb_constant_params(model, std=0.02):
    """Adds seeded noise to parameters whose values are all equal.

    HF initializes norm weights to 1 and biases to 0. Both exporters
    deduplicate initializers with identical contents, so an untouched random
    model would export one shared tensor for every norm weight (joined by
    Identity nodes in TorchScript), unlike any trained checkpoint. Returns
    the names perturbed.
    """
    import torch

    names = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() > 1 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(torch.randn_like(p) * std)
                names.append(name)
    return names


def _ts_symbolic_fns():
    """Fills two gaps in torch's TorchScript exporter that HF models hit.

    transformers >= 5 runs masking_utils.find_packed_sequence_indices whenever
    attention_mask is None and there is no cache -- exactly our single-input,
    use_cache=False export -- which computes
    ``(torch.diff(position_ids, prepend=...) != 1).cumsum(-1)``.

    * aten::diff has no symbolic at all (UnsupportedOperatorError). Lowered
      here to Concat(prepend, x, append) then n times
      Sub(Slice[1:], Slice[:-1]) along dim.
    * aten::cumsum on a bool tensor is exported as CumSum(bool), which is not
      a valid ONNX type (onnxruntime refuses to load the model). torch
      promotes bool/int cumsum to int64, so cast to int64 first.

    Returns {aten op name: symbolic function}.
    """
    import onnx
    import torch
    from torch.onnx import symbolic_helper as h

    int64_max = torch.iinfo(torch.int64).max

    def diff(g, self, n, dim, prepend, append):
        n = h._get_const(n, "i", "n")
        dim = h._get_const(dim, "i", "dim")
        parts = []
        if not h._is_none(prepend):
            parts.append(prepend)
        parts.append(self)
        if not h._is_none(append):
            parts.append(append)
        x = g.op("Concat", *parts, axis_i=dim) if len(parts) > 1 else self
        for _ in range(n):
            hi = h._slice_helper(g, x, axes=[dim], starts=[1], ends=[int64_max])
            lo = h._slice_helper(g, x, axes=[dim], starts=[0], ends=[-1])
            x = g.op("Sub", hi, lo)
        return x

    def cumsum(g, self, dim, dtype=None):
        dim_t = g.op("Constant",
                     value_t=torch.tensor(h._get_const(dim, "i", "dim"),
                                          dtype=torch.int64))
        if dtype is not None and not h._is_none(dtype):
            to = h._get_const(dtype, "i", "dtype")
            x = g.op("Cast", self, to_i=h._type_utils.JitScalarType(to).onnx_type())
        else:
            st = h._type_utils.JitScalarType.from_value(
                self, h._type_utils.JitScalarType.UNDEFINED)
            if st in (h._type_utils.JitScalarType.BOOL,
                      h._type_utils.JitScalarType.UINT8,
                      h._type_utils.JitScalarType.INT8,
                      h._type_utils.JitScalarType.INT16,
                      h._type_utils.JitScalarType.INT):
                x = g.op("Cast", self, to_i=onnx_int64)
            else:
                x = self
        return g.op("CumSum", x, dim_t)

    onnx_int64 = onnx.TensorProto.INT64
    return {"aten::diff": diff, "aten::cumsum": cumsum}


@contextlib.contextmanager
def _ts_symbolics(opset):
    """Registers the _ts_symbolic_fns() overrides for the duration of the
    ``with`` block only (torch keeps registrations process-wide, which would
    make later exports in the same process silently depend on earlier ones).
    """
    import torch

    fns = _ts_symbolic_fns()
    for name, fn in fns.items():
        torch.onnx.register_custom_op_symbolic(name, fn, opset)
    try:
        yield
    finally:
        for name in fns:
            torch.onnx.unregister_custom_op_symbolic(name, opset)


def _register_diff_symbolic(opset):
    """Registers the _ts_symbolic_fns() overrides (aten::diff and the bool
    aten::cumsum fix) process-wide, for scripts that run torch.onnx.export
    themselves (bench/gen_llama7b_onnx.py)."""
    import torch

    for name, fn in _ts_symbolic_fns().items():
        torch.onnx.register_custom_op_symbolic(name, fn, opset)


def _export_torchscript(wrapped, example, opset, out_path, external_data):
    import onnx
    import torch

    buf = io.BytesIO()
    # On failure torch prints the whole partial graph to stdout; keep quiet.
    with warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapped, (example,), buf, dynamo=False, opset_version=opset,
            input_names=["input_ids"], output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                          "logits": {0: "batch", 1: "seq"}},
            do_constant_folding=True)
    model = onnx.load_from_string(buf.getvalue())
    _save(model, out_path, external_data)


def _export_dynamo(wrapped, example, opset, out_path, external_data):
    import logging

    import torch

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=MAXPOS)
    with warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(
            wrapped, (example,), dynamo=True, opset_version=opset,
            input_names=["input_ids"], output_names=["logits"],
            dynamic_shapes={"input_ids": {0: batch, 1: seq}},
            optimize=True, verbose=False, report=False)
    _save(prog.model_proto, out_path, external_data)


def _save(model, out_path, external_data):
    """Saves ``model``; with external_data, every floating-point initializer
    of rank >= 1 (the weights and buffers, however small) goes to one file
    OUT.onnx.data next to the model (data_location EXTERNAL with
    location/offset/length), while scalar and integer/bool initializers --
    the shape, index and scalar constants the dynamo exporter emits as
    initializers -- stay inline in the graph."""
    import onnx
    from onnx import TensorProto, external_data_helper, numpy_helper

    weight_types = {TensorProto.FLOAT, TensorProto.FLOAT16,
                    TensorProto.BFLOAT16, TensorProto.DOUBLE}
    data_name = os.path.basename(out_path) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(out_path)), data_name)
    if os.path.exists(data_path):
        os.remove(data_path)  # onnx appends to an existing data file
    if external_data:
        for i, t in enumerate(model.graph.initializer):
            if t.data_type not in weight_types or len(t.dims) == 0:
                continue
            if not t.HasField("raw_data"):
                new = numpy_helper.from_array(numpy_helper.to_array(t), t.name)
                model.graph.initializer[i].CopyFrom(new)
                t = model.graph.initializer[i]
            external_data_helper.set_external_data(t, data_name)
    onnx.save_model(model, out_path)


def build_model(family, seed=0, attn_implementation=None):
    """Returns (model, essentials, perturbed): the seeded, logits-only model
    exactly as export() exports it, for tests that need PyTorch outputs on
    other inputs."""
    import torch

    torch.manual_seed(seed)
    model, ess = _build_model(family, attn_implementation)
    perturbed = _perturb_constant_params(model)
    return _logits_wrapper(model), ess, perturbed


def export(family, exporter, opset, out_path, external_data=False, seed=0):
    """Exports one model; writes OUT.onnx, OUT.json, OUT.ref.npz.

    Returns the sidecar dict. Raises RuntimeError listing every attempt if
    no strategy (default attention, eager attention, TorchScript symbolic
    workarounds) produces a valid model.
    """
    import numpy as np
    import onnx
    import torch

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}")
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}")
    out_path = os.fspath(out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)

    # Strategies, tried in order: library-default attention first (what users
    # export), then eager attention, then (TorchScript only) the same two with
    # custom symbolics for aten::diff and bool aten::cumsum (see
    # _ts_symbolics). A strategy fails if the exporter raises or the
    # saved model fails onnx.checker (full_check). Every failure is recorded
    # in the sidecar's failed_attempts.
    strategies = [(None, False), ("eager", False)]
    if exporter == "torchscript":
        strategies += [(None, True), ("eager", True)]
    attempts = []
    sidecar = None
    for attn, ts_sym in strategies:
        if (exporter == "torchscript" and attn == "eager" and attempts
                and not ts_sym and "aten::diff" in attempts[-1]["error"]):
            # The failing op is in mask code shared by every attention
            # implementation; eager cannot help, go to the custom symbolics.
            attempts.append({"attn_implementation": "eager",
                             "ts_symbolic": False, "skipped": True,
                             "error": "skipped: aten::diff is in masking_utils,"
                                      " shared by all attention implementations"})
            continue
        wrapped, ess, perturbed = build_model(family, seed, attn)
        gen = torch.Generator().manual_seed(seed)
        example = torch.randint(0, ess["vocab"], (BATCH, SEQ), generator=gen,
                                dtype=torch.int64)
        with torch.no_grad():
            ref = wrapped(example).detach().float().numpy()
        try:
            with torch.no_grad(), (_ts_symbolics(opset) if ts_sym
                                   else contextlib.nullcontext()):
                if exporter == "torchscript":
                    _export_torchscript(wrapped, example, opset, out_path,
                                        external_data)
                else:
                    _export_dynamo(wrapped, example, opset, out_path,
                                   external_data)
            # Catch exports that are structurally invalid (e.g. ill-typed
            # ops), not just ones that raise inside the exporter.
            onnx.checker.check_model(out_path, full_check=True)
        except Exception as e:  # noqa: BLE001
            attempts.append({"attn_implementation": ess["attn_implementation"],
                             "ts_symbolic": ts_sym,
                             "error": f"{type(e).__name__}: {str(e).strip()[:2000]}"})
            if (attn, ts_sym) == strategies[-1]:
                raise RuntimeError(
                    f"export failed for {family}/{exporter}/opset {opset}: "
                    + json.dumps(attempts, indent=1)) from e
            continue
        workarounds = []
        if attn == "eager":
            workarounds.append("attn_implementation=eager")
        if ts_sym:
            workarounds.append("custom TorchScript symbolics for aten::diff and bool aten::cumsum")
        saved = onnx.load(out_path, load_external_data=False)
        opsets = {(o.domain or "ai.onnx"): o.version for o in saved.opset_import}
        stem = out_path[:-5] if out_path.endswith(".onnx") else out_path
        ref_path = stem + ".ref.npz"
        np.savez(ref_path, input_ids=example.numpy(), logits=ref)
        ext = [t.name for t in saved.graph.initializer
               if t.data_location == onnx.TensorProto.EXTERNAL]
        locs = sorted({e.value for t in saved.graph.initializer
                       for e in t.external_data if e.key == "location"})
        sidecar = {
            "family": family,
            "model_class": ess.pop("model_class"),
            "exporter": exporter,
            "requested_opset": opset,
            "opset": opsets.get("ai.onnx"),
            "opset_import": opsets,
            "attn_implementation": ess.pop("attn_implementation"),
            "failed_attempts": attempts,
            "workarounds": workarounds,
            "perturbed_params": perturbed,
            "config": ess,
            "seed": seed,
            "external_data": external_data,
            "external_data_files": locs,
            "num_external_initializers": len(ext),
            "num_initializers": len(saved.graph.initializer),
            "inputs": [i.name for i in saved.graph.input],
            "outputs": [o.name for o in saved.graph.output],
            "reference": {
                "file": os.path.basename(ref_path),
                "input_ids_shape": list(example.shape),
                "logits_shape": list(ref.shape),
            },
        }
        break
    if sidecar is None:  # only reachable if every strategy was skipped
        raise RuntimeError(f"export failed for {family}/{exporter}/opset "
                           f"{opset}: " + json.dumps(attempts, indent=1))
    side_path = (out_path[:-5] if out_path.endswith(".onnx") else out_path) + ".json"
    with open(side_path, "w") as f:
        json.dump(sidecar, f, indent=2)
        f.write("\n")
    return sidecar


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True, choices=FAMILIES)
    ap.add_argument("--exporter", required=True, choices=EXPORTERS)
    ap.add_argument("--opset", type=int, required=True)
    ap.add_argument("--external-data", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    s = export(a.family, a.exporter, a.opset, a.output, a.external_data, a.seed)
    size = os.path.getsize(a.output)
    extra = ""
    if s["external_data_files"]:
        extra = " + " + ",".join(s["external_data_files"])
    note = ""
    if s["workarounds"]:
        note = " (workarounds: " + "; ".join(s["workarounds"]) + ")"
    print(f"{a.output}{extra}: {s['model_class']} {s['exporter']} opset "
          f"{s['opset']} attn={s['attn_implementation']}{note} "
          f"{size} bytes, {s['num_initializers']} initializers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
