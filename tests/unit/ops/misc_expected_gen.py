#!/usr/bin/env python3
"""Prints the expected values used by loss_test.cc, vision_test.cc,
signal_test.cc and text_test.cc, computed with onnx.reference and numpy.

  /work/main/.venv/bin/python tests/unit/ops/misc_expected_gen.py
"""
import numpy as np
import onnx
from onnx import helper, TensorProto
from onnx.reference import ReferenceEvaluator

np.set_printoptions(precision=9)


def run(op, inputs, attrs=None, n_out=1, opset=None, domain=""):
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    node = helper.make_node(op, names, [f"out{i}" for i in range(n_out)], domain=domain, **(attrs or {}))
    ev = ReferenceEvaluator(node) if opset is None else None
    if opset is not None:
        graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for n, v in zip(names, inputs) if v is not None]
        graph = helper.make_graph([node], "g", graph_inputs,
                                  [helper.make_tensor_value_info(f"out{i}", TensorProto.UNDEFINED, None)
                                   for i in range(n_out)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
        ev = ReferenceEvaluator(model)
    feed = {n: v for n, v in zip(names, inputs) if v is not None}
    return ev.run(None, feed)


def show(name, arr):
    arr = np.asarray(arr)
    flat = ", ".join(repr(x) if isinstance(x, str) else f"{x:.9g}" if arr.dtype.kind == "f" else str(x)
                     for x in arr.reshape(-1).tolist())
    print(f"{name}: shape {list(arr.shape)} {{{flat}}}")


pattern = lambda shape, mod=7: (np.arange(np.prod(shape)) % mod - mod // 2).astype(np.float32).reshape(shape) * 0.5

print("== loss")
x = pattern((2, 3, 2))
labels = np.array([[0, 2], [1, -1]], dtype=np.int64)
w = np.array([0.5, 1.0, 2.0], dtype=np.float32)
out = run("SoftmaxCrossEntropyLoss", [x, labels, w], {"ignore_index": -1}, n_out=2)
show("sce_mean_w_ii", out[0])
show("sce_log_prob", out[1])
out = run("SoftmaxCrossEntropyLoss", [x, labels], {"ignore_index": -1, "reduction": "none"})
show("sce_none_ii", out[0])
xd = np.arange(12, dtype=np.float64).reshape(3, 4) * 0.3 - 1.4
t = np.array([3, 0, 1], dtype=np.int32)
show("nll_none", run("NegativeLogLikelihoodLoss", [xd, t], {"reduction": "none"})[0])
show("nll_mean", run("NegativeLogLikelihoodLoss", [xd, t])[0])
w4 = np.array([1, 2, 3, 4], dtype=np.float64)
show("nll_sum_w", run("NegativeLogLikelihoodLoss", [xd, t, w4], {"reduction": "sum"}, opset=22)[0])
show("nll_mean_w_ii", run("NegativeLogLikelihoodLoss", [xd, t, w4], {"ignore_index": 0})[0])
r = np.array(0.1, dtype=np.float32)
step = np.array(2, dtype=np.int64)
X = np.array([1.0, -2.0, 3.0], dtype=np.float32)
G = np.array([0.5, 0.25, -1.0], dtype=np.float32)
V = np.array([0.1, 0.2, 0.3], dtype=np.float32)
H = np.array([0.4, 0.5, 0.6], dtype=np.float32)
for name, args, attrs in [
    ("adagrad", [r, step, X, G, H], {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01}),
    ("adam", [r, step, X, G, V, H], {"alpha": 0.9, "beta": 0.99, "epsilon": 1e-6, "norm_coefficient": 0.01,
                                     "norm_coefficient_post": 0.02}),
    ("momentum", [r, step, X, G, V], {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.01}),
]:
    n_out = 3 if name == "adam" else 2
    outs = run(name.capitalize(), args, attrs, n_out=n_out, opset=1, domain="ai.onnx.preview.training")
    for i, o in enumerate(outs):
        show(f"{name}_{i}", o)

print("== vision")
img = pattern((1, 2, 3, 4), 11)
grid = (np.linspace(-1.3, 1.2, 2 * 3 * 2).astype(np.float32).reshape(1, 2, 3, 2))
grid[0, 1, 2] = [0.77, -1.9]
for mode, pad, align in [("linear", "zeros", 0), ("cubic", "border", 1), ("nearest", "reflection", 0),
                         ("linear", "reflection", 1)]:
    show(f"gs_{mode}_{pad}_{align}", run("GridSample", [img, grid],
                                         {"mode": mode, "padding_mode": pad, "align_corners": align}, opset=20)[0])
vol = pattern((1, 1, 2, 3, 2), 5)
grid3 = np.linspace(-1.1, 0.9, 1 * 2 * 1 * 2 * 3).astype(np.float32).reshape(1, 2, 1, 2, 3)
show("gs_5d_linear", run("GridSample", [vol, grid3], {"mode": "linear"}, opset=20)[0])
theta = np.array([[[1.0, 0.2, 0.1], [-0.3, 0.9, 0.05]]], dtype=np.float32)
show("affine_2d", run("AffineGrid", [theta, np.array([1, 1, 2, 3], dtype=np.int64)], {"align_corners": 0})[0])
show("affine_2d_ac", run("AffineGrid", [theta, np.array([1, 1, 2, 3], dtype=np.int64)], {"align_corners": 1})[0])
boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [1, 1, 0, 0]]], dtype=np.float32)
scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5], [0.1, 0.2, 0.3, 0.4, 0.8]]], dtype=np.float32)
show("nms", run("NonMaxSuppression", [boxes, scores, np.array([2], dtype=np.int64),
                                      np.array([0.5], dtype=np.float32), np.array([0.15], dtype=np.float32)])[0])
feat = pattern((2, 1, 4, 4), 9)
rois = np.array([[0.5, 0.5, 2.5, 3.0], [0, 0, 3, 3]], dtype=np.float32)
bidx = np.array([1, 0], dtype=np.int64)
show("roi_avg", run("RoiAlign", [feat, rois, bidx], {"output_height": 2, "output_width": 2, "sampling_ratio": 2},
                    opset=16)[0])
# RoiAlign-10 behaves as 'output_half_pixel' (the attribute's backward-compatible value); onnx.reference
# applies the opset-16 default to opset 10, so the mode is spelled out here.
show("roi_max_v10", run("RoiAlign", [feat, rois, bidx], {"output_height": 2, "output_width": 2, "mode": "max",
                                                          "spatial_scale": 0.5,
                                                          "coordinate_transformation_mode": "output_half_pixel"},
                        opset=16)[0])
dx = pattern((1, 2, 3, 3), 5)
dw = pattern((2, 1, 2, 2), 3)
doff = (np.linspace(-0.6, 0.7, 1 * 2 * 8 * 2 * 2).astype(np.float32).reshape(1, 16, 2, 2))
dmask = np.linspace(0.2, 1.0, 1 * 2 * 4 * 2 * 2).astype(np.float32).reshape(1, 8, 2, 2)
db = np.array([0.5, -0.5], dtype=np.float32)
show("deform", run("DeformConv", [dx, dw, doff, db, dmask], {"group": 2, "offset_group": 2}, opset=19)[0])

print("== signal")
sig = pattern((1, 5, 1), 6)
show("dft_fwd", run("DFT", [sig, None, np.array(-2, dtype=np.int64)], opset=20)[0])
show("dft_rfft_len8", run("DFT", [sig, np.array(8, dtype=np.int64), np.array(1, dtype=np.int64)], {"onesided": 1},
                          opset=20)[0])
cs = pattern((2, 3, 2), 5)
show("dft_inv_axis0_v17", run("DFT", [cs], {"inverse": 1, "axis": 0}, opset=17)[0])
spec = pattern((1, 3, 2), 5)
show("dft_irfft", run("DFT", [spec, None, np.array(1, dtype=np.int64)], {"inverse": 1, "onesided": 1}, opset=20)[0])
s2 = pattern((1, 10, 1), 7)
win = np.array([0.2, 0.7, 1.0, 0.5], dtype=np.float32)
show("stft", run("STFT", [s2, np.array(3, dtype=np.int64), win])[0])
show("stft_full", run("STFT", [s2, np.array(4, dtype=np.int64), None, np.array(3, dtype=np.int64)],
                      {"onesided": 0})[0])
show("hann_sym", run("HannWindow", [np.array(5, dtype=np.int64)], {"periodic": 0})[0])
show("hamming", run("HammingWindow", [np.array(4, dtype=np.int32)], {"output_datatype": 11})[0])
show("blackman", run("BlackmanWindow", [np.array(5, dtype=np.int64)])[0])
show("mel", run("MelWeightMatrix", [np.array(3, dtype=np.int64), np.array(16, dtype=np.int64),
                                    np.array(8000, dtype=np.int64), np.array(100, dtype=np.float32),
                                    np.array(3000, dtype=np.float32)])[0])
cx = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
show("cumprod_excl_rev", run("CumProd", [cx, np.array(1, dtype=np.int64)], {"exclusive": 1, "reverse": 1})[0])
cf = np.array([[1.5, -2.0], [0.5, 3.0], [2.0, 0.25]], dtype=np.float32)
show("cumprod_axis0", run("CumProd", [cf, np.array(-2, dtype=np.int32)])[0])
dm = pattern((2, 3, 3), 7) + np.eye(3, dtype=np.float32)
show("det", run("Det", [dm])[0])

print("== text")
tf_in = np.array([[1, 2, 3, 2, 3], [3, 3, 1, 2, 4]], dtype=np.int64)
show("tfidf_tf", run("TfIdfVectorizer", [tf_in], {"mode": "TF", "min_gram_length": 1, "max_gram_length": 2,
                                                 "max_skip_count": 1, "ngram_counts": [0, 3],
                                                 "ngram_indexes": [0, 1, 2, 3, 4], "pool_int64s": [1, 2, 3, 2, 3, 3, 1]})[0])
show("tfidf_tfidf", run("TfIdfVectorizer", [tf_in], {"mode": "TFIDF", "min_gram_length": 2, "max_gram_length": 2,
                                                    "max_skip_count": 2, "ngram_counts": [0, 3],
                                                    "ngram_indexes": [4, 3, 2, 0, 1], "pool_int64s": [1, 2, 3, 2, 3, 3, 1],
                                                    "weights": [0.5, 2.0, 4.0, 8.0, 16.0]})[0])
show("tfidf_idf_strings", run("TfIdfVectorizer", [np.array(["a", "b", "a", "c"], dtype=object)],
                              {"mode": "IDF", "min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0,
                               "ngram_counts": [0], "ngram_indexes": [1, 0], "pool_strings": ["a", "c"],
                               "weights": [0.25, 3.0]})[0])
strs = np.array(["a b", "x y"], dtype=object)
print("split:", [s.split(None, 1) for s in ["  one two  three ", "a", "", "p  q"]])
show("concat", run("StringConcat", [np.array([["a", "b"]], dtype=object), np.array([["x"], ["yz"]], dtype=object)])[0])
print("regex:", [bool(__import__("re").fullmatch(r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", s))
                 for s in ["account@gmail.com", "not email", " abc@yahoo.com!", "x@gmail.co"]])
print("strnorm (ONNX node-test semantics, by Python):",
      [s.upper() for s in ["Monday", "tuesday", "MONDAY", "Straße"] if s.lower() not in {"monday"}])
x16 = np.array([[1, 2, 3], [0.5, 0, -1]], dtype=np.float16)
show("sce_f16_none", run("SoftmaxCrossEntropyLoss", [x16, np.array([2, 0], dtype=np.int64)], {"reduction": "none"})[0])
g16 = np.array([[[[-0.5, 0.25], [0.75, -1.0]]]], dtype=np.float16)
show("gs_f16", run("GridSample", [pattern((1, 1, 2, 3), 5).astype(np.float16), g16], {"align_corners": 1}, opset=20)[0])
