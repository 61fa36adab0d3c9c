"""Expected outputs for tests/unit/opt/fuse_qdq_conv_test.cc, computed with ONNX Runtime (all graph
optimizations disabled, so it evaluates the QDQ graph as the spec states it: DequantizeLinear -> float op
-> QuantizeLinear) on the models the test builds. The values are chosen so that every float sum is exact
and no quotient lands on a rounding tie: the fused integer ops must then equal these bitwise.

Run: /work/main/.venv/bin/python tests/unit/opt/fuse_qdq_conv_expected.py
Data, as the C++ test's ConvCase(): xq[i] = (37 i + 11) % 256 (uint8 [1,2,3,3]), Wq[i] = (29 i) % 15 - 7
(int8 [2,2,3,3]), Bq = [-40, 24]; x scale 1/32 zero point 128, W scale 0.25, B scale 1/128."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

XQ = ((np.arange(18) * 37 + 11) % 256).astype(np.uint8).reshape(1, 2, 3, 3)
WQ = ((np.arange(36) * 29) % 15 - 7).astype(np.int8).reshape(2, 2, 3, 3)
BQ = np.array([-40, 24], np.int32)


def run(nodes, inits, feeds, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def conv_case(act, y_scale, y_zero_point, signed=False):
    """DQ(xq), DQ(Wq), DQ(Bq) -> Conv (3x3, pads 1) -> act ("", "relu" or (lo, hi) for Clip) -> Q -> yq."""
    inits = {"xs": np.float32(0.03125), "xz": np.uint8(128), "Wq": WQ, "ws": np.float32(0.25), "wz": np.int8(0),
             "Bq": BQ, "bs": np.float32(0.0078125), "bz": np.int32(0), "ys": np.float32(y_scale),
             "yz": (np.int8 if signed else np.uint8)(y_zero_point)}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
             helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["W"]),
             helper.make_node("DequantizeLinear", ["Bq", "bs", "bz"], ["B"]),
             helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["a"]))
    elif act:
        inits["lo"], inits["hi"] = np.float32(act[0]), np.float32(act[1])
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["a"]))
    nodes.append(helper.make_node("QuantizeLinear", ["a" if act else "c", "ys", "yz"], ["yq"]))
    return run(nodes, inits, {"xq": XQ}, [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 2, 3, 3])],
               [helper.make_tensor_value_info("yq", TensorProto.INT8 if signed else TensorProto.UINT8, None)])


def add_clip_case():
    """DQ(aq) + DQ(bq) -> Clip(0, 6) -> Q(6/256, 0) -> yq, aq = xq, bq[i] = (53 i + 7) % 256, both scale 1/32 zp 128."""
    inits = {"s": np.float32(0.03125), "z": np.uint8(128), "lo": np.float32(0), "hi": np.float32(6),
             "ys": np.float32(0.0234375), "yz": np.uint8(0)}
    nodes = [helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["a"]),
             helper.make_node("DequantizeLinear", ["bq", "s", "z"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"])]
    t = TensorProto.UINT8
    return run(nodes, inits, {"aq": XQ.ravel(), "bq": ((np.arange(18) * 53 + 7) % 256).astype(np.uint8)},
               [helper.make_tensor_value_info("aq", t, [18]), helper.make_tensor_value_info("bq", t, [18])],
               [helper.make_tensor_value_info("yq", t, None)])


def show(name, arr):
    print(f"// {name}")
    print("{" + ", ".join(str(int(v)) for v in arr.ravel()) + "}")


show("conv_q (no activation, scale 1/16, zero point 128)", conv_case("", 0.0625, 128))
show("conv_relu (scale 1/16, zero point 0)", conv_case("relu", 0.0625, 0))
show("conv_relu_zp10 (scale 1/16, zero point 10)", conv_case("relu", 0.0625, 10))
show("conv_relu_int8 (scale 1/16, zero point -128, int8)", conv_case("relu", 0.0625, -128, signed=True))
show("conv_relu6 (Clip(0, 6), scale 6/256, zero point 0)", conv_case((0, 6), 0.0234375, 0))
show("conv_relu6_narrow (Clip(0, 6), scale 1/32, zero point 0)", conv_case((0, 6), 0.03125, 0))
show("conv_clip_sym (Clip(-4, 4), scale 1/32, zero point 128)", conv_case((-4, 4), 0.03125, 128))
show("add_clip", add_clip_case())
