#!/usr/bin/env python3
"""One MatMul by a constant [K, N] weight, float32 vs int4 (com.microsoft MatMulNBits as
`nee quantize --mode int4` writes it), in nee and ONNX Runtime, alternating in one process.

  PYTHONPATH=build/python .venv/bin/python bench/int4_matmul.py --m 1 --k 768 --n 3072 --threads 1

Prints the median time per run of each (runtime, model) pair and the weight bytes of each model.
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import nee


def float_model(path, k, n):
    w = (np.random.default_rng(0).standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
                              [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=3072)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    f32, q4 = os.path.join(tmp, "f32.onnx"), os.path.join(tmp, "int4.onnx")
    float_model(f32, args.k, args.n)
    nee.quantize(f32, q4, mode="int4", block_size=args.block_size)
    x = {"x": np.random.default_rng(1).standard_normal((args.m, args.k)).astype(np.float32)}
    so_nee = nee.SessionOptions()
    so_nee.intra_op_num_threads = args.threads
    so_ort = ort.SessionOptions()
    so_ort.intra_op_num_threads = args.threads
    so_ort.log_severity_level = 4
    sessions = {}
    for label, path in (("fp32", f32), ("int4", q4)):
        sessions["nee " + label] = nee.InferenceSession(path, so_nee)
        sessions["ort " + label] = ort.InferenceSession(path, so_ort, providers=["CPUExecutionProvider"])
    times = {name: [] for name in sessions}
    for s in sessions.values():
        for _ in range(5):
            s.run(None, x)
    for _ in range(args.runs):
        for name, s in sessions.items():
            t0 = time.perf_counter()
            s.run(None, x)
            times[name].append(time.perf_counter() - t0)
    sizes = {label: sum(numpy_helper.to_array(t).nbytes for t in onnx.load(p).graph.initializer)
             for label, p in (("fp32", f32), ("int4", q4))}
    print(f"M={args.m} K={args.k} N={args.n} block={args.block_size} threads={args.threads}; "
          f"weights fp32 {sizes['fp32']} B, int4 {sizes['int4']} B")
    for name, t in times.items():
        print(f"  {name:9s} {statistics.median(t) * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
