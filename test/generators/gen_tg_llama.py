#!/usr/bin/env python3
"""Writes a Llama-architecture forward graph in the tg dialect.

The graph is what tailor's ONNX importer produces for a Hugging Face
LlamaForCausalLM after raising: tg.param symbols pointing into an external
data file (no weight bytes), then embedding, per layer rms_norm -> q/k/v
linear -> rope -> causal grouped-query attention -> o_proj -> residual ->
rms_norm -> SwiGLU MLP -> residual, and a final norm and lm_head.

  gen_tg_llama.py --preset tiny  -o examples/tiny-llama/forward.mlir
  gen_tg_llama.py --preset 7b    -o /tmp/llama7b.mlir   (32 layers, 6.7B params)
  gen_tg_llama.py --preset 7b --dtype f32 --seq 512 ...  (what the CPU plans)
"""

import argparse
import sys

PRESETS = {
    # layers, hidden, heads, kv heads, mlp, vocab, batch, seq
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, mlp=128, vocab=256,
                 batch=1, seq=16, dtype="f32"),
    "7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32, mlp=11008,
               vocab=32000, batch=1, seq=2048, dtype="bf16"),
}

BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def generate(layers, hidden, heads, kv_heads, mlp, vocab, batch, seq, dtype):
    head_dim = hidden // heads
    dt = dtype

    def t(shape, elem=None):
        return "tensor<" + "x".join(map(str, shape)) + "x" + (elem or dt) + ">"

    params = [("model.embed_tokens.weight", [vocab, hidden])]
    for i in range(layers):
        pre = f"model.layers.{i}"
        params += [
            (f"{pre}.input_layernorm.weight", [hidden]),
            (f"{pre}.self_attn.q_proj.weight", [heads * head_dim, hidden]),
            (f"{pre}.self_attn.k_proj.weight", [kv_heads * head_dim, hidden]),
            (f"{pre}.self_attn.v_proj.weight", [kv_heads * head_dim, hidden]),
            (f"{pre}.self_attn.o_proj.weight", [hidden, heads * head_dim]),
            (f"{pre}.post_attention_layernorm.weight", [hidden]),
            (f"{pre}.mlp.gate_proj.weight", [mlp, hidden]),
            (f"{pre}.mlp.up_proj.weight", [mlp, hidden]),
            (f"{pre}.mlp.down_proj.weight", [hidden, mlp]),
        ]
    params += [("model.norm.weight", [hidden]), ("lm_head.weight", [vocab, hidden])]

    out = [
        f"// A {layers}-layer Llama-architecture forward pass in tg (hidden {hidden},",
        f"// {heads} query heads, {kv_heads} kv heads, head dim {head_dim}, MLP {mlp},"
        f" vocab {vocab};",
        f"// batch {batch}, sequence {seq}, {dt}). Written by"
        " test/generators/gen_tg_llama.py.",
        "// Weights are tg.param symbols pointing into an external data file, as"
        " the",
        "// ONNX importer produces them; the IR carries no weight bytes.",
        "",
    ]
    offset = 0
    for name, shape in params:
        length = BYTES[dt]
        for d in shape:
            length *= d
        out.append(f'tg.param @{name} : {t(shape)} at #tg.external<"model.onnx.data",'
                   f" offset = {offset}, length = {length}>")
        offset += (length + 4095) // 4096 * 4096  # 4 KiB-aligned, mmap-friendly
    out.append("")
    ids = t([batch, seq], "i64")
    out.append(f"func.func @forward(%input_ids: {ids}, %cos: {t([seq, head_dim])},"
               f" %sin: {t([seq, head_dim])}) -> {t([batch, seq, vocab])} {{")

    counter = [0]
    body = []

    def fresh():
        counter[0] += 1
        return f"%{counter[0]}"

    def attrs(layer, module):
        items = []
        if layer is not None:
            items.append(f"tg.layer = {layer} : i64")
        if module:
            items.append(f'tg.module = "{module}"')
        return " {" + ", ".join(items) + "}" if items else ""

    def emit(text):
        value = fresh()
        body.append(f"  {value} = {text}")
        return value

    def ref(name, shape):
        return emit(f"tg.param_ref @{name} : {t(shape)}")

    table = ref("model.embed_tokens.weight", [vocab, hidden])
    h = emit(f"tg.embedding {table}, %input_ids{attrs(None, 'model.embed_tokens')}"
             f" : ({t([vocab, hidden])}, {ids}) -> {t([batch, seq, hidden])}")
    x3 = [batch, seq]
    for i in range(layers):
        pre = f"model.layers.{i}"

        def linear(x, module, out_f, in_f):
            w = ref(f"{pre}.{module}.weight", [out_f, in_f])
            return emit(f"tg.linear {x}, {w}{attrs(i, pre + '.' + module)} :"
                        f" ({t(x3 + [in_f])}, {t([out_f, in_f])}) -> {t(x3 + [out_f])}")

        def norm(x, module):
            w = ref(f"{pre}.{module}.weight", [hidden])
            return emit(f"tg.rms_norm {x}, {w}{attrs(i, pre + '.' + module)} :"
                        f" ({t(x3 + [hidden])}, {t([hidden])}) -> {t(x3 + [hidden])}")

        def split_heads(x, n):
            r = emit(f"tg.reshape {x}{attrs(i, None)} : {t(x3 + [n * head_dim])}"
                     f" -> {t(x3 + [n, head_dim])}")
            return emit(f"tg.transpose {r} permutation = [0, 2, 1, 3]{attrs(i, None)}"
                        f" : {t(x3 + [n, head_dim])} -> {t([batch, n, seq, head_dim])}")

        def rope(x, n):
            return emit(f"tg.rope {x}, %cos, %sin{attrs(i, None)} :"
                        f" ({t([batch, n, seq, head_dim])}, {t([seq, head_dim])},"
                        f" {t([seq, head_dim])}) -> {t([batch, n, seq, head_dim])}")

        n1 = norm(h, "input_layernorm")
        q = rope(split_heads(linear(n1, "self_attn.q_proj", heads * head_dim, hidden),
                             heads), heads)
        k = rope(split_heads(linear(n1, "self_attn.k_proj", kv_heads * head_dim,
                                    hidden), kv_heads), kv_heads)
        v = split_heads(linear(n1, "self_attn.v_proj", kv_heads * head_dim, hidden),
                        kv_heads)
        scale = 1.0 / head_dim ** 0.5
        a = emit(f"tg.attention {q}, {k}, {v} {{causal, scale = {scale:.6e} : f64,"
                 f" tg.layer = {i} : i64}} : ({t([batch, heads, seq, head_dim])},"
                 f" {t([batch, kv_heads, seq, head_dim])},"
                 f" {t([batch, kv_heads, seq, head_dim])}) ->"
                 f" {t([batch, heads, seq, head_dim])}")
        a = emit(f"tg.transpose {a} permutation = [0, 2, 1, 3]{attrs(i, None)} :"
                 f" {t([batch, heads, seq, head_dim])} -> {t(x3 + [heads, head_dim])}")
        a = emit(f"tg.reshape {a}{attrs(i, None)} : {t(x3 + [heads, head_dim])}"
                 f" -> {t(x3 + [heads * head_dim])}")
        o = linear(a, "self_attn.o_proj", hidden, heads * head_dim)
        h1 = emit(f"tg.add {h}, {o}{attrs(i, None)} : ({t(x3 + [hidden])},"
                  f" {t(x3 + [hidden])}) -> {t(x3 + [hidden])}")
        n2 = norm(h1, "post_attention_layernorm")
        g = linear(n2, "mlp.gate_proj", mlp, hidden)
        u = linear(n2, "mlp.up_proj", mlp, hidden)
        s = emit(f"tg.silu {g}{attrs(i, None)} : {t(x3 + [mlp])}")
        m = emit(f"tg.mul {s}, {u}{attrs(i, None)} : ({t(x3 + [mlp])},"
                 f" {t(x3 + [mlp])}) -> {t(x3 + [mlp])}")
        d = linear(m, "mlp.down_proj", hidden, mlp)
        h = emit(f"tg.add {h1}, {d}{attrs(i, None)} : ({t(x3 + [hidden])},"
                 f" {t(x3 + [hidden])}) -> {t(x3 + [hidden])}")
    w = ref("model.norm.weight", [hidden])
    n = emit(f"tg.rms_norm {h}, {w}{attrs(None, 'model.norm')} :"
             f" ({t(x3 + [hidden])}, {t([hidden])}) -> {t(x3 + [hidden])}")
    w = ref("lm_head.weight", [vocab, hidden])
    logits = emit(f"tg.linear {n}, {w}{attrs(None, 'lm_head')} :"
                  f" ({t(x3 + [hidden])}, {t([vocab, hidden])}) -> {t(x3 + [vocab])}")
    body.append(f"  return {logits} : {t(x3 + [vocab])}")
    out += body
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--layers", type=int, help="override the preset's layer count")
    parser.add_argument("--dtype", choices=sorted(BYTES),
                        help="override the preset's element type")
    parser.add_argument("--seq", type=int, help="override the preset's sequence length")
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args()
    config = dict(PRESETS[args.preset])
    if args.layers is not None:
        config["layers"] = args.layers
    if args.dtype is not None:
        config["dtype"] = args.dtype
    if args.seq is not None:
        config["seq"] = args.seq
    text = generate(**config)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
