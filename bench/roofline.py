#!/usr/bin/env python3
"""How close each runtime runs a zoo model to this machine's multiply-add peak, from a bench/compare.py run.

  PYTHONPATH=build/python .venv/bin/python bench/roofline.py bench-out/results.json [more results.json ...]

For every model in the results, counts the multiply-adds of its convolutions and matrix products (from the
ONNX graph with inferred shapes; the other ops, e.g. Softmax or LayerNormalization, count nothing), split
into float and 8-bit ones (QLinearConv, ConvInteger, MatMulInteger, QLinearMatMul, QGemm,
MatMulIntegerToFloat, and a Conv, MatMul or Gemm whose weights come through a DequantizeLinear of 8-bit
values). The floor is the time those multiply-adds take at the peak of every thread's core:

  floor = float MACs / (fp32 FMA peak / 2) / T + int8 MACs / int8 peak / T

with the peaks measured by build/bin/nee_gemm_bench (fp32: 12 zmm or ymm FMA chains; int8: 12 zmm
vpdpbusd chains, AVX-512 VNNI only; without VNNI the int8 MACs are counted at the fp32 rate, which makes
the floor optimistic) or given with --fp32-peak / --int8-peak. Reported per model and thread count: the
MACs, the floor, each runtime's median and its share of the peak (floor / median), and floor / ORT's
median, the lowest nee/ORT ratio nee could reach were it to run at the peak while ORT stays as measured.
A target ratio below that bound cannot be met by faster kernels alone: only by doing fewer
multiply-adds (e.g. Winograd for 3x3 convolutions, which is why a share can exceed 100%).
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

EIGHT_BIT = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
# Ops whose weights are 8-bit by definition, and the input index of their weights (or of B).
INTEGER_OPS = {"QLinearConv": 3, "ConvInteger": 1, "MatMulInteger": 1, "QLinearMatMul": 3, "QGemm": 3,
               "MatMulIntegerToFloat": 1}


def measure_peaks(gemm_bench):
    """(fp32 GFLOP/s, int8 GMAC/s or None) per core, from nee_gemm_bench's header."""
    out = subprocess.run([gemm_bench, "--threads", "1", "--seconds", "0.01", "--only", "(no shape)"],
                         capture_output=True, text=True, check=True).stdout
    fp32 = re.search(r"fp32 FMA peak per core: ([\d.]+) GFLOP/s", out)
    int8 = re.search(r"int8 peak per core: ([\d.]+) GMAC/s", out)
    if not fp32 or float(fp32.group(1)) <= 0:
        sys.exit(f"{gemm_bench} reported no fp32 peak:\n{out}")
    return float(fp32.group(1)), float(int8.group(1)) if int8 else None


def conv_output_shape(n, x, w):
    """A 2-D or 1-D convolution's output dims from its input and weight dims and attributes (explicit pads)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    spatial = len(x) - 2
    strides = attrs.get("strides", [1] * spatial)
    dilations = attrs.get("dilations", [1] * spatial)
    pads = attrs.get("pads", [0] * 2 * spatial)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    out = [x[0], w[0]]
    for i in range(spatial):
        if auto_pad in (b"SAME_UPPER", b"SAME_LOWER"):
            out.append(-(-x[2 + i] // strides[i]))
        else:
            span = dilations[i] * (w[2 + i] - 1) + 1
            out.append((x[2 + i] + pads[i] + pads[i + spatial] - span) // strides[i] + 1)
    return out


# com.microsoft ops that ONNX shape inference does not know, with their output shape rule.
def contrib_output_shape(n, shape):
    if n.op_type in ("QLinearConv", "FusedConv", "ConvInteger"):
        x, w = shape(n.input[0]), shape(n.input[3 if n.op_type == "QLinearConv" else 1])
        return conv_output_shape(n, x, w) if x and w else None
    if n.op_type in ("QLinearAdd", "QLinearMul", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearSoftmax"):
        return shape(n.input[0])
    if n.op_type == "QLinearGlobalAveragePool":
        x = shape(n.input[0])
        return x[:2] + [1] * (len(x) - 2) if x else None
    return None


class Shapes:
    """Static shapes and constant dtypes of one model's tensors."""

    def __init__(self, model):
        # ONNX's shape inference stops at ops it does not know (com.microsoft's quantized ops): their output
        # shapes are added by the rules above and inference runs again, until nothing new is learned.
        model = onnx.ModelProto.FromString(model.SerializeToString())
        for _ in range(64):
            inferred = shape_inference.infer_shapes(model, data_prop=True)
            self._collect(inferred.graph)
            added = 0
            for n in inferred.graph.node:
                if n.output and n.output[0] and self.shape(n.output[0]) is None:
                    dims = contrib_output_shape(n, self.shape)
                    if dims:
                        elem = self.dtype.get(n.output[0]) or self.dtype.get(n.input[0], onnx.TensorProto.UINT8)
                        model.graph.value_info.append(onnx.helper.make_tensor_value_info(n.output[0], elem, dims))
                        self.dims[n.output[0]] = dims  # for the contrib ops after it in this pass
                        added += 1
            if not added:
                break

    def _collect(self, g):
        self.dims, self.dtype = {}, {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            self.dtype[vi.name] = t.elem_type
            if t.HasField("shape"):
                self.dims[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        self.initializers = {i.name: i for i in g.initializer}
        for name, init in self.initializers.items():
            self.dims[name] = list(init.dims)
            self.dtype[name] = init.data_type
        self.producer = {o: n for n in g.node for o in n.output}
        self.nodes = list(g.node)

    def shape(self, name):
        d = self.dims.get(name)
        return None if d is None or any(v is None for v in d) else d

    def weight_is_8bit(self, name):
        """A float op's weights coming through a DequantizeLinear of 8-bit values (a QDQ model)."""
        p = self.producer.get(name)
        while p is not None and p.op_type in ("Transpose", "Reshape", "Identity"):
            p = self.producer.get(p.input[0])
        return p is not None and p.op_type == "DequantizeLinear" and self.dtype.get(p.input[0]) in EIGHT_BIT


def node_macs(n, s):
    """Multiply-adds of one node and whether they are 8-bit; (0, False) when it does none or shapes are unknown."""
    op = n.op_type
    if op in ("Conv", "QLinearConv", "ConvInteger", "FusedConv"):
        w_index = 3 if op == "QLinearConv" else 1
        w, y = s.shape(n.input[w_index]), s.shape(n.output[0])
        if not w or not y:
            return 0, False
        per_output = int(np.prod(w[1:]))  # input channels per group x kernel
        eight = op in ("QLinearConv", "ConvInteger") or s.weight_is_8bit(n.input[w_index])
        return int(np.prod(y)) * per_output, eight
    if op == "ConvTranspose":
        w, x = s.shape(n.input[1]), s.shape(n.input[0])
        if not w or not x:
            return 0, False
        return int(np.prod(x)) * w[1] * int(np.prod(w[2:])), False  # w: [C, M / group, kernel...]
    if op in ("MatMul", "Gemm", "FusedMatMul") or op in INTEGER_OPS:
        b_index = INTEGER_OPS.get(op, 1)
        a, y = s.shape(n.input[0]), s.shape(n.output[0])
        if not a or not y:
            return 0, False
        trans_a = next((a_.i for a_ in n.attribute if a_.name == "transA"), 0)
        k = a[-2] if (op in ("Gemm", "QGemm") and trans_a) else a[-1]
        eight = op in INTEGER_OPS or s.weight_is_8bit(n.input[b_index]) or s.weight_is_8bit(n.input[0])
        return int(np.prod(y)) * k, eight
    if op in ("LSTM", "GRU", "RNN"):
        x, r = s.shape(n.input[0]), s.shape(n.input[2])
        if not x or not r:
            return 0, False
        batch_first = next((a.i for a in n.attribute if a.name == "layout"), 0) == 1
        seq, batch, inputs = (x[1], x[0], x[2]) if batch_first else x
        directions, gates_h, hidden = r  # R: [directions, gates x hidden, hidden]
        return seq * batch * directions * gates_h * (inputs + hidden), False
    return 0, False


def count_macs(path):
    """(float MACs, 8-bit MACs) of the model at `path`, its subgraphs not included."""
    s = Shapes(onnx.load(path))
    fp, i8 = 0, 0
    for n in s.nodes:
        macs, eight = node_macs(n, s)
        if eight:
            i8 += macs
        else:
            fp += macs
    return fp, i8


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="results.json files written by bench/compare.py")
    parser.add_argument("--zoo-dir", default=os.environ.get("NEE_ZOO_DIR", os.path.expanduser("~/.cache/nee-zoo")))
    parser.add_argument("--gemm-bench", default="build/bin/nee_gemm_bench")
    parser.add_argument("--fp32-peak", type=float, help="GFLOP/s per core (default: measured)")
    parser.add_argument("--int8-peak", type=float, help="GMAC/s per core (default: measured where VNNI runs)")
    args = parser.parse_args()

    fp32_peak, int8_peak = args.fp32_peak, args.int8_peak
    if fp32_peak is None:
        fp32_peak, measured_int8 = measure_peaks(args.gemm_bench)
        int8_peak = int8_peak or measured_int8
    fma_rate = fp32_peak / 2  # G multiply-adds a second
    int8_rate = int8_peak or fma_rate
    print(f"peaks per core: fp32 {fp32_peak:.1f} GFLOP/s ({fma_rate:.1f} GMAC/s), "
          f"int8 {int8_rate:.1f} GMAC/s{'' if int8_peak else ' (no VNNI peak: the fp32 rate)'}\n")
    print("| model | threads | GMAC fp32 / int8 | floor ms | nee ms | nee % of peak | ORT ms | ORT % of peak "
          "| lowest nee/ORT |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for path in args.results:
        with open(path) as f:
            results = json.load(f)["results"]
        for model, by_threads in results.items():
            onnx_path = os.path.join(args.zoo_dir, model + ".onnx")
            if not os.path.exists(onnx_path):
                print(f"| {model} | | (no {onnx_path}) | | | | | | |")
                continue
            fp, i8 = count_macs(onnx_path)
            for threads, by_runtime in sorted(by_threads.items(), key=lambda kv: int(kv[0])):
                t = int(threads)
                floor_ms = (fp / fma_rate + i8 / int8_rate) / 1e6 / t if fp + i8 else None
                cells = []
                for runtime in ("nee", "ort"):
                    ms = (by_runtime.get(runtime) or {}).get("median_ms")
                    share = f"{100 * floor_ms / ms:.0f}%" if ms and floor_ms else "-"
                    cells += [f"{ms:.2f}" if ms else "-", share]
                ort_ms = (by_runtime.get("ort") or {}).get("median_ms")
                bound = f"{floor_ms / ort_ms:.2f}" if ort_ms and floor_ms else "-"
                floor = f"{floor_ms:.2f}" if floor_ms else "-"
                print(f"| {model} | {t} | {fp / 1e9:.2f} / {i8 / 1e9:.2f} | {floor} | {' | '.join(cells)} | {bound} |")


if __name__ == "__main__":
    main()
