"""make_tiny_lm.py: a two-op "language model" in binary ONNX for runtime tests.

    make_tiny_lm.py OUT.onnx                 writes the model
    make_tiny_lm.py OUT.onnx --check OUT.txt checks examples/embed's checksum
    make_tiny_lm.py OUT.onnx --fixed 1,32    fixes input_ids' shape (not batch, seq)

logits = Gather(table, input_ids) @ head, with table [100, 8] and head [8, 100]
stored inline as raw_data (so the plan binds them from the model file at their
byte offsets). The check recomputes the forward pass in NumPy on the token
pattern examples/embed/embed.c feeds, and compares the checksum it printed.
"""

import argparse
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weights():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((100, 8)).astype(np.float32)
    head = rng.standard_normal((8, 100)).astype(np.float32)
    return table, head


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--check", metavar="EMBED_OUTPUT")
    parser.add_argument("--fixed", metavar="BATCH,SEQ",
                        help="export with a fixed input shape")
    args = parser.parse_args()
    table, head = weights()
    if args.check:
        batch, seq = 2, 5
        # examples/embed/embed.c's token pattern (ids below 97).
        ids = np.array([(i * 7 + i // 3 + 1) % 97 for i in range(batch * seq)])
        ids = ids.reshape(batch, seq)
        if ids.max() >= 100:
            sys.exit(f"the embed pattern uses ids up to {ids.max()}, above the vocabulary")
        logits = table[ids] @ head
        text = open(args.check).read()
        got = float(re.search(r"checksum \(sum of \d+ values\) = (\S+)", text).group(1))
        want = float(logits.astype(np.float64).sum())
        print(f"checksum: tailor {got:.6f}, NumPy {want:.6f}")
        if abs(got - want) > 1e-4 * max(1.0, abs(want)):
            sys.exit("checksum mismatch")
        return
    dims = [int(d) for d in args.fixed.split(",")] if args.fixed else ["batch", "seq"]
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["h"], axis=0),
            helper.make_node("MatMul", ["h", "head"], ["logits"]),
        ],
        "tiny_lm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, dims + [100])],
        initializer=[numpy_helper.from_array(table, "table"),
                     numpy_helper.from_array(head, "head")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
