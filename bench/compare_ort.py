#!/usr/bin/env python3
"""nee side by side with ONNX Runtime on the same models, inputs and thread count.

Reports ratios (nee time / ORT time; below 1.0 means nee is faster), not
seconds: these machines are shared and noisy. Each measurement alternates the
two runtimes and takes the median of `--repeats` runs after a warm-up.

  PYTHONPATH=build/python .venv/bin/python bench/compare_ort.py [--threads 1] [--repeats 30] [MODEL.onnx ...]

Without model arguments it builds a small MLP, a small CNN, a MobileNet-like
block (depthwise + pointwise convs) and a ResNet-like block (3x3 convs and a
residual add) with onnx.helper, and also uses the bundled digits model.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import nee

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def builtin_models(folder):
    rng = np.random.default_rng(0)

    def save(name, nodes, inputs, outputs, inits):
        graph = helper.make_graph(nodes, name, inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = os.path.join(folder, name + ".onnx")
        onnx.save(model, path)
        return path

    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    mlp = save("mlp_256x512x10", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 10])],
        [numpy_helper.from_array(f(256, 512), "w1"), numpy_helper.from_array(f(512), "b1"),
         numpy_helper.from_array(f(512, 10), "w2"), numpy_helper.from_array(f(10), "b2")])
    cnn = save("cnn_3x32x32", [
        helper.make_node("Conv", ["x", "k1", "c1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("MaxPool", ["b"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "k2", "c2"], ["d"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["d"], ["e"]),
        helper.make_node("GlobalAveragePool", ["e"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32, 1, 1])],
        [numpy_helper.from_array(f(16, 3, 3, 3), "k1"), numpy_helper.from_array(f(16), "c1"),
         numpy_helper.from_array(f(32, 16, 3, 3), "k2"), numpy_helper.from_array(f(32), "c2")])
    # MobileNet-like: depthwise 3x3 + pointwise 1x1, twice (the second depthwise strided).
    mobile = save("mobilenet_block_32x56x56", [
        helper.make_node("Conv", ["x", "dw1", "db1"], ["a"], group=32, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Conv", ["b", "pw1", "pb1"], ["c"]), helper.make_node("Relu", ["c"], ["d"]),
        helper.make_node("Conv", ["d", "dw2", "db2"], ["e"], group=64, pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["e"], ["f"]),
        helper.make_node("Conv", ["f", "pw2", "pb2"], ["g"]), helper.make_node("Relu", ["g"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 28, 28])],
        [numpy_helper.from_array(f(32, 1, 3, 3), "dw1"), numpy_helper.from_array(f(32), "db1"),
         numpy_helper.from_array(f(64, 32, 1, 1), "pw1"), numpy_helper.from_array(f(64), "pb1"),
         numpy_helper.from_array(f(64, 1, 3, 3), "dw2"), numpy_helper.from_array(f(64), "db2"),
         numpy_helper.from_array(f(128, 64, 1, 1), "pw2"), numpy_helper.from_array(f(128), "pb2")])
    # ResNet-like basic block: two 3x3 convs and the residual add.
    resnet = save("resnet_block_64x28x28", [
        helper.make_node("Conv", ["x", "k1", "c1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Conv", ["b", "k2", "c2"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["d"]), helper.make_node("Relu", ["d"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 28, 28])],
        [numpy_helper.from_array(f(64, 64, 3, 3) * 0.05, "k1"), numpy_helper.from_array(f(64), "c1"),
         numpy_helper.from_array(f(64, 64, 3, 3) * 0.05, "k2"), numpy_helper.from_array(f(64), "c2")])
    return [mlp, cnn, mobile, resnet, os.path.join(ROOT, "examples", "models", "digits_logreg.onnx")]


def random_feed(sess):
    rng = np.random.default_rng(1)
    feed = {}
    for arg in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
        dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64}[arg.type]
        feed[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feed


def max_relative_difference(expected, actual):
    """Largest |expected - actual| over the float outputs, relative to each output's scale (a sanity check)."""
    worst = 0.0
    for e, a in zip(expected, actual):
        e, a = np.asarray(e), np.asarray(a)
        if e.dtype.kind != "f" or e.size == 0:
            continue
        diff = np.max(np.abs(e.astype(np.float64) - a.astype(np.float64)))
        worst = max(worst, float(diff) / (1.0 + float(np.max(np.abs(e)))))
    return worst


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = args.models or builtin_models(tmp)
        print(f"threads={args.threads}, median of {args.repeats} runs, ratio = nee / onnxruntime "
              f"(onnxruntime {ort.__version__})")
        print(f"{'model':28} {'load ratio':>11} {'run ratio':>10} {'max rel diff':>13}")
        for path in models:
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            no = nee.SessionOptions()
            no.intra_op_num_threads = args.threads
            load_ort = median_time(lambda: ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), 5)
            load_nee = median_time(lambda: nee.InferenceSession(path, no), 5)
            s_ort = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            s_nee = nee.InferenceSession(path, no)
            feed = random_feed(s_ort)
            for _ in range(3):
                out_ort = s_ort.run(None, feed)
                out_nee = s_nee.run(None, feed)
            max_diff = max_relative_difference(out_ort, out_nee)
            t_ort, t_nee = [], []
            for _ in range(args.repeats):  # alternate so both see the same machine noise
                t_ort.append(median_time(lambda: s_ort.run(None, feed), 1))
                t_nee.append(median_time(lambda: s_nee.run(None, feed), 1))
            name = os.path.basename(path)[:28]
            print(f"{name:28} {load_nee / load_ort:11.2f} {statistics.median(t_nee) / statistics.median(t_ort):10.2f} "
                  f"{max_diff:13.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
