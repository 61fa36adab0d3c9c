#!/usr/bin/env python3
"""Quantizes the exported PyTorch CNN with ONNX Runtime's quantization tool.

Two formats: QDQ (QuantizeLinear/DequantizeLinear pairs around float ops) and
QOperator (QLinearConv, QLinearMatMul, ...). The expected outputs are ONNX
Runtime's outputs for the quantized model.

  .venv/bin/python tests/models/quantized/make_quantized.py
"""
import os

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "torch", "cnn_opset13", "model.onnx")


class Calibration(CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.batches = iter([{"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.batches, None)


def main():
    x = np.load(os.path.join(HERE, "..", "torch", "cnn_opset13", "input_0.npy"))
    for name, fmt in (("cnn_qdq", QuantFormat.QDQ), ("cnn_qoperator", QuantFormat.QOperator)):
        folder = os.path.join(HERE, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        # QOperator quantizes only Conv: the other ops would become com.microsoft
        # contrib ops (QGemm, QLinearAdd...), which are not part of the ONNX standard.
        op_types = None if fmt == QuantFormat.QDQ else ["Conv"]
        quantize_static(SOURCE, path, Calibration(), quant_format=fmt, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=(fmt == QuantFormat.QDQ),
                        op_types_to_quantize=op_types)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (y,) = sess.run(None, {"image": x})
        np.save(os.path.join(folder, "input_0.npy"), x)
        np.save(os.path.join(folder, "expected_0.npy"), y)
        ops = sorted({n.op_type for n in __import__("onnx").load(path).graph.node})
        print(name, os.path.getsize(path), "bytes; ops:", ", ".join(ops))


if __name__ == "__main__":
    main()
