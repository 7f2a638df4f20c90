#!/usr/bin/env python3
"""Op-level gradients: tailor's autodiff of every differentiable tg op against
torch.autograd.

For each case a tiny tg function is written (WORK/<case>/case.mlir: func
@forward, every argument and result named with {tg.name = ...}) and run
through the VJP pipeline

  tailor-opt case.mlir --tailor-autodiff="function=forward cotangents=true
      wrt-inputs=true" --tailor-lower-to-sched="function=forward" -o sched.mlir
  tailor-translate --mlir-to-tplan sched.mlir -o case.tplan
  tailor-run case.tplan --input x=x.npy ... --input grad.y=grad.y.npy ...
      --output-dir out

In VJP mode every float result R gets a cotangent input `grad.R` and every
float argument X an output `grad.X`; the forward results stay outputs. The
inputs are seeded (positive where the op needs it: log, sqrt, rsqrt, pow's
base; bounded away from 0 for reciprocal and div's divisor), the cotangents
seeded normal. The reference is the same function written in PyTorch,
evaluated in float64 on the same (f32) values, with torch.autograd.grad for
the VJPs (an argument the result does not depend on has a zero gradient).
Forward results and gradients must match elementwise within
|tailor - torch| <= atol + rtol |torch| (rtol 1e-4, atol 1e-5).

Cases: every unary op, gelu (none, tanh), add sub mul div pow max min with
broadcasting operands ([2,3] with [3], [2,1] with [3]) and an operand used
twice, select, cast f32->f64, reduce_sum / reduce_mean / reduce_max with and
without keep_dims, softmax on the last and a middle axis, rms_norm,
layer_norm with and without bias, rope (rotate-half with [T,D] tables,
interleaved with [B,T,D] tables; the tables are arith.constant values, as
in exported models, so only x is differentiated),
attention (causal and not, GQA 4/2 heads, T != S, Dv != D, an explicit
scale), embedding (table gradient, repeated ids), cross_entropy (mean, sum,
none; ignored labels), reshape, broadcast, transpose, strided slice, concat
(an operand used twice), split, matmul (batched, broadcast batch, rank-2
rhs), linear (with bias on 3-D input, without), gather_elements,
scatter_elements (none, add), gather_nd (batch dims), scatter_nd, cumsum
(plain; exclusive and reverse), and one composite chain.

Prints one line per case and `summary: N/M op gradient cases match
torch.autograd`; exits 1 if any case fails. Everything is written under
--work.

  op_grads.py --bin build/bin --work build/test/op-grads [--keep] [-k softmax]
  op_grads.py --work /tmp/og --check-ir   # verify the IR, run torch only
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import zlib

RTOL, ATOL = 1e-4, 1e-5
AUTODIFF = "--tailor-autodiff=function=forward cotangents=true wrt-inputs=true"
LOWER = "--tailor-lower-to-sched=function=forward"

NP_DTYPE = {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32"}


def ty(shape, dt="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dt + ">"


class Arg:
    """A function argument: name, shape, dtype and how to fill it (normal,
    pos = uniform [0.5, 2], away = +-uniform [0.5, 2], or a callable
    rng, shape -> array). Float arguments get a gradient output."""

    def __init__(self, name, shape, dt="f32", gen="normal"):
        self.name, self.shape, self.dt, self.gen = name, tuple(shape), dt, gen

    @property
    def is_float(self):
        return self.dt in ("f32", "f64", "f16", "bf16")

    def value(self, rng):
        import numpy as np

        if callable(self.gen):
            a = self.gen(rng, self.shape)
        elif self.gen == "normal":
            a = rng.standard_normal(self.shape)
        elif self.gen == "pos":
            a = rng.uniform(0.5, 2.0, self.shape)
        elif self.gen == "away":
            a = rng.uniform(0.5, 2.0, self.shape) * rng.choice([-1.0, 1.0], self.shape)
        else:
            raise ValueError(self.gen)
        return np.asarray(a).astype(NP_DTYPE[self.dt])


def dense(a):
    """An MLIR dense literal holding exactly the f32 values of `a`."""
    import numpy as np

    a = np.asarray(a, dtype=np.float32)
    if a.ndim == 0:
        return repr(float(a))
    return "[" + ", ".join(dense(x) for x in a) + "]"


class Case:
    """A tg function: args, results [(name, shape, dtype)], body lines, the
    PyTorch reference (keyword arguments: args and consts), and consts:
    {name: f32 array} emitted as arith.constant (not differentiated)."""

    def __init__(self, name, args, results, body, ref, consts=None):
        self.name, self.args, self.results, self.body, self.ref = (
            name, args, results, body, ref)
        self.consts = consts or {}

    def mlir(self):
        params = ", ".join(f"%{a.name}: {ty(a.shape, a.dt)} {{tg.name = \"{a.name}\"}}"
                           for a in self.args)
        outs = ", ".join(f"{ty(s, d)} {{tg.name = \"{n}\"}}" for n, s, d in self.results)
        rets = ", ".join(f"%{n}" for n, _, _ in self.results)
        rtys = ", ".join(ty(s, d) for _, s, d in self.results)
        lines = [f"%{n} = arith.constant dense<{dense(v)}> : {ty(v.shape)}"
                 for n, v in self.consts.items()]
        lines += self.body.strip().splitlines()
        body = "\n".join("  " + line.strip() for line in lines)
        return (f"// Generated by test/e2e/op_grads.py: case {self.name}.\n"
                f"func.func @forward({params}) -> ({outs}) {{\n{body}\n"
                f"  return {rets} : {rtys}\n}}\n")


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def _rope_tables(interleaved, per_batch, batch, t, d):
    """HF-style (cos, sin) tables, [T, D] or [B, T, D]: each frequency
    repeated over both halves (rotate-half) or over both members of each
    pair (interleaved); per-batch tables start at different positions."""
    import numpy as np

    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    pos = np.arange(t)[None, :, None] + np.arange(batch if per_batch else 1)[:, None, None] * 3
    ang = pos * inv
    full = np.repeat(ang, 2, axis=-1) if interleaved else np.concatenate([ang, ang], -1)
    if not per_batch:
        full = full[0]
    return np.cos(full).astype(np.float32), np.sin(full).astype(np.float32)


def build_cases():
    import torch
    import torch.nn.functional as F

    cases = []

    def add(name, args, results, body, ref, consts=None):
        cases.append(Case(name, args, results, body, ref, consts))

    # Unary elementwise.
    unary = {
        "neg": (torch.neg, "normal"), "abs": (torch.abs, "normal"),
        "exp": (torch.exp, "normal"), "log": (torch.log, "pos"),
        "sqrt": (torch.sqrt, "pos"), "rsqrt": (torch.rsqrt, "pos"),
        "reciprocal": (torch.reciprocal, "away"), "tanh": (torch.tanh, "normal"),
        "sigmoid": (torch.sigmoid, "normal"), "silu": (F.silu, "normal"),
        "relu": (torch.relu, "normal"), "erf": (torch.erf, "normal"),
        "sin": (torch.sin, "normal"), "cos": (torch.cos, "normal"),
    }
    s = (3, 5)
    for op, (fn, gen) in unary.items():
        add(op, [Arg("x", s, gen=gen)], [("y", s, "f32")],
            f"%y = tg.{op} %x : {ty(s)}", lambda x, fn=fn: (fn(x),))
    add("gelu_none", [Arg("x", s)], [("y", s, "f32")],
        f"%y = tg.gelu %x : {ty(s)}", lambda x: (F.gelu(x),))
    add("gelu_tanh", [Arg("x", s)], [("y", s, "f32")],
        f"%y = tg.gelu %x {{approximation = #tg.gelu_approximation<tanh>}} : {ty(s)}",
        lambda x: (F.gelu(x, approximate="tanh"),))

    # Broadcasting binary ops.
    binary = {
        "add": (torch.add, "normal", "normal"), "sub": (torch.sub, "normal", "normal"),
        "mul": (torch.mul, "normal", "normal"), "div": (torch.div, "normal", "away"),
        "pow": (torch.pow, "pos", "normal"), "max": (torch.maximum, "normal", "normal"),
        "min": (torch.minimum, "normal", "normal"),
    }
    for op, (fn, ga, gb) in binary.items():
        for sa, sb in (((2, 3), (3,)), ((2, 1), (3,))):
            tag = "x".join(map(str, sa)) + "_" + "x".join(map(str, sb))
            add(f"{op}_{tag}", [Arg("a", sa, gen=ga), Arg("b", sb, gen=gb)],
                [("y", (2, 3), "f32")],
                f"%y = tg.{op} %a, %b : ({ty(sa)}, {ty(sb)}) -> {ty((2, 3))}",
                lambda a, b, fn=fn: (fn(a, b),))
    add("mul_same_operand", [Arg("x", (2, 3))], [("y", (2, 3), "f32")],
        f"%y = tg.mul %x, %x : ({ty((2, 3))}, {ty((2, 3))}) -> {ty((2, 3))}",
        lambda x: (x * x,))

    # select (the condition comes from a comparison; z gets a zero gradient)
    # and cast.
    add("select", [Arg("a", (2, 3)), Arg("b", (3,)), Arg("z", (2, 1))],
        [("y", (2, 3), "f32")],
        f"""%c = tg.gt %a, %z : ({ty((2, 3))}, {ty((2, 1))}) -> {ty((2, 3), 'i1')}
            %y = tg.select %c, %a, %b : ({ty((2, 3), 'i1')}, {ty((2, 3))}, {ty((3,))}) -> {ty((2, 3))}""",
        lambda a, b, z: (torch.where(a > z, a, b),))
    add("cast_f32_f64", [Arg("x", (2, 3))], [("y", (2, 3), "f64")],
        f"%y = tg.cast %x : {ty((2, 3))} -> {ty((2, 3), 'f64')}", lambda x: (x * 1.0,))

    # Reductions.
    x3 = (2, 3, 4)
    reduce_fn = {"reduce_sum": torch.sum, "reduce_mean": torch.mean,
                 "reduce_max": torch.amax}
    for op, axes, keep in (("reduce_sum", [1], False), ("reduce_sum", [1], True),
                           ("reduce_mean", [0, 2], False), ("reduce_mean", [2], True),
                           ("reduce_max", [2], False), ("reduce_max", [0, 2], True)):
        out = (tuple(1 if i in axes else d for i, d in enumerate(x3)) if keep else
               tuple(d for i, d in enumerate(x3) if i not in axes))
        attr = " keep_dims" if keep else ""
        add(f"{op}_axes{''.join(map(str, axes))}{'_keep' if keep else ''}",
            [Arg("x", x3)], [("y", out, "f32")],
            f"%y = tg.{op} %x axes = [{', '.join(map(str, axes))}]{attr} : "
            f"{ty(x3)} -> {ty(out)}",
            lambda x, fn=reduce_fn[op], axes=tuple(axes), keep=keep:
                (fn(x, dim=axes, keepdim=keep),))

    # softmax, normalizations.
    for axis in (2, 1):
        add(f"softmax_axis{axis}", [Arg("x", x3)], [("y", x3, "f32")],
            f"%y = tg.softmax %x axis = {axis} : {ty(x3)}",
            lambda x, axis=axis: (torch.softmax(x, axis),))
    xn = (2, 3, 8)
    add("rms_norm", [Arg("x", xn), Arg("w", (8,))], [("y", xn, "f32")],
        f"%y = tg.rms_norm %x, %w {{epsilon = 1.0e-5 : f64}} : ({ty(xn)}, {ty((8,))}) -> {ty(xn)}",
        lambda x, w: (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w,))
    add("layer_norm_bias", [Arg("x", xn), Arg("w", (8,)), Arg("b", (8,))],
        [("y", xn, "f32")],
        f"%y = tg.layer_norm %x, %w, %b : ({ty(xn)}, {ty((8,))}, {ty((8,))}) -> {ty(xn)}",
        lambda x, w, b: (F.layer_norm(x, (8,), w, b, 1e-5),))
    add("layer_norm_nobias", [Arg("x", xn), Arg("w", (8,))], [("y", xn, "f32")],
        f"%y = tg.layer_norm %x, %w : ({ty(xn)}, {ty((8,))}) -> {ty(xn)}",
        lambda x, w: (F.layer_norm(x, (8,), w, None, 1e-5),))

    # rope.
    Bq, H, Tq, D = 2, 2, 3, 8

    def rot_half(x):
        return torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)

    def rot_pairs(x):
        return torch.stack([-x[..., 1::2], x[..., 0::2]], -1).flatten(-2)

    xr = (Bq, H, Tq, D)
    # The cos/sin tables are constants, as in every exported model (tg.rope
    # has no gradient rule for them).
    for name, inter, per_batch in (("rope_half", False, False),
                                   ("rope_interleaved", True, True)):
        cos, sin = _rope_tables(inter, per_batch, Bq, Tq, D)
        attr = " {interleaved}" if inter else ""
        add(name, [Arg("x", xr)], [("y", xr, "f32")],
            f"%y = tg.rope %x, %cos, %sin{attr} : ({ty(xr)}, {ty(cos.shape)}, "
            f"{ty(sin.shape)}) -> {ty(xr)}",
            lambda x, cos, sin, inter=inter: (
                x * (cos if cos.dim() == 2 else cos[:, None]) +
                (rot_pairs(x) if inter else rot_half(x)) *
                (sin if sin.dim() == 2 else sin[:, None]),),
            consts={"cos": cos, "sin": sin})

    # attention: GQA 4/2 heads.
    def attention(q, k, v, causal, scale):
        rep = q.shape[1] // k.shape[1]
        k2, v2 = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        sc = (q @ k2.transpose(-1, -2)) * scale
        t, s_ = q.shape[2], k.shape[2]
        if causal:
            mask = torch.arange(s_)[None, :] > torch.arange(t)[:, None] + (s_ - t)
            sc = sc.masked_fill(mask, float("-inf"))
        return torch.softmax(sc, -1) @ v2

    for name, causal, t, s_, dv, scale in (("attention_causal", True, 3, 5, 6, None),
                                           ("attention_full", False, 3, 5, 6, None),
                                           ("attention_causal_square_scale", True, 4, 4, 8, 0.25)):
        qs, ks, vs, ys = (2, 4, t, 8), (2, 2, s_, 8), (2, 2, s_, dv), (2, 4, t, dv)
        attrs = []
        if causal:
            attrs.append("causal")
        if scale is not None:
            attrs.append(f"scale = {scale} : f64")
        attr = (" {" + ", ".join(attrs) + "}") if attrs else ""
        add(name, [Arg("q", qs), Arg("k", ks), Arg("v", vs)], [("y", ys, "f32")],
            f"%y = tg.attention %q, %k, %v{attr} : ({ty(qs)}, {ty(ks)}, {ty(vs)}) -> {ty(ys)}",
            lambda q, k, v, causal=causal, scale=scale: (
                attention(q, k, v, causal, scale if scale is not None else 1 / math.sqrt(8)),))

    # embedding (repeated ids accumulate into one row).
    ids = [[1, 3, 1], [7, 3, 9]]
    add("embedding", [Arg("table", (10, 4)),
                      Arg("ids", (2, 3), "i64", gen=lambda rng, shape: ids)],
        [("y", (2, 3, 4), "f32")],
        f"%y = tg.embedding %table, %ids : ({ty((10, 4))}, {ty((2, 3), 'i64')}) -> {ty((2, 3, 4))}",
        lambda table, ids: (table[ids],))

    # cross_entropy, with two ignored labels.
    labels = [1, -100, 4, 0, -100, 2]
    for red in ("mean", "sum", "none"):
        out = (6,) if red == "none" else ()
        attr = "" if red == "mean" else f" {{reduction = #tg.loss_reduction<{red}>}}"
        add(f"cross_entropy_{red}",
            [Arg("logits", (6, 5)), Arg("labels", (6,), "i64", gen=lambda rng, shape: labels)],
            [("loss", out, "f32")],
            f"%loss = tg.cross_entropy %logits, %labels{attr} : ({ty((6, 5))}, "
            f"{ty((6,), 'i64')}) -> {ty(out)}",
            lambda logits, labels, red=red: (
                F.cross_entropy(logits, labels, ignore_index=-100, reduction=red),))

    # Data movement.
    add("reshape", [Arg("x", x3)], [("y", (6, 4), "f32")],
        f"%y = tg.reshape %x : {ty(x3)} -> {ty((6, 4))}", lambda x: (x.reshape(6, 4),))
    add("broadcast", [Arg("x", (3, 1))], [("y", x3, "f32")],
        f"%y = tg.broadcast %x : {ty((3, 1))} -> {ty(x3)}", lambda x: (x.expand(2, 3, 4),))
    add("transpose", [Arg("x", x3)], [("y", (4, 2, 3), "f32")],
        f"%y = tg.transpose %x permutation = [2, 0, 1] : {ty(x3)} -> {ty((4, 2, 3))}",
        lambda x: (x.permute(2, 0, 1),))
    add("slice_strided", [Arg("x", (2, 6, 8))], [("y", (2, 3, 2), "f32")],
        f"%y = tg.slice %x starts = [0, 1, 0] ends = [2, 6, 8] steps = [1, 2, 4] : "
        f"{ty((2, 6, 8))} -> {ty((2, 3, 2))}",
        lambda x: (x[0:2, 1:6:2, 0:8:4],))
    add("concat_repeated", [Arg("a", (2, 3)), Arg("b", (2, 2))], [("y", (2, 8), "f32")],
        f"%y = tg.concat %a, %b, %a axis = 1 : ({ty((2, 3))}, {ty((2, 2))}, "
        f"{ty((2, 3))}) -> {ty((2, 8))}",
        lambda a, b: (torch.cat([a, b, a], 1),))
    add("split", [Arg("x", (2, 6))], [("y0", (2, 2), "f32"), ("y1", (2, 4), "f32")],
        f"%y0, %y1 = tg.split %x axis = 1 sizes = [2, 4] : ({ty((2, 6))}) -> "
        f"({ty((2, 2))}, {ty((2, 4))})",
        lambda x: tuple(torch.split(x, [2, 4], 1)))

    # matmul and linear.
    for name, sa, sb, sy in (("matmul_batched", (2, 3, 4), (2, 4, 5), (2, 3, 5)),
                             ("matmul_broadcast_batch", (2, 1, 3, 4), (3, 4, 5), (2, 3, 3, 5)),
                             ("matmul_rank2_rhs", (2, 3, 4), (4, 5), (2, 3, 5))):
        add(name, [Arg("a", sa), Arg("b", sb)], [("y", sy, "f32")],
            f"%y = tg.matmul %a, %b : ({ty(sa)}, {ty(sb)}) -> {ty(sy)}",
            lambda a, b: (a @ b,))
    add("linear_bias_3d", [Arg("x", (2, 3, 4)), Arg("w", (5, 4)), Arg("b", (5,))],
        [("y", (2, 3, 5), "f32")],
        f"%y = tg.linear %x, %w, %b : ({ty((2, 3, 4))}, {ty((5, 4))}, {ty((5,))}) -> {ty((2, 3, 5))}",
        lambda x, w, b: (F.linear(x, w, b),))
    add("linear_nobias", [Arg("x", (3, 4)), Arg("w", (5, 4))], [("y", (3, 5), "f32")],
        f"%y = tg.linear %x, %w : ({ty((3, 4))}, {ty((5, 4))}) -> {ty((3, 5))}",
        lambda x, w: (F.linear(x, w),))

    # Gathers, scatters and cumsum (repeated and negative indices).
    gidx = [[2, -1, 0, 2], [1, 1, -3, 0]]
    add("gather_elements", [Arg("x", (3, 4)),
                            Arg("i", (2, 4), "i64", gen=lambda rng, shape: gidx)],
        [("y", (2, 4), "f32")],
        f"%y = tg.gather_elements %x, %i axis = 0 : ({ty((3, 4))}, {ty((2, 4), 'i64')}) -> {ty((2, 4))}",
        lambda x, i: (torch.gather(x, 0, i % 3),))
    sidx = [[0, 2, 1, 0], [1, 0, 1, 2]]
    for red in ("none", "add"):
        attr = "" if red == "none" else " {reduction = #tg.scatter_reduction<add>}"
        add(f"scatter_elements_{red}",
            [Arg("x", (3, 4)), Arg("i", (2, 4), "i64", gen=lambda rng, shape: sidx),
             Arg("u", (2, 4))],
            [("y", (3, 4), "f32")],
            f"%y = tg.scatter_elements %x, %i, %u axis = 0{attr} : ({ty((3, 4))}, "
            f"{ty((2, 4), 'i64')}, {ty((2, 4))}) -> {ty((3, 4))}",
            lambda x, i, u, red=red: ((x.scatter(0, i, u) if red == "none"
                                       else x.scatter_add(0, i, u)),))
    nidx = [[[1], [4], [1]], [[0], [-1], [2]]]
    add("gather_nd_batch", [Arg("x", (2, 5, 3)),
                            Arg("i", (2, 3, 1), "i64", gen=lambda rng, shape: nidx)],
        [("y", (2, 3, 3), "f32")],
        f"%y = tg.gather_nd %x, %i {{batch_dims = 1 : i64}} : ({ty((2, 5, 3))}, "
        f"{ty((2, 3, 1), 'i64')}) -> {ty((2, 3, 3))}",
        lambda x, i: (torch.stack([x[b][i[b, :, 0] % 5] for b in range(2)]),))
    tidx = [[3, 1], [0, 0], [2, 2]]
    add("scatter_nd_none", [Arg("x", (4, 3, 2)),
                            Arg("i", (2, 2), "i64", gen=lambda rng, shape: tidx[::2]),
                            Arg("u", (2, 2))],
        [("y", (4, 3, 2), "f32")],
        f"%y = tg.scatter_nd %x, %i, %u : ({ty((4, 3, 2))}, {ty((2, 2), 'i64')}, "
        f"{ty((2, 2))}) -> {ty((4, 3, 2))}",
        lambda x, i, u: (x.index_put((i[:, 0], i[:, 1]), u),))
    for flags, (excl, rev) in {"": (0, 0), " exclusive reverse": (1, 1)}.items():
        def cumsum_ref(x, excl=excl, rev=rev):
            y = x.flip(1) if rev else x
            y = y.cumsum(1)
            if excl:
                y = y - (x.flip(1) if rev else x)
            return ((y.flip(1) if rev else y),)
        add("cumsum" + flags.replace(" ", "_"), [Arg("x", (2, 5, 3))],
            [("y", (2, 5, 3), "f32")],
            f"%y = tg.cumsum %x axis = 1{flags} : {ty((2, 5, 3))}", cumsum_ref)

    # A chain: the chain rule across ops, and a value with two uses.
    add("chain_linear_rmsnorm_silu_mean",
        [Arg("x", (2, 3, 4)), Arg("w", (5, 4)), Arg("g", (5,))],
        [("y", (2, 3), "f32"), ("h", (2, 3, 5), "f32")],
        f"""%h = tg.linear %x, %w : ({ty((2, 3, 4))}, {ty((5, 4))}) -> {ty((2, 3, 5))}
            %n = tg.rms_norm %h, %g : ({ty((2, 3, 5))}, {ty((5,))}) -> {ty((2, 3, 5))}
            %s = tg.silu %n : {ty((2, 3, 5))}
            %p = tg.mul %s, %h : ({ty((2, 3, 5))}, {ty((2, 3, 5))}) -> {ty((2, 3, 5))}
            %y = tg.reduce_mean %p axes = [2] : {ty((2, 3, 5))} -> {ty((2, 3))}""",
        lambda x, w, g: (lambda h: (
            (F.silu(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * g) * h).mean(-1),
            h))(F.linear(x, w)))
    return cases


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

def reference(case, feeds, cots):
    """Forward results and {arg: grad} in float64 via torch.autograd."""
    import torch

    tensors, floats = {}, []
    for a in case.args:
        v = torch.from_numpy(feeds[a.name].copy())
        if a.is_float:
            v = v.double().requires_grad_(True)
            floats.append(a)
        tensors[a.name] = v
    for n, v in case.consts.items():
        tensors[n] = torch.from_numpy(v.copy()).double()
    outs = case.ref(**tensors)
    grads = torch.autograd.grad(
        [o for o in outs], [tensors[a.name] for a in floats],
        grad_outputs=[torch.from_numpy(cots[n]).double() for n, _, _ in case.results],
        allow_unused=True)
    res = {n: o.detach().numpy() for (n, _, _), o in zip(case.results, outs)}
    gr = {}
    for a, g in zip(floats, grads):
        gr[a.name] = (g.detach().numpy() if g is not None
                      else torch.zeros_like(tensors[a.name]).detach().numpy())
    return res, gr


def run_tool(cmd, timeout=300):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out: {' '.join(cmd)}"
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).strip().splitlines() if ln.strip()]
        return False, (f"{os.path.basename(cmd[0])} exited {p.returncode}: " +
                       (" | ".join(lines[:3]) if lines else "(no message)"))[:500]
    return True, p.stdout


def plan_inputs(text):
    """Input names from `tailor-run --list`."""
    names, section = [], None
    for line in text.splitlines():
        if not line.startswith(" "):
            section = line.strip().rstrip(":")
            continue
        if section == "inputs" and ":" in line:
            names.append(line.strip().split(":")[0])
    return names


def compare(got, ref):
    """(ok, max abs err, worst |err| / (atol + rtol |ref|))."""
    import numpy as np

    got = np.asarray(got)
    if got.shape != ref.shape:
        return False, float("inf"), float("inf")
    g, r = got.astype(np.float64), ref.astype(np.float64)
    err = np.abs(g - r)
    if not np.all(np.isfinite(g)):
        return False, float("inf"), float("inf")
    ratio = float((err / (ATOL + RTOL * np.abs(r))).max()) if err.size else 0.0
    return ratio <= 1.0, float(err.max()) if err.size else 0.0, ratio


def run_case(case, args):
    """Returns (ok, line)."""
    import numpy as np

    work = os.path.join(args.work, case.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, "case.mlir")
    with open(src, "w") as f:
        f.write(case.mlir())
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    feeds = {a.name: a.value(rng) for a in case.args}
    cots = {n: rng.standard_normal(s).astype(NP_DTYPE[d]) for n, s, d in case.results}
    ref_out, ref_grad = reference(case, feeds, cots)

    opt = os.path.join(args.bin, "tailor-opt")
    if args.check_ir:
        ok, msg = run_tool([opt, src, "-o", os.path.join(work, "roundtrip.mlir")])
        if not ok:
            return False, msg
        low, msg = run_tool([opt, src, args.lower, "-o", os.path.join(work, "sched.mlir")])
        return True, ("IR verifies, forward lowers; torch reference ran" if low else
                      "IR verifies; torch reference ran; forward does not lower yet: "
                      + msg.split(": error: ")[-1].split(" | ")[0][:100])

    sched = os.path.join(work, "sched.mlir")
    plan = os.path.join(work, "case.tplan")
    passes = ([] if args.no_autodiff else [args.autodiff]) + [args.lower]
    ok, msg = run_tool([opt, src, *passes, "-o", sched])
    if not ok:
        return False, msg
    ok, msg = run_tool([os.path.join(args.bin, "tailor-translate"), "--mlir-to-tplan",
                        sched, "-o", plan])
    if not ok:
        return False, msg
    run = os.path.join(args.bin, "tailor-run")
    ok, listing = run_tool([run, plan, "--list"])
    if not ok:
        return False, listing
    known = dict(feeds)
    if not args.no_autodiff:
        known.update({f"grad.{n}": v for n, v in cots.items()})
    cmd = [run, plan, "--threads", str(args.threads), "--output-dir",
           os.path.join(work, "out")]
    for name in plan_inputs(listing):
        if name not in known:
            return False, f"the plan has an input '{name}' this test does not know"
        path = os.path.join(work, f"in.{name}.npy")
        np.save(path, known[name])
        cmd += ["--input", f"{name}={path}"]
    os.makedirs(os.path.join(work, "out"))
    ok, msg = run_tool(cmd)
    if not ok:
        return False, msg

    def load(name):
        path = os.path.join(work, "out", name.replace("/", "_") + ".npy")
        return np.load(path) if os.path.exists(path) else None

    problems, worst_err, worst_ratio, checked = [], 0.0, 0.0, 0
    expected = [(n, ref_out[n]) for n, _, _ in case.results]
    if not args.no_autodiff:
        expected += [(f"grad.{a.name}", ref_grad[a.name])
                     for a in case.args if a.is_float]
    for name, ref in expected:
        got = load(name)
        if got is None:
            problems.append(f"no output {name}")
            continue
        good, err, ratio = compare(got, ref)
        checked += 1
        worst_err, worst_ratio = max(worst_err, err), max(worst_ratio, ratio)
        if not good:
            shape = "" if np.shape(got) == ref.shape else \
                f" (shape {list(np.shape(got))}, expected {list(ref.shape)})"
            problems.append(f"{name} max abs err {err:.2e}{shape}")
    line = (f"{checked} tensors, max abs err {worst_err:.1e}, "
            f"worst err/(atol+rtol|ref|) {worst_ratio:.2f}")
    if problems:
        return False, line + "; " + "; ".join(problems)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return True, line


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=os.path.join("build", "bin"),
                    help="directory with tailor-opt, tailor-translate, tailor-run")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep passing cases' files")
    ap.add_argument("-k", dest="filter", help="run cases whose name contains this")
    ap.add_argument("--autodiff", default=AUTODIFF, help="the autodiff pass flag")
    ap.add_argument("--lower", default=LOWER, help="the lowering pass flag")
    ap.add_argument("--no-autodiff", action="store_true",
                    help="forward results only (no VJP): checks the harness")
    ap.add_argument("--check-ir", action="store_true",
                    help="only verify each case's IR with tailor-opt (and lower "
                         "its forward) and run the torch reference")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    cases = build_cases()
    if args.filter:
        cases = [c for c in cases if args.filter in c.name]
    os.makedirs(args.work, exist_ok=True)
    good = 0
    for case in cases:
        try:
            ok, line = run_case(case, args)
        except Exception as e:  # noqa: BLE001 - one broken case must not stop the rest
            ok, line = False, f"harness error: {type(e).__name__}: {e}"
        good += ok
        print(f"{'ok  ' if ok else 'FAIL'} {case.name:<34} {line}", flush=True)
    n = len(cases)
    what = ("op cases verify (IR only, torch references ran)" if args.check_ir else
            "op forward cases match torch" if args.no_autodiff else
            "op gradient cases match torch.autograd")
    print(f"summary: {good}/{n} {what} (rtol {RTOL:g}, atol {ATOL:g})")
    return 0 if good == n else 1


if __name__ == "__main__":
    sys.exit(main())
