"""Writes the small binary ONNX models the importer's error tests need.

usage: make_model.py CASE OUT.onnx

Cases that need external data also write their data file next to OUT (the
importer resolves `location` against the model's folder). The models are
built with onnx.helper and saved without running the checker: several are
malformed on purpose.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def model(nodes, inputs, outputs, initializers=(), opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(
        graph,
        ir_version=8,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
    )


def io(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def relu_model():
    """y = Relu(x) + w, with a float parameter so the file has some bulk."""
    w = helper.make_tensor(
        "w", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32).tolist()
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "w"], ["y"], name="add"),
    ]
    return model(nodes, [io("x", [2, 3])], [io("y", [2, 3])], [w])


def external_model(out, entries, data=None):
    """y = x + w where w ([2, 3] float, 24 bytes) lives in external data.

    `entries` are the external_data key/value pairs; `data`, if given, is
    written to data.bin next to the model."""
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([2, 3])
    w.data_location = TensorProto.EXTERNAL
    for key, value in entries:
        entry = w.external_data.add()
        entry.key = key
        entry.value = value
    if data is not None:
        with open(os.path.join(os.path.dirname(out), "data.bin"), "wb") as f:
            f.write(data)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [io("x", [2, 3])], [io("y", [2, 3])], [w])


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    weights = np.arange(6, dtype=np.float32).tobytes()  # 24 bytes
    if case == "valid":
        m = relu_model()
    elif case == "unsupported-op":
        m = model(
            [
                helper.make_node("Relu", ["x"], ["r"], name="relu"),
                helper.make_node("Frobnicate", ["r"], ["y"], name="mystery"),
            ],
            [io("x", [2])],
            [io("y", [2])],
        )
    elif case == "ext-outside":
        # 24 bytes wanted at offset 8 of a 24-byte file.
        m = external_model(
            out, [("location", "data.bin"), ("offset", "8"), ("length", "24")], weights
        )
    elif case == "ext-short-file":
        # The whole file is shorter than the tensor.
        m = external_model(out, [("location", "data.bin")], weights[:16])
    elif case == "ext-length":
        m = external_model(
            out, [("location", "data.bin"), ("length", "20")], weights
        )
    elif case == "ext-offset":
        m = external_model(
            out, [("location", "data.bin"), ("offset", "eight")], weights
        )
    elif case == "ext-absolute":
        m = external_model(out, [("location", "/etc/data.bin")])
    elif case == "ext-parent":
        m = external_model(out, [("location", "../data.bin")])
    elif case == "ext-no-location":
        m = external_model(out, [("offset", "0")])
    elif case == "ext-missing":
        m = external_model(
            out, [("location", "missing.bin"), ("offset", "0"), ("length", "24")]
        )
    else:
        sys.exit(f"make_model.py: unknown case '{case}'")
    onnx.save(m, out)


if __name__ == "__main__":
    main()
