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

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        for i, out in enumerate(CASES[name]()):
            emit(f"{name} out{i}", out)
