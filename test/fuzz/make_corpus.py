#!/usr/bin/env python3
"""Writes the seed corpus of the ONNX importer fuzzer (test/fuzz/corpus).

Small valid models that reach the interesting importer paths: broadcasting
arithmetic, shape arithmetic that folds, reshapes and slices, a causal
attention block with a rotary-style rotate-half, norms, and an initializer
that lives in external data. Rerun after changing the list:
    .venv/bin/python test/fuzz/make_corpus.py
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, parser

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

TEXT_MODELS = {
    "add": """<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a, float[3] b) => (float[2,3] c) { c = Add(a, b) }""",
    "shape_arith": """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,8] x) => (float[batch,seq,2,4] y) {
  s = Shape(x)
  i0 = Constant<value = int64[1] {0}>()
  i1 = Constant<value = int64[1] {1}>()
  b = Gather<axis = 0>(s, i0)
  t = Gather<axis = 0>(s, i1)
  h = Constant<value = int64[2] {2, 4}>()
  shape = Concat<axis = 0>(b, t, h)
  y = Reshape(x, shape)
}""",
    "attention": """<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4,8] q, float[1,2,4,8] k, float[1,2,4,8] v) => (float[1,2,4,8] o) {
  kt = Transpose<perm = [0, 1, 3, 2]>(k)
  s = MatMul(q, kt)
  c = Constant<value = float {0.35355}>()
  sc = Mul(s, c)
  one = Constant<value = float[4,4] {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1}>()
  tri = Trilu<upper = 1>(one, kone)
  kone = Constant<value = int64 {1}>()
  zero = Constant<value = float {0}>()
  ninf = Constant<value = float {-10000}>()
  isz = Equal(tri, zero)
  mask = Where(isz, zero, ninf)
  m = Add(sc, mask)
  p = Softmax<axis = -1>(m)
  o = MatMul(p, v)
}""",
    "rotate_half": """<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,8] x, float[1,1,4,8] cos, float[1,1,4,8] sin) => (float[1,2,4,8] y) {
  st = Constant<value = int64[1] {4}>()
  en = Constant<value = int64[1] {8}>()
  z = Constant<value = int64[1] {0}>()
  ax = Constant<value = int64[1] {3}>()
  hi = Slice(x, st, en, ax)
  lo = Slice(x, z, st, ax)
  nh = Neg(hi)
  r = Concat<axis = -1>(nh, lo)
  a = Mul(x, cos)
  b = Mul(r, sin)
  y = Add(a, b)
}""",
    "norms": """<ir_version: 8, opset_import: ["" : 18]>
g (float[2,4,8] x) => (float[2,4,8] y) {
  two = Constant<value = float {2}>()
  sq = Pow(x, two)
  axes = Constant<value = int64[1] {-1}>()
  m = ReduceMean<keepdims = 1>(sq, axes)
  eps = Constant<value = float {0.00001}>()
  me = Add(m, eps)
  r = Sqrt(me)
  y = Div(x, r)
}""",
    "split_squeeze": """<ir_version: 8, opset_import: ["" : 13]>
g (float[2,6] x) => (float[2,3] a, float[3] b) {
  sizes = Constant<value = int64[2] {3, 3}>()
  a, c = Split<axis = 1>(x, sizes)
  i = Constant<value = int64 {1}>()
  b = Gather<axis = 0>(c, i)
}""",
}


def external_model():
    """An embedding whose table is external data (the file does not exist)."""
    table = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", "seq", 8])
    weight = TensorProto()
    weight.name = "model.embed_tokens.weight"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend([16, 8])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "512")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    node = helper.make_node("Gather", ["model.embed_tokens.weight", "ids"], ["h"],
                            name="/model/embed_tokens/Gather")
    graph = helper.make_graph([node], "g", [table], [out], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def linear_model():
    """A linear layer with an inline [out, in] weight, reached via Transpose."""
    w = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(4, 8),
                                "model.layers.0.mlp.up_proj.weight")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    nodes = [helper.make_node("Transpose", [w.name], ["wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wt"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, text in TEXT_MODELS.items():
        onnx.save(parser.parse_model(text), os.path.join(OUT, name + ".onnx"))
    onnx.save(external_model(), os.path.join(OUT, "external.onnx"))
    onnx.save(linear_model(), os.path.join(OUT, "linear.onnx"))
    print(f"wrote {len(TEXT_MODELS) + 2} seeds to {OUT}")


if __name__ == "__main__":
    main()
