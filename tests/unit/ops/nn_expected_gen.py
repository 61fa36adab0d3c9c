"""Computes the expected values pasted into the nn op unit tests
(matmul/conv/pool/normalization/softmax _test.cc) with onnx.reference.

Inputs follow the same deterministic pattern as Pattern() in the tests:
element i of a tensor is ((i % mod) - offset) * scale. Run with
  /work/main/.venv/bin/python tests/unit/ops/nn_expected_gen.py CASE...
and it prints one C++ initializer per output.
"""
import sys

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator


def P(shape, mod=7, offset=3, scale=0.5, dtype=np.float32):
    n = int(np.prod(shape)) if len(shape) else 1
    return (((np.arange(n) % mod) - offset) * scale).astype(dtype).reshape(shape)


def run(op, inputs, opset=22, n_out=1, **attrs):
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    feeds = {n: x for n, x in zip(names, inputs) if n}
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
          for n, x in feeds.items()]
    vo = [helper.make_tensor_value_info(o, 0, None) for o in outs]
    g = helper.make_graph([node], "g", vi, vo)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(m).run(None, feeds)


def emit(name, arr):
    arr = np.asarray(arr)
    if arr.dtype.kind == "f":
        vals = ", ".join(f"{v:.9g}" for v in arr.astype(np.float64).ravel())
    else:
        vals = ", ".join(str(int(v)) for v in arr.ravel())
    print(f"// {name}: dims {list(arr.shape)}")
    print(f"{{{vals}}}")


CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


# ---- matmul_test.cc ----
@case
def matmul_2d():
    return run("MatMul", [P([2, 3]), P([3, 4], mod=5)], 13)

@case
def matmul_batched_bcast():
    return run("MatMul", [P([2, 1, 2, 3]), P([3, 3, 2], mod=5)], 13)

@case
def matmul_vec_mat():
    return run("MatMul", [P([3]), P([2, 3, 2], mod=5)], 13)

@case
def matmul_mat_vec():
    return run("MatMul", [P([2, 2, 3]), P([3], mod=5)], 13)

@case
def matmul_int32():
    return run("MatMul", [P([2, 3], scale=1, dtype=np.int32), P([3, 2], mod=5, scale=1, dtype=np.int32)], 13)

@case
def gemm_trans():
    return run("Gemm", [P([3, 2]), P([4, 3], mod=5), P([1, 4], mod=3)], 13, transA=1, transB=1, alpha=0.5, beta=2.0)

@case
def gemm_no_c():
    return run("Gemm", [P([2, 3]), P([3, 2], mod=5)], 13)

@case
def gemm_scalar_c():
    return run("Gemm", [P([2, 3]), P([3, 2], mod=5), np.array(1.5, np.float32)], 13, beta=0.5)

@case
def matmul_integer():
    a = P([2, 3], mod=9, offset=0, scale=1, dtype=np.uint8)
    b = P([3, 2], mod=5, offset=2, scale=3, dtype=np.int8)
    # Per-row A zero point: onnx.reference cannot broadcast it, so numpy directly.
    return [(a.astype(np.int32) - np.array([[1], [2]])) @ (b.astype(np.int32) + 1)]

@case
def einsum_matmul():
    return run("Einsum", [P([2, 3]), P([3, 4], mod=5)], 12, equation="ij,jk->ik")

@case
def einsum_batch_ellipsis():
    return run("Einsum", [P([2, 2, 3]), P([2, 3, 2], mod=5)], 12, equation="...ij,...jk->...ik")

@case
def einsum_diag_implicit():
    return run("Einsum", [P([3, 3])], 12, equation="ii")

@case
def einsum_transpose_implicit():
    return run("Einsum", [P([2, 3, 4])], 12, equation="kij")

@case
def einsum_diag_extract():
    return run("Einsum", [P([2, 3, 3])], 12, equation="bii->bi")

@case
def einsum_outer_sum():
    return run("Einsum", [P([3]), P([4], mod=5)], 12, equation="i,j->")

# ---- conv_test.cc ----
@case
def conv_2d_pads_strides():
    return run("Conv", [P([1, 2, 5, 4]), P([3, 2, 3, 3], mod=5), P([3], mod=3)], 22,
               pads=[1, 0, 1, 1], strides=[2, 1])

@case
def conv_1d_dilated_same_upper():
    return run("Conv", [P([2, 2, 7]), P([2, 2, 2], mod=5)], 22, auto_pad="SAME_UPPER", dilations=[2])

@case
def conv_2d_groups_same_lower():
    return run("Conv", [P([1, 4, 3, 3]), P([2, 2, 2, 2], mod=5)], 22, auto_pad="SAME_LOWER", group=2, strides=[2, 2])

@case
def conv_3d_valid():
    return run("Conv", [P([1, 1, 3, 4, 3]), P([2, 1, 2, 2, 2], mod=5)], 22, auto_pad="VALID")

@case
def conv_depthwise():
    return run("Conv", [P([2, 3, 3, 3]), P([3, 1, 2, 2], mod=5), P([3], mod=3)], 22, group=3, pads=[1, 1, 0, 0])

@case
def conv_transpose_2d():
    return run("ConvTranspose", [P([1, 2, 3, 3]), P([2, 3, 3, 3], mod=5), P([3], mod=3)], 22, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])

@case
def conv_transpose_output_shape():
    return run("ConvTranspose", [P([1, 1, 3, 3]), P([1, 2, 3, 3], mod=5)], 22, strides=[3, 2], output_shape=[10, 8])

@case
def conv_transpose_group_dilation_1d():
    # onnx.reference mis-slices W for group > 1: run each group alone and concatenate.
    x, w = P([1, 4, 4]), P([4, 1, 2], mod=5)
    parts = [run("ConvTranspose", [x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2]], 22, dilations=[2])[0] for g in range(2)]
    return [np.concatenate(parts, axis=1)]

@case
def conv_transpose_same_upper():
    return run("ConvTranspose", [P([1, 1, 3]), P([1, 1, 3], mod=5)], 22, strides=[2], auto_pad="SAME_UPPER")

@case
def conv_integer():
    x = P([1, 1, 3, 3], mod=9, offset=0, scale=1, dtype=np.uint8)
    w = P([2, 1, 2, 2], mod=5, offset=2, scale=1, dtype=np.int8)
    return run("ConvInteger", [x, w, np.array(2, np.uint8), np.array([1, -1], np.int8)], 10, pads=[1, 1, 0, 0])

# ---- pool_test.cc ----
@case
def maxpool_2d_pads_indices():
    return run("MaxPool", [P([1, 2, 4, 5], mod=11)], 22, n_out=2, kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2])

@case
def maxpool_2d_indices_col_major():
    # Unequal strides: onnx.reference's equal-stride path ignores storage_order.
    return run("MaxPool", [P([1, 1, 3, 4], mod=11)], 22, n_out=2, kernel_shape=[2, 2], storage_order=1, strides=[1, 2])

@case
def maxpool_1d_ceil_dilated():
    return run("MaxPool", [P([1, 2, 8], mod=5)], 22, kernel_shape=[2], strides=[3], dilations=[2], ceil_mode=1)

@case
def maxpool_3d_same_upper():
    return run("MaxPool", [P([1, 1, 3, 3, 3], mod=13)], 22, kernel_shape=[2, 2, 2], auto_pad="SAME_UPPER", strides=[2, 2, 2])

@case
def avgpool_exclude_pad():
    return run("AveragePool", [P([1, 1, 4, 4], mod=9)], 22, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])

@case
def avgpool_include_pad_ceil():
    return run("AveragePool", [P([1, 1, 5, 5], mod=9)], 22, kernel_shape=[2, 2], pads=[1, 1, 0, 0], strides=[2, 2], ceil_mode=1, count_include_pad=1)

@case
def avgpool_same_lower_dilated():
    # onnx.reference leaves the last output of this case at 0 (its SAME path
    # ignores dilation when counting outputs), so plain numpy: SAME_LOWER with
    # the undilated kernel gives pads (1, 0); windows are o - 1 + 2k, k = 0, 1,
    # averaging only taps inside the input (count_include_pad = 0).
    x = P([1, 2, 5], mod=9).astype(np.float64)
    y = np.zeros([1, 2, 5])
    for c in range(2):
        for o in range(5):
            taps = [t for t in (o - 1, o + 1) if 0 <= t < 5]
            y[0, c, o] = np.mean(x[0, c, taps])
    return [y]

@case
def lppool_2d():
    return run("LpPool", [P([1, 2, 3, 3], mod=9)], 22, kernel_shape=[2, 2], p=3, pads=[0, 0, 1, 1])

@case
def global_pools():
    x = P([2, 3, 2, 3], mod=11)
    return [run("GlobalAveragePool", [x], 22)[0], run("GlobalMaxPool", [x], 22)[0], 
            # GlobalLpPool has no onnx.reference kernel: numpy
            np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3), keepdims=True))]

@case
def maxunpool_2d():
    x = np.array([[[[5, 6], [7, 8]]]], np.float32)
    i = np.array([[[[5, 7], [13, 15]]]], np.int64)
    return [run("MaxUnpool", [x, i], 22, kernel_shape=[2, 2], strides=[2, 2])[0],
            run("MaxUnpool", [x, i, np.array([1, 1, 5, 5], np.int64)], 22, kernel_shape=[2, 2], strides=[2, 2])[0]]

# ---- normalization_test.cc ----
@case
def batchnorm_inference():
    x = P([2, 3, 2, 2], mod=11)
    return run("BatchNormalization", [x, P([3], mod=4, offset=-1), P([3], mod=3), P([3], mod=5, scale=0.25),
                                      P([3], mod=4, offset=-1, scale=0.75)], 15, epsilon=1e-3)

@case
def batchnorm_training():
    x = P([2, 3, 2, 2], mod=11)
    return run("BatchNormalization", [x, P([3], mod=4, offset=-1), P([3], mod=3), P([3], mod=5, scale=0.25),
                                      P([3], mod=4, offset=-1, scale=0.75)], 15, n_out=3, training_mode=1, momentum=0.8)

@case
def instancenorm():
    return run("InstanceNormalization", [P([2, 3, 4], mod=11), P([3], mod=4, offset=-1), P([3], mod=3)], 22, epsilon=1e-2)

@case
def layernorm_axis1():
    return run("LayerNormalization", [P([2, 3, 4], mod=11), P([3, 4], mod=5), P([4], mod=3)], 17, n_out=3, axis=1)

@case
def layernorm_last_no_bias():
    return run("LayerNormalization", [P([3, 4], mod=11), P([4], mod=5)], 17, epsilon=1e-3)

@case
def groupnorm_per_channel():
    return run("GroupNormalization", [P([2, 4, 3], mod=11), P([4], mod=5), P([4], mod=3)], 21, num_groups=2)

@case
def rmsnorm():
    return run("RMSNormalization", [P([2, 3, 4], mod=11), P([4], mod=5)], 23)

@case
def lpnorm():
    # onnx.reference forgets the absolute value (wrong for p=1): numpy.
    x = P([2, 3, 2], mod=11).astype(np.float64)
    def lp(x, axis, p):
        norm = (np.abs(x) ** p).sum(axis=axis, keepdims=True) ** (1.0 / p)
        return np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm))
    return [lp(x, 1, 1), lp(x, -1, 2)]

@case
def lrn():
    # onnx.reference loops over the batch dim instead of channels: numpy.
    x = P([1, 5, 2, 2], mod=11).astype(np.float64)
    size, alpha, beta, bias = 3, 0.5, 0.6, 2.0
    sq = np.zeros_like(x)
    for c in range(5):
        lo, hi = max(0, c - (size - 1) // 2), min(4, c + size // 2)
        sq[:, c] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    return [x / (bias + alpha / size * sq) ** beta]

@case
def mvn():
    return run("MeanVarianceNormalization", [P([2, 3, 2, 2], mod=11)], 13)

# ---- softmax_test.cc ----
@case
def softmax_13_axis1():
    return run("Softmax", [P([2, 3, 2], mod=11)], 13, axis=1)

# onnx.reference applies opset-13 semantics to every version, so the pre-13
# (coerce to 2-D) cases are plain numpy on the reshaped input.
def softmax_2d(x, axis, log=False):
    shape = x.shape
    m = x.reshape(int(np.prod(shape[:axis])), -1).astype(np.float64)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    s = e.sum(axis=1, keepdims=True)
    out = (m - m.max(axis=1, keepdims=True) - np.log(s)) if log else e / s
    return out.reshape(shape)

@case
def softmax_11_coerce():
    # Opset 11, axis 1 on [2, 3, 2]: rows of 6 (numpy).
    return [softmax_2d(P([2, 3, 2], mod=11), 1)]

@case
def logsoftmax_13_last():
    return run("LogSoftmax", [P([2, 3, 2], mod=11)], 13)

@case
def logsoftmax_11_axis0():
    # Opset 11, axis 0: one row of all 6 elements (numpy).
    return [softmax_2d(P([2, 3], mod=11), 0, log=True)]

@case
def hardmax_13_axis0():
    x = np.array([[1, 3, 3], [3, 3, 0]], np.float32)
    return run("Hardmax", [x], 13, axis=0)

@case
def hardmax_11_ties():
    # Opset 11, axis 0: one row of 6, the first maximum wins (numpy).
    x = np.array([[1, 3, 3], [3, 3, 0]], np.float32).reshape(1, 6)
    y = np.zeros_like(x)
    y[0, np.argmax(x[0])] = 1
    return [y.reshape(2, 3)]

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        for i, out in enumerate(CASES[name]()):
            emit(f"{name} out{i}", out)
