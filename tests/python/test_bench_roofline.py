"""bench/roofline.py's multiply-add count on small graphs whose counts follow from the ops' definitions."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import roofline  # noqa: E402


def save(tmp_path, nodes, inputs, outputs, inits, opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return path


def test_float_conv_matmul_and_lstm(tmp_path):
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    b = numpy_helper.from_array(np.zeros((50, 7), np.float32), "b")
    wl = numpy_helper.from_array(np.zeros((1, 4 * 6, 5), np.float32), "wl")
    rl = numpy_helper.from_array(np.zeros((1, 4 * 6, 6), np.float32), "rl")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),  # 1x8x5x5
             helper.make_node("Reshape", ["c", "shape"], ["r"]),  # 4 x 50
             helper.make_node("MatMul", ["r", "b"], ["y"]),
             helper.make_node("LSTM", ["s", "wl", "rl"], ["h"], hidden_size=6)]
    shape = numpy_helper.from_array(np.array([4, 50], np.int64), "shape")
    path = save(tmp_path, nodes,
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10]),
                 helper.make_tensor_value_info("s", TensorProto.FLOAT, [9, 2, 5])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                 helper.make_tensor_value_info("h", TensorProto.FLOAT, None)], [w, b, wl, rl, shape])
    conv = (1 * 8 * 5 * 5) * (3 * 3 * 3)
    matmul = (4 * 7) * 50
    lstm = 9 * 2 * 1 * (4 * 6) * (5 + 6)  # steps x batch x directions x gate rows x (input + hidden)
    assert roofline.count_macs(path) == (conv + matmul + lstm, 0)


def test_qdq_and_qlinear_convs_count_as_8bit(tmp_path):
    wq = numpy_helper.from_array(np.zeros((4, 2, 1, 1), np.int8), "wq")
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "scale")
    zp8 = numpy_helper.from_array(np.array(0, np.int8), "zp8")
    zpu = numpy_helper.from_array(np.array(0, np.uint8), "zpu")
    nodes = [helper.make_node("DequantizeLinear", ["wq", "scale", "zp8"], ["wf"]),
             helper.make_node("Conv", ["x", "wf"], ["c"]),  # QDQ: 1x4x6x6, 2 MACs each
             helper.make_node("QuantizeLinear", ["c", "scale", "zpu"], ["q"]),
             # com.microsoft op ONNX's inference does not know, feeding a QLinearConv after it
             helper.make_node("QLinearLeakyRelu", ["q", "scale", "zpu", "scale", "zpu"], ["l"], domain="com.microsoft"),
             helper.make_node("QLinearConv", ["l", "scale", "zpu", "wq2", "scale", "zp8", "scale", "zpu"], ["y"],
                              kernel_shape=[3, 3])]  # 1x3x4x4, 4 x 3 x 3 MACs each
    wq2 = numpy_helper.from_array(np.zeros((3, 4, 3, 3), np.int8), "wq2")
    path = save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], [wq, scale, zp8, zpu, wq2],
                opsets=(("", 17), ("com.microsoft", 1)))
    assert roofline.count_macs(path) == (0, 4 * 36 * 2 + 3 * 16 * 36)
