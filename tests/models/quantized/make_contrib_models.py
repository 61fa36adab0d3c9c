#!/usr/bin/env python3
"""Small models with ONNX Runtime's com.microsoft quantized ops, as onnxruntime.quantization writes them.

  tiny_qoperator_contrib: a tiny CNN (residual add, concat, LeakyReLU, x * sigmoid(x), global average pool,
      linear) exported by PyTorch, then quantize_static in QOperator format: QLinearAdd, QLinearConcat,
      QLinearLeakyRelu, QLinearSigmoid, QLinearMul, QLinearGlobalAveragePool, QGemm.
  lstm_dynamic_quantize: an LSTM exported by PyTorch, then quantize_dynamic: DynamicQuantizeLSTM.
Both references are onnxruntime's outputs. Run in two steps (torch lives in Debian's python3, onnxruntime in
the venv):
    /usr/bin/python3 tests/models/quantized/make_contrib_models.py export
    /work/main/.venv/bin/python tests/models/quantized/make_contrib_models.py quantize
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
QOP = os.path.join(HERE, "tiny_qoperator_contrib")
LSTM = os.path.join(HERE, "lstm_dynamic_quantize")


def export():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)

    class TinyQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.b1 = nn.Conv2d(8, 4, 1)
            self.b2 = nn.Conv2d(8, 4, 3, padding=1)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            y = F.relu(self.c1(x))
            y = y + self.c2(y)
            y = torch.cat([self.b1(y), F.leaky_relu(self.b2(y), 0.1)], 1)
            y = y * torch.sigmoid(y)
            return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))

    class Lstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 12, batch_first=True)
            self.lin = nn.Linear(12, 3)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.lin(y[:, -1, :])

    for folder, model, x in ((QOP, TinyQ(), torch.randn(2, 3, 8, 8)), (LSTM, Lstm(), torch.randn(3, 7, 8))):
        os.makedirs(folder, exist_ok=True)
        torch.onnx.export(model.eval(), (x,), os.path.join(folder, "float.onnx"), opset_version=13,
                          input_names=["in0"], output_names=["out0"])
        np.save(os.path.join(folder, "input_0.npy"), x.numpy())


def quantize():
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, shape):
            rng = np.random.default_rng(0)
            self.it = iter([{"in0": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    x = np.load(os.path.join(QOP, "input_0.npy"))
    quantize_static(os.path.join(QOP, "float.onnx"), os.path.join(QOP, "model.onnx"), Reader(x.shape),
                    quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    quantize_dynamic(os.path.join(LSTM, "float.onnx"), os.path.join(LSTM, "model.onnx"), weight_type=QuantType.QInt8)
    for folder in (QOP, LSTM):
        x = np.load(os.path.join(folder, "input_0.npy"))
        sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
        np.save(os.path.join(folder, "expected_0.npy"), sess.run(None, {"in0": x})[0])
        os.remove(os.path.join(folder, "float.onnx"))


if __name__ == "__main__":
    export() if sys.argv[1:] == ["export"] else quantize()
