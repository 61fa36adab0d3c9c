#!/usr/bin/env python3
"""nee side by side with ONNX Runtime on the same models, inputs and thread count.

Reports ratios (nee time / ORT time; below 1.0 means nee is faster), not
seconds: these machines are shared and noisy. Each measurement alternates the
two runtimes and takes the median of `--repeats` runs after a warm-up.

  PYTHONPATH=build/python .venv/bin/python bench/compare_ort.py [--threads 1] [--repeats 30] [MODEL.onnx ...]

Without model arguments it builds a small MLP and a small CNN with onnx.helper
and also uses the bundled digits model.
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
    return [mlp, cnn, os.path.join(ROOT, "examples", "models", "digits_logreg.onnx")]


def random_feed(sess):
    rng = np.random.default_rng(1)
    feed = {}
    for arg in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
        dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64}[arg.type]
        feed[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feed


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
        print(f"{'model':28} {'load ratio':>11} {'run ratio':>10}")
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
                s_ort.run(None, feed)
                s_nee.run(None, feed)
            t_ort, t_nee = [], []
            for _ in range(args.repeats):  # alternate so both see the same machine noise
                t_ort.append(median_time(lambda: s_ort.run(None, feed), 1))
                t_nee.append(median_time(lambda: s_nee.run(None, feed), 1))
            name = os.path.basename(path)[:28]
            print(f"{name:28} {load_nee / load_ort:11.2f} {statistics.median(t_nee) / statistics.median(t_ort):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
