"""Expected outputs for tests/unit/opt/fusion_test.cc, computed with ONNX Runtime
(all graph optimizations disabled) on the same models and inputs the test builds.

Run: /work/main/.venv/bin/python tests/unit/opt/fusion_expected_gen.py
Values follow the C++ test's Seq(n, mul, mod, offset, div): ((i*mul) % mod - offset) / div."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def seq(shape, mul, mod, off, div):
    n = int(np.prod(shape))
    return ((np.arange(n) * mul % mod - off) / div).astype(np.float32).reshape(shape)


def run(nodes, inputs, outputs, inits, feeds, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def show(name, arr):
    print(f"// {name}: shape {list(arr.shape)}")
    text = [f"{v:.7g}" for v in arr.ravel()]
    print("{" + ", ".join(t + ("" if any(c in t for c in ".en") else ".0") + "f" for t in text) + "}")


f = TensorProto.FLOAT
# Conv (1x2x3x3 input, 3 filters 2x2, bias) -> BatchNormalization.
x = seq([1, 2, 3, 3], 7, 11, 5, 4)
inits = {"W": seq([3, 2, 2, 2], 5, 9, 4, 8), "B": seq([3], 1, 3, 1, 2),
         "scale": np.array([1.5, -0.5, 2.0], np.float32), "shift": np.array([0.1, 0.2, -0.3], np.float32),
         "mean": np.array([0.05, -0.1, 0.2], np.float32), "var": np.array([0.5, 1.5, 0.25], np.float32)}
show("conv_bn", run([helper.make_node("Conv", ["x", "W", "B"], ["c"]),
                     helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=1e-3)],
                    [helper.make_tensor_value_info("x", f, [1, 2, 3, 3])],
                    [helper.make_tensor_value_info("y", f, None)], inits, {"x": x}))

# ConvTranspose (group 2; 1x4x2x2 input, W [4, 1, 2, 2] -> 2 output channels), no bias -> BatchNormalization.
xt = seq([1, 4, 2, 2], 3, 7, 3, 2)
inits_t = {"W": seq([4, 1, 2, 2], 5, 9, 4, 8), "scale": np.array([1.5, -0.5], np.float32),
           "shift": np.array([0.1, 0.2], np.float32), "mean": np.array([0.05, -0.1], np.float32),
           "var": np.array([0.5, 1.5], np.float32)}
show("convtranspose_bn", run([helper.make_node("ConvTranspose", ["x", "W"], ["c"], group=2),
                              helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"])],
                             [helper.make_tensor_value_info("x", f, [1, 4, 2, 2])],
                             [helper.make_tensor_value_info("y", f, None)], inits_t, {"x": xt}))

# Conv (no bias) -> Mul([3,1,1]) -> Add([1,3,1,1]).
inits_a = {"W": seq([3, 2, 2, 2], 5, 9, 4, 8), "s": np.array([2.0, -1.0, 0.5], np.float32).reshape(3, 1, 1),
           "b": np.array([0.25, 0.5, -1.0], np.float32).reshape(1, 3, 1, 1)}
show("conv_mul_add", run([helper.make_node("Conv", ["x", "W"], ["c"]), helper.make_node("Mul", ["c", "s"], ["m"]),
                          helper.make_node("Add", ["b", "m"], ["y"])],
                         [helper.make_tensor_value_info("x", f, [1, 2, 3, 3])],
                         [helper.make_tensor_value_info("y", f, None)], inits_a, {"x": x}))

# MatMul(A [2,3], B [3,4]) + bias [4].
a = seq([2, 3], 7, 11, 5, 4)
inits_m = {"B": seq([3, 4], 5, 9, 4, 8), "bias": np.array([0.5, -0.25, 1.0, 0.0], np.float32)}
show("matmul_add", run([helper.make_node("MatMul", ["a", "B"], ["p"]), helper.make_node("Add", ["p", "bias"], ["y"])],
                       [helper.make_tensor_value_info("a", f, ["batch", 3])],
                       [helper.make_tensor_value_info("y", f, None)], inits_m, {"a": a}))

# Gemm(Transpose(at [3,2]), Transpose(bt [4,3]), bias [4]) with at, bt graph inputs.
at = seq([3, 2], 7, 11, 5, 4)
bt = seq([4, 3], 5, 9, 4, 8)
show("gemm_transposes", run([helper.make_node("Transpose", ["at"], ["ta"], perm=[1, 0]),
                             helper.make_node("Transpose", ["bt"], ["tb"]),
                             helper.make_node("Gemm", ["ta", "tb", "bias"], ["y"], alpha=0.5)],
                            [helper.make_tensor_value_info("at", f, [3, 2]), helper.make_tensor_value_info("bt", f, [4, 3])],
                            [helper.make_tensor_value_info("y", f, None)], {"bias": inits_m["bias"]}, {"at": at, "bt": bt}))
