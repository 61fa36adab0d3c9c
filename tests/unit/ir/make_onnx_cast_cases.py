#!/usr/bin/env python3
"""Extracts ONNX's own Cast / CastLike / BitCast node tests (shipped in the onnx package)
into tests/unit/ir/data/onnx_cast_cases.txt for tests/unit/ops/cast_test.cc,
so they run without the conformance harness or a model reader.

    /work/main/.venv/bin/python tests/unit/ir/make_onnx_cast_cases.py

Format, one item per line:
    case <test name> <op type> <opset>
    attr <name> int <value> | attr <name> string <value>
    input <elem type> <dims, comma separated or '-' for a scalar> <raw bytes in hex>
    output <elem type> <dims> <hex>
    end
The bytes are TensorProto.raw_data (little-endian, sub-byte types packed).
"""
import os
import warnings

import onnx
import onnx.backend.test.loader as loader
from onnx import numpy_helper

warnings.simplefilter("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "onnx_cast_cases.txt")


def as_proto(t):
    return t if isinstance(t, onnx.TensorProto) else numpy_helper.from_array(t)


def raw_bytes(t):
    if t.HasField("raw_data"):
        return t.raw_data
    return numpy_helper.from_array(numpy_helper.to_array(t)).raw_data


def tensor_line(kind, t):
    t = as_proto(t)
    dims = ",".join(str(d) for d in t.dims) or "-"
    return f"{kind} {t.data_type} {dims} {raw_bytes(t).hex() or '-'}"


def main():
    lines = []
    count = 0
    for case in loader.load_model_tests(kind="node"):
        if not case.name.startswith(("test_cast_", "test_castlike_", "test_bitcast_")):
            continue
        if case.name.endswith("_expanded"):
            continue  # the function-body expansion, not the op itself
        model = case.model
        node = model.graph.node[0]
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        lines.append(f"case {case.name} {node.op_type} {opset}")
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT:
                lines.append(f"attr {a.name} int {a.i}")
            elif a.type == onnx.AttributeProto.STRING:
                lines.append(f"attr {a.name} string {a.s.decode()}")
        inputs, outputs = case.data_sets[0]
        for t in inputs:
            lines.append(tensor_line("input", t))
        for t in outputs:
            lines.append(tensor_line("output", t))
        lines.append("end")
        count += 1
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{count} cases written to {OUT}")


if __name__ == "__main__":
    main()
