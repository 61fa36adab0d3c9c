#!/usr/bin/env python3
"""Prints the expected DynamicQuantizeLSTM values of rnn_contrib_test.cc: ONNX Runtime's own kernel (which defines
the op: X and h are quantized on the fly), and onnx.reference's float LSTM on the dequantized weights, to show how
far that is (venv python)."""
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as T, numpy_helper as nh
from onnx.reference import ReferenceEvaluator
rng = np.random.default_rng(7)
X = np.round(rng.standard_normal((2, 1, 3)), 2).astype(np.float32)
Wq = rng.integers(-100, 100, (1, 3, 8)).astype(np.int8)
Rq = rng.integers(-100, 100, (1, 2, 8)).astype(np.int8)
B = np.round(rng.standard_normal((1, 16)) * 0.1, 2).astype(np.float32)
ws, wz = np.array([0.01], np.float32), np.array([0], np.int8)
rs, rz = np.array([0.02, 0.01, 0.015, 0.02, 0.01, 0.01, 0.02, 0.03], np.float32).reshape(1, 8), np.zeros((1, 8), np.int8)
print("X", X.ravel().tolist()); print("Wq", Wq.ravel().tolist()); print("Rq", Rq.ravel().tolist()); print("B", B.ravel().tolist())
inits = [nh.from_array(v, n) for v, n in [(Wq, "W"), (Rq, "R"), (B, "B"), (ws, "ws"), (wz, "wz"), (rs, "rs"), (rz, "rz")]]
node = h.make_node("DynamicQuantizeLSTM", ["X", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"], ["Y", "Yh", "Yc"], domain="com.microsoft", hidden_size=2)
g = h.make_graph([node], "g", [h.make_tensor_value_info("X", T.FLOAT, [2, 1, 3])], [h.make_tensor_value_info(n, T.FLOAT, None) for n in ["Y", "Yh", "Yc"]], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]); m.ir_version = 8
o = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": X})
# float LSTM: dequantize, transpose to ONNX layout, onnx.reference LSTM
Wf = ((Wq.astype(np.float32) - wz.astype(np.float32)) * ws).transpose(0, 2, 1)
Rf = ((Rq.astype(np.float32) - rz.astype(np.float32).reshape(1, 1, 8)) * rs.reshape(1, 1, 8)).transpose(0, 2, 1)
node2 = h.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Yh", "Yc"], hidden_size=2)
g2 = h.make_graph([node2], "g", [h.make_tensor_value_info("X", T.FLOAT, [2, 1, 3])], [h.make_tensor_value_info(n, T.FLOAT, None) for n in ["Y", "Yh", "Yc"]],
                  [nh.from_array(np.ascontiguousarray(Wf).astype(np.float32), "W"), nh.from_array(np.ascontiguousarray(Rf).astype(np.float32), "R"), nh.from_array(B, "B")])
m2 = h.make_model(g2, opset_imports=[h.make_opsetid("", 13)])
r = ReferenceEvaluator(m2).run(None, {"X": X})
for a, b, n in zip(o, r, ["Y", "Yh", "Yc"]):
    print(n, "ort", np.round(a.ravel(), 7).tolist(), "float lstm", np.round(b.ravel(), 7).tolist(), "diff", np.abs(a - b).max())
