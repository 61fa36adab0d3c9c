#!/usr/bin/env python3
"""Prints the expected values used by tensor_scatter_test.cc, computed with
onnx.reference (TensorScatter, opset 24). Inputs are np.arange patterns so the
test can rebuild them: past_cache = arange(n) and update = 100 + arange(m).

  /work/main/.venv/bin/python tests/unit/ops/tensor_scatter_expected_gen.py
"""
import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator


def run(past, update, write_indices=None, **attrs):
    names = ["past", "update"] + (["write_indices"] if write_indices is not None else [])
    node = helper.make_node("TensorScatter", names, ["out"], **attrs)
    feed = {"past": past, "update": update}
    if write_indices is not None:
        feed["write_indices"] = np.array(write_indices, dtype=np.int64)
    return ReferenceEvaluator(node).run(None, feed)[0]


def case(name, cache_dims, update_dims, write_indices=None, dtype=np.float32, **attrs):
    past = np.arange(np.prod(cache_dims)).astype(dtype).reshape(cache_dims)
    update = (100 + np.arange(np.prod(update_dims))).astype(dtype).reshape(update_dims)
    out = run(past, update, write_indices, **attrs)
    print(f"// {name}: {attrs} write_indices={write_indices}")
    print("{" + ", ".join(str(int(x)) for x in out.reshape(-1)) + "}")


case("Linear4D", [2, 2, 4, 3], [2, 2, 2, 3], [1, 2])
case("CircularWraps", [2, 1, 4, 2], [2, 1, 3, 2], [3, -2], mode="circular")
case("NoWriteIndices", [2, 3, 2], [2, 1, 2])
case("LastAxis", [2, 2, 5], [2, 2, 2], [3, 0], axis=-1)
case("Axis1Of4D", [2, 3, 2, 2], [2, 2, 2, 2], [1, 0], axis=1, dtype=np.int32)

# Strings, rank 2 (axis -1): past = [["a","b","c"],["d","e","f"]], update = [["X"],["Y"]].
past = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
update = np.array([["X"], ["Y"]], dtype=object)
print("// StringsCircular: {'mode': 'circular', 'axis': -1} write_indices=[2, 5]")
print(run(past, update, [2, 5], mode="circular", axis=-1).reshape(-1).tolist())

# Extreme write indices in circular mode (max_sequence_length 4, where int64
# wrap-around and the true modulo agree).
big = np.iinfo(np.int64)
case("CircularHugeIndicesWrap", [2, 4, 1], [2, 2, 1], [int(big.min), int(big.max)], mode="circular")
