#!/usr/bin/env python3
"""nee on float16 / bfloat16 models next to float32 and ONNX Runtime, alternating in one process.

  PYTHONPATH=build/python .venv/bin/python bench/narrow_float_compare.py resnet50_b1 --runs 10 --slow-runs 3

For a zoo model (bench/zoo.py's cache, $NEE_ZOO_DIR or ~/.cache/nee-zoo: MODEL.onnx and its inputs
MODEL.npz), writes MODEL_fp16.onnx (`nee.quantize(mode="fp16")`) and MODEL_bf16.onnx (converted to opset
22 first, where Conv and the pools allow bfloat16) into --work, then times at 1 thread, every session in
this process, one run each per round: nee fp32 / fp16 / bf16 (all optimizations: the widen-narrow-float
pass), ONNX Runtime fp32 / fp16, and nee fp16 at optimization level 1 (no widening: the reference kernels,
as before the pass; --slow-runs rounds only). ONNX Runtime 1.32 has no bfloat16 CPU kernels, so it does not
run the bf16 model. Prints medians and each output's max |difference| / max |fp32 output|.
"""
import argparse
import os
import statistics
import time

import numpy as np
import onnxruntime as ort

import nee


def nee_session(path, level=99):
    so = nee.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = level
    return nee.InferenceSession(path, so)


def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="zoo model name, e.g. resnet50_b1 or bert_base")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--slow-runs", type=int, default=3, help="rounds that include the level-1 (reference) session")
    ap.add_argument("--zoo-dir", default=os.environ.get("NEE_ZOO_DIR", os.path.expanduser("~/.cache/nee-zoo")))
    ap.add_argument("--work", default="/tmp/nee-narrow-float")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    src = os.path.join(args.zoo_dir, args.model + ".onnx")
    data = np.load(os.path.join(args.zoo_dir, args.model + ".npz"))
    feed = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    fp16 = os.path.join(args.work, args.model + "_fp16.onnx")
    bf16 = os.path.join(args.work, args.model + "_bf16.onnx")
    opset22 = os.path.join(args.work, args.model + "_opset22.onnx")
    if not os.path.exists(fp16):
        nee.quantize(src, fp16, mode="fp16")
    if not os.path.exists(bf16):
        nee.convert_opset(src, opset22, 22)
        nee.quantize(opset22, bf16, mode="bf16")

    sessions = {"nee fp32": nee_session(src), "nee fp16": nee_session(fp16), "nee bf16": nee_session(bf16),
                "ORT fp32": ort_session(src), "ORT fp16": ort_session(fp16),
                "nee fp16, level 1 (before)": nee_session(fp16, 1)}
    outputs = {k: s.run(None, feed) for k, s in sessions.items()}  # warm-up: packs weights
    times = {k: [] for k in sessions}
    for r in range(args.runs):
        for k, s in sessions.items():
            if k.endswith("(before)") and r >= args.slow_runs:
                continue
            t = time.perf_counter()
            s.run(None, feed)
            times[k].append((time.perf_counter() - t) * 1e3)
    ref = outputs["nee fp32"]
    for k in sessions:
        err = max(float(np.abs(o - r).max() / np.abs(r).max()) for o, r in zip(outputs[k], ref))
        print(f"{args.model:12s} {k:28s} median {statistics.median(times[k]):8.1f} ms  (n={len(times[k])})"
              f"  max err vs nee fp32 {err:.1e}")


if __name__ == "__main__":
    main()
