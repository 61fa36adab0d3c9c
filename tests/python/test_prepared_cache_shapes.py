"""One session fed more input shapes than a node's prepared-state cache holds (16 entries).

A kernel keeps its packed weights (built once, after which the session drops the constant input it packed)
beside one plan per input shape; new shapes must evict old plans, never the weights. QLinearConv read through
a null pointer from the seventeenth shape on when the weights were evicted first. Expected values: ONNX
Runtime on the same model and inputs.
"""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import nee


def qlinear_conv_model(path):
    rng = np.random.default_rng(0)
    consts = {"W": rng.integers(-50, 50, (8, 4, 3, 3)).astype(np.int8), "xs": np.array(0.02, np.float32),
              "xz": np.array(128, np.uint8), "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
              "ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "W", "ws", "wz", "ys", "yz"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, "h", "w"])],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def conv_relu_model(path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((16, 4, 3, 3)) * 0.2).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, "h", "w"])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def run_many_shapes(path, make_input, tolerance):
    sess = nee.InferenceSession(str(path))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    for i in range(24):  # 24 distinct shapes, then the first ones again
        shape = (1, 4, 5 + i % 20, 6 + i % 20 + i // 20)
        x = make_input(rng, shape)
        got, want = sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
        assert got.shape == want.shape
        assert np.abs(got.astype(np.float64) - want.astype(np.float64)).max() <= tolerance, shape


def test_qlinear_conv_survives_more_shapes_than_its_cache_holds(tmp_path):
    # One quantization step: nee requantizes exactly, ORT in float32 (a tie may round differently).
    run_many_shapes(qlinear_conv_model(tmp_path / "qconv.onnx"),
                    lambda rng, shape: rng.integers(0, 256, shape).astype(np.uint8), 1)


def test_conv_survives_more_shapes_than_its_cache_holds(tmp_path):
    run_many_shapes(conv_relu_model(tmp_path / "conv.onnx"),
                    lambda rng, shape: rng.standard_normal(shape).astype(np.float32), 1e-4)
