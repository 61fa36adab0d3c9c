#!/usr/bin/env python3
"""Prints onnxruntime's outputs for the com.microsoft QOperator ops in quantize_contrib_test.cc (venv python)."""
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as T, numpy_helper as nh
def run(op, inputs, attrs={}, out_type=T.UINT8):
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    inits = [nh.from_array(v, f"i{k}") for k, v in enumerate(inputs) if v is not None]
    node = h.make_node(op, names, ["y"], domain="com.microsoft", **attrs)
    g = h.make_graph([node], "g", [], [h.make_tensor_value_info("y", out_type, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]); m.ir_version = 8
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {})[0]
f = lambda v: np.array(v, np.float32)
u8 = lambda v: np.array(v, np.uint8)
i8 = lambda v: np.array(v, np.int8)
A = u8([[0, 50, 100], [150, 200, 255]]); B = u8([10, 128, 250])
print("add", run("QLinearAdd", [A, f(0.1), u8(128), B, f(0.05), u8(100), f(0.2), u8(120)]).ravel().tolist())
print("mul", run("QLinearMul", [A, f(0.1), u8(128), B, f(0.05), u8(100), f(0.2), u8(120)]).ravel().tolist())
print("concat", run("QLinearConcat", [f(0.1), u8(5), u8([[10, 200]]), f(0.2), u8(3), u8([[0, 100, 255]]), f(0.05), u8(128)], dict(axis=1)).ravel().tolist())
X = u8(np.arange(8).reshape(1, 2, 2, 2) * 30 + 7)
print("gap", run("QLinearGlobalAveragePool", [X, f(0.1), u8(10), f(0.05), u8(20)], dict(channels_last=0)).ravel().tolist())
Xl = u8(np.arange(12).reshape(1, 2, 2, 3) * 20 + 3)
print("gap_cl", run("QLinearGlobalAveragePool", [Xl, f(0.1), u8(10), f(0.05), u8(20)], dict(channels_last=1)).ravel().tolist())
Aq = u8([[10, 200, 130], [0, 255, 90]]); Bq = i8([[1, -5], [100, 7], [-128, 33]]); C = np.array([1000, -2000], np.int32)
print("qgemm", run("QGemm", [Aq, f(0.02), u8(128), Bq, f(0.01), i8(0), C, f(0.05), u8(100)], dict(alpha=1.0)).ravel().tolist())
Bt = np.ascontiguousarray(Bq.T)
print("qgemm_tb_perchannel_float", run("QGemm", [Aq, f(0.02), u8(128), Bt, f([0.01, 0.03]), i8([0, 2]), None], dict(alpha=0.5, transB=1), T.FLOAT).ravel().tolist())
Xs = i8([-128, -60, -1, 0, 1, 50, 127])
print("sigmoid", run("QLinearSigmoid", [Xs, f(0.05), i8(0), f(1 / 256), i8(-128)], {}, T.INT8).ravel().tolist())
print("leaky", run("QLinearLeakyRelu", [Xs, f(0.05), i8(3), f(0.04), i8(-2)], dict(alpha=0.1), T.INT8).ravel().tolist())
xp = u8(np.arange(16).reshape(1, 1, 4, 4) * 15 + 2)
for include in (0, 1):
    print("avgpool include_pad", include, run("QLinearAveragePool", [xp, f(0.1), u8(10), f(0.05), u8(20)],
          dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=include)).ravel().tolist())
print("softmax", run("QLinearSoftmax", [u8([[10, 200, 130, 0, 255, 90]]), f(0.05), u8(128), f(1 / 256), u8(0)],
      dict(axis=-1, opset=13)).ravel().tolist())
