#!/usr/bin/env python3
"""Single-op timings: nee against ONNX Runtime on one-node models.

For each case (an op on the shapes BERT-base, GPT-2, MobileNetV2 and ResNet-50
give it) builds a one-node model with onnx.helper, then times nee and ORT
alternately with the same thread count and prints the medians and their ratio
(nee / ORT; below 1.0 means nee is faster). Machines here are shared and noisy:
compare ratios, not seconds.

  PYTHONPATH=build/python .venv/bin/python bench/op_bench.py [--threads 1,2] [--repeats 15] [--filter Add]

To see what the optimized kernels bring, run it once more against a build
without them (e.g. PYTHONPATH=/work/main/build/python) and divide the ratios.
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

BERT = [1, 128, 768]
ATTN = [1, 12, 128, 128]
MOBILE = [1, 96, 112, 112]
RESNET = [1, 256, 56, 56]


def case(name, op, inputs, consts=(), attrs=None, domain="", opset=17, outputs=1):
    """inputs: [(name, shape)] fed at run time; consts: [(name, shape or array)] as initializers."""
    return dict(name=name, op=op, inputs=inputs, consts=consts, attrs=attrs or {}, domain=domain, opset=opset,
                outputs=outputs)


def cases():
    return [
        case("Add bert equal", "Add", [("a", BERT), ("b", BERT)]),
        case("Add bert bias[768]", "Add", [("a", BERT)], [("b", [768])]),
        case("Mul bert scalar", "Mul", [("a", BERT)], [("b", [])]),
        case("Div attn scalar", "Div", [("a", ATTN)], [("b", [])]),
        case("Add attn mask[1,1,1,128]", "Add", [("a", ATTN), ("b", [1, 1, 1, 128])]),
        case("Sub bert-pow-mean", "Sub", [("a", BERT), ("b", [1, 128, 1])]),
        case("Add resnet equal", "Add", [("a", RESNET), ("b", RESNET)]),
        case("Mul mobile [C,1,1]", "Mul", [("a", MOBILE)], [("b", [96, 1, 1])]),
        case("LayerNorm bert", "LayerNormalization", [("x", BERT)], [("g", [768]), ("b", [768])], {"axis": -1}),
        case("SkipLayerNorm bert", "SkipLayerNormalization", [("x", BERT), ("s", BERT)],
             [("g", [768]), ("b", [768]), ("bias", [768])], domain="com.microsoft"),
        case("Relu resnet", "Relu", [("x", RESNET)]),
        case("Clip(0,6) mobile", "Clip", [("x", MOBILE)],
             [("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))]),
        case("LeakyRelu resnet", "LeakyRelu", [("x", RESNET)], attrs={"alpha": 0.1}),
        case("HardSigmoid mobile", "HardSigmoid", [("x", MOBILE)]),
        case("HardSwish mobile", "HardSwish", [("x", MOBILE)]),
        case("Erf bert x4", "Erf", [("x", [1, 128, 3072])]),
        case("Gelu(none) bert x4", "Gelu", [("x", [1, 128, 3072])], opset=20),
        case("Gelu(tanh) bert x4", "Gelu", [("x", [1, 128, 3072])], attrs={"approximate": "tanh"}, opset=20),
        case("ms Gelu bert x4", "Gelu", [("x", [1, 128, 3072])], domain="com.microsoft"),
        case("BiasGelu bert x4", "BiasGelu", [("x", [1, 128, 3072])], [("b", [3072])], domain="com.microsoft"),
        case("FastGelu bert x4", "FastGelu", [("x", [1, 128, 3072])], [("b", [3072])], domain="com.microsoft"),
        case("Sqrt bert", "Sqrt", [("x", BERT)]),
        case("Neg bert", "Neg", [("x", BERT)]),
        case("Reciprocal bert", "Reciprocal", [("x", BERT)]),
        case("Transpose BSHD->BHSD", "Transpose", [("x", [1, 128, 12, 64])], attrs={"perm": [0, 2, 1, 3]}),
        case("Transpose last two", "Transpose", [("x", [1, 12, 128, 64])], attrs={"perm": [0, 1, 3, 2]}),
        case("Transpose BHSD->BSHD", "Transpose", [("x", [1, 12, 128, 64])], attrs={"perm": [0, 2, 1, 3]}),
        # Convolutions of ResNet-50 and MobileNetV2 (weights and bias constant, as exported).
        conv_case("Conv resnet 3x3 64@56", 64, 64, 56, 3),
        conv_case("Conv resnet 3x3 128@28", 128, 128, 28, 3),
        conv_case("Conv resnet 3x3 128@56 s2", 128, 128, 56, 3, stride=2),
        conv_case("Conv resnet 3x3 512@7", 512, 512, 7, 3),
        conv_case("Conv resnet 1x1 256->64@56", 256, 64, 56, 1),
        conv_case("Conv resnet 1x1 1024->2048@14 s2", 1024, 2048, 14, 1, stride=2),
        conv_case("Conv resnet 7x7 stem", 3, 64, 224, 7, stride=2),
        conv_case("Conv mobile 1x1 16->96@112", 16, 96, 112, 1),
        conv_case("Conv mobile 1x1 144->24@56", 144, 24, 56, 1),
        conv_case("Conv mobile dw 3x3 144@56", 144, 144, 56, 3, group=144),
        conv_case("Conv mobile dw 3x3 96@112 s2", 96, 96, 112, 3, stride=2, group=96),
        conv_case("Conv mobile dw 3x3 960@7", 960, 960, 7, 3, group=960),
    ]


def conv_case(name, cin, cout, size, kernel, stride=1, group=1):
    """A Conv as the models have it: NCHW input, constant weights and bias, 'same' padding."""
    pad = kernel // 2
    return case(name, "Conv", [("x", [1, cin, size, size])], [("w", [cout, cin // group, kernel, kernel]), ("b", [cout])],
                {"kernel_shape": [kernel, kernel], "strides": [stride, stride], "pads": [pad] * 4, "group": group})


def build(c, folder, rng):
    feeds, inits, graph_inputs = {}, [], []
    for name, shape in c["inputs"]:
        feeds[name] = rng.standard_normal(shape).astype(np.float32)
        graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    for name, shape in c["consts"]:
        value = shape if isinstance(shape, np.ndarray) else rng.standard_normal(shape).astype(np.float32)
        if c["op"] == "Div":
            value = value + np.float32(3)  # keep away from zero
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
    names = [n for n, _ in c["inputs"]] + [n for n, _ in c["consts"]]
    if c["op"] == "Sqrt":
        feeds["x"] = np.abs(feeds["x"])
    node = helper.make_node(c["op"], names, ["y"], domain=c["domain"], **c["attrs"])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "op", graph_inputs, [out], inits)
    opsets = [helper.make_opsetid("", c["opset"])]
    if c["domain"]:
        opsets.append(helper.make_opsetid(c["domain"], 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = os.path.join(folder, c["name"].replace(" ", "_").replace("/", "_") + ".onnx")
    onnx.save(model, path)
    return path, feeds


def timed(fn, inner):
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def compare(path, feeds, threads, repeats):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    no = nee.SessionOptions()
    no.intra_op_num_threads = threads
    s_ort = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s_nee = nee.InferenceSession(path, no)
    run_ort = lambda: s_ort.run(None, feeds)  # noqa: E731
    run_nee = lambda: s_nee.run(None, feeds)  # noqa: E731
    y_ort, y_nee = run_ort()[0], run_nee()[0]
    diff = float(np.nanmax(np.abs(y_ort - y_nee) / (np.abs(y_ort) + 1e-3))) if y_ort.size else 0.0
    inner = max(1, int(2e-3 / max(timed(run_nee, 3), timed(run_ort, 3), 1e-6)))  # samples of ~2 ms
    t_nee, t_ort = [], []
    for _ in range(repeats):
        t_nee.append(timed(run_nee, inner))
        t_ort.append(timed(run_ort, inner))
    return statistics.median(t_nee), statistics.median(t_ort), diff


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'case':30s} {'thr':>3s} {'nee us':>9s} {'ORT us':>9s} {'nee/ORT':>8s} {'maxreldiff':>10s}")
    with tempfile.TemporaryDirectory() as folder:
        for c in cases():
            if args.filter not in c["name"]:
                continue
            path, feeds = build(c, folder, rng)
            for threads in [int(t) for t in args.threads.split(",")]:
                t_nee, t_ort, diff = compare(path, feeds, threads, args.repeats)
                print(f"{c['name']:30s} {threads:3d} {t_nee * 1e6:9.1f} {t_ort * 1e6:9.1f} {t_nee / t_ort:8.2f} "
                      f"{diff:10.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
