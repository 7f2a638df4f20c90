#!/usr/bin/env python3
"""Exports tiny decoder LMs written by hand in the styles people publish.

Not Hugging Face classes: models whose attention, masks, rotary tables and
grouped-query heads are spelled the way reference repositories spell them,
so the importer and the raising passes meet the dataflow, not one exporter's
node sequence.

  meta      Meta's reference Llama: rotary as interleaved pairs (x[..., 0::2],
            x[..., 1::2], stack + flatten), GQA by repeat_interleave, an
            additive triu(full(-inf), 1) mask.
  nanogpt   nanoGPT's GPT-2: fused qkv (c_attn + split), a registered
            tril(ones) buffer sliced to T and masked_fill(== 0, -inf),
            LayerNorm, tanh GELU, learned positions.
  litgpt    lit-gpt style: rotary tables from torch.outer, rotate-half,
            GQA by k[:, :, None].expand(...).reshape(...).
  sdpa      F.scaled_dot_product_attention(is_causal=True), GQA expanded.
  maskfill  an explicit torch.triu(ones, 1).bool() + masked_fill(-inf).

  export_handwritten.py --style meta --exporter torchscript --opset 14 \\
      [--dynamic] -o OUT.onnx

Writes OUT.onnx (weights inline as raw_data), and OUT.ref.npz with the seeded
input_ids [BATCH, SEQ] and PyTorch's logits for them. `build(style)` returns
the eval-mode module (layers named `layers.N`, linear layers by their
repository's names) for other references.
"""

import argparse
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

STYLES = ("meta", "nanogpt", "litgpt", "sdpa", "maskfill")
BATCH, SEQ = 2, 16
DIM, HEADS, KV_HEADS, LAYERS, VOCAB, HIDDEN, MAXPOS = 64, 4, 2, 2, 256, 128, 64


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = 1e-6

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def outer_tables(head_dim, t):
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(torch.arange(t).float(), inv)
    return torch.cos(freqs), torch.sin(freqs)


def rope_pairs(x, cos, sin):
    """Meta's layout: rotates (x[2i], x[2i+1]) by the i-th angle."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out1 = x1 * cos - x2 * sin
    out2 = x1 * sin + x2 * cos
    return torch.stack([out1, out2], dim=-1).flatten(-2)


def rope_half(x, cos, sin):
    """rotate-half layout over tables duplicated to the full head dim."""
    cos = torch.cat([cos, cos], dim=-1)
    sin = torch.cat([sin, sin], dim=-1)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class LlamaAttention(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.style = style
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, HEADS * self.head_dim, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wo = nn.Linear(HEADS * self.head_dim, DIM, bias=False)

    def repeat_kv(self, x):
        n = HEADS // KV_HEADS
        if self.style == "meta":
            return x.repeat_interleave(n, dim=1)
        b, kv, t, d = x.shape
        return x[:, :, None].expand(b, kv, n, t, d).reshape(b, kv * n, t, d)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, HEADS, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        rope = rope_pairs if self.style == "meta" else rope_half
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        if self.style == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            if self.style == "maskfill":
                hidden = torch.triu(torch.ones(t, t), diagonal=1).bool()
                att = att.masked_fill(hidden, float("-inf"))
            else:
                att = att + torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
            y = F.softmax(att, dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, t, DIM))


class LlamaBlock(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.attention = LlamaAttention(style)
        self.attention_norm = RMSNorm(DIM)
        self.ffn_norm = RMSNorm(DIM)
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(LlamaBlock(style) for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, input_ids):
        cos, sin = outer_tables(DIM // HEADS, input_ids.shape[1])
        x = self.tok_embeddings(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


class NanoAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(DIM, 3 * DIM)
        self.c_proj = nn.Linear(DIM, DIM)
        self.register_buffer("bias", torch.tril(torch.ones(MAXPOS, MAXPOS)).view(1, 1, MAXPOS, MAXPOS))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(DIM, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class NanoBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = NanoAttention()
        self.ln_2 = nn.LayerNorm(DIM)
        self.c_fc = nn.Linear(DIM, HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class NanoGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(MAXPOS, DIM)
        self.layers = nn.ModuleList(NanoBlock() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], dtype=torch.long)
        x = self.wte(input_ids) + self.wpe(pos)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_f(x))


def build(style, seed=0):
    torch.manual_seed(seed)
    model = NanoGPT() if style == "nanogpt" else Llama(style)
    # Norm weights and biases get noise, so no exporter folds them away.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or p.dim() == 1:
                p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def export(style, exporter, opset, out, dynamic=False, seed=0):
    import numpy as np

    model = build(style, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    with torch.no_grad():
        logits = model(ids)
    if exporter == "torchscript":
        kw = {}
        if dynamic:
            kw["dynamic_axes"] = {"input_ids": {0: "batch", 1: "seq"},
                                  "logits": {0: "batch", 1: "seq"}}
        torch.onnx.export(model, (ids,), out, input_names=["input_ids"],
                          output_names=["logits"], opset_version=opset,
                          dynamo=False, **kw)
    else:
        kw = {}
        if dynamic:
            kw["dynamic_shapes"] = ({0: torch.export.Dim("batch"),
                                     1: torch.export.Dim("seq", max=MAXPOS)},)
        program = torch.onnx.export(model, (ids,), input_names=["input_ids"],
                                    output_names=["logits"], opset_version=opset,
                                    dynamo=True, **kw)
        program.save(out)
    np.savez(out + ".ref.npz", input_ids=ids.numpy(), logits=logits.numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=STYLES, required=True)
    parser.add_argument("--exporter", choices=("torchscript", "dynamo"),
                        default="torchscript")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--dynamic", action="store_true",
                        help="symbolic batch and seq dims")
    parser.add_argument("-o", "--out", required=True)
    args = parser.parse_args()
    export(args.style, args.exporter, args.opset, args.out, args.dynamic)
    print(f"{args.out}: {args.style} {args.exporter} opset {args.opset} "
          f"{'dynamic' if args.dynamic else 'static'}")


if __name__ == "__main__":
    sys.exit(main())
