#!/usr/bin/env python3
"""ONNX Runtime's side of the SGEMM microbenchmark (bench/gemm_bench.cc): the same MatMul shapes as a
one-node model whose B is an initializer (so ORT's MLAS packs it once, as nee's "prepacked" rows do),
timed per call in the same way: median and best GFLOP/s over about --seconds of calls, after warm-up.

  .venv/bin/python bench/gemm_ort.py --threads 1 2 [--seconds 0.4] [--only SUBSTRING] [--peak GFLOPS]

--peak (nee_gemm_bench prints it: the measured fp32 FMA peak of one core) adds a %-of-peak column
(of peak x threads). Only the MatMul shapes (activations x weights) are here: the ResNet rows of
gemm_bench are convolutions, whose B (the im2col matrix) changes every call.
"""
import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = [
    ("square 256", 256, 256, 256), ("square 512", 512, 512, 512), ("square 1024", 1024, 1024, 1024),
    ("square 2048", 2048, 2048, 2048), ("bert qkv/out 128x768x768", 128, 768, 768),
    ("bert ffn1 128x3072x768", 128, 3072, 768), ("bert ffn2 128x768x3072", 128, 768, 3072),
    ("bert 1 token 1x768x768", 1, 768, 768), ("bert 8 tokens 8x3072x768", 8, 3072, 768),
]


def matmul_model(m, n, k):
    b = np.random.default_rng(0).uniform(-1, 1, (k, n)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])],
                              [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def time_shape(m, n, k, threads, seconds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(matmul_model(m, n, k), so, providers=["CPUExecutionProvider"])
    feed = {"a": np.random.default_rng(1).uniform(-1, 1, (m, k)).astype(np.float32)}
    for _ in range(3):
        sess.run(None, feed)
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 5:
        t = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t)
    flops = 2.0 * m * n * k
    return flops / np.median(times) / 1e9, flops / min(times) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--only", default="")
    ap.add_argument("--peak", type=float, default=0.0, help="one core's fp32 FMA peak, GFLOP/s")
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}; GFLOP/s as median / best per call (wall clock)\n")
    print(f"{'shape (m x n x k)':28s} {'threads':>7s} {'GFLOP/s':>17s} {'%peak':>7s}")
    for name, m, n, k in SHAPES:
        if args.only not in name:
            continue
        for threads in args.threads:
            median, best = time_shape(m, n, k, threads, args.seconds)
            share = f"{100 * median / (args.peak * threads):6.0f}%" if args.peak else ""
            print(f"{name:28s} {threads:7d} {median:8.1f} / {best:6.1f} {share:>7s}")


if __name__ == "__main__":
    main()
