"""Static int8 MatMuls in integers: the QDQ fusion MatMul(DQ(a), DQ(W)) [-> Relu | Clip] -> Q into QLinearMatMul
(src/opt/fuse_qdq_conv.cc) and its kernel (src/ep/cpu/qlinear_matmul_fast.cc, bitwise the reference kernel:
tests/unit/ep/qlinear_matmul_fast_test.cc).

Oracles, independent of the fusion: nee with graph optimizations off and ONNX Runtime with its optimizations off,
which both compute the QDQ graph as the spec states it (DequantizeLinear -> float MatMul -> QuantizeLinear), and
ONNX Runtime with its optimizations on, which fuses the same group into its own QLinearMatMul. The float graph
sums dequantized products in float32 and rounds that sum; the fused op sums integers exactly and rounds once, so
one quantized MatMul lands within one step of its output scale of the float graph.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qdq_util import inputs, nee_out, optimized_ops, ort_fused_steps, ort_out, output_step, static_int8


def matmul_model(path, relu_between, batched):
    """x[N,(4,)32] -> MatMul W1[32,48] (-> Relu -> MatMul W2[48,10]) -> y."""
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((32, 48)) / 6).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h" if relu_between else "y"])]
    if relu_between:
        w2 = (rng.standard_normal((48, 10)) / 7).astype(np.float32)
        inits.append(numpy_helper.from_array(w2, "w2"))
        nodes += [helper.make_node("Relu", ["h"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    dims = ["N", 4, 32] if batched else ["N", 32]
    graph = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def quantized(tmp_path, shape, per_channel, **make):
    src = tmp_path / "float.onnx"
    matmul_model(src, **make)
    return static_int8(src, tmp_path, shape, per_channel=per_channel)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_one_quantized_matmul_within_one_step(tmp_path, per_channel, batched):
    shape = (4, 32) if batched else (32,)
    model = quantized(tmp_path, shape, per_channel, relu_between=False, batched=batched)
    ops = optimized_ops(model, tmp_path)
    assert ops["QLinearMatMul"] == 1 and ops["MatMul"] == 0, ops
    x = inputs(shape, 16, seed=5) * np.float32(1.3)  # partly beyond the calibrated range: saturation
    fused = nee_out(model, x)
    step = output_step(model)
    unfused = nee_out(model, x, level=0)
    ort_qdq = ort_out(model, x, optimize=False)
    d_unfused = np.max(np.abs(fused - unfused)) / step
    d_ort_qdq = np.max(np.abs(fused - ort_qdq)) / step
    d_ort_fused = ort_fused_steps(fused, model, x, step)
    print(f"per_channel={per_channel} batched={batched}: fused vs unfused {d_unfused:.2f} steps, vs ORT's QDQ "
          f"{d_ort_qdq:.2f}, vs ORT fused {d_ort_fused:.2f}; equal to unfused {np.mean(fused == unfused):.4f}")
    assert d_unfused <= 1.001 and d_ort_qdq <= 1.001 and d_ort_fused <= 1.001
    assert np.mean(fused == unfused) >= 0.95
    assert np.array_equal(fused, nee_out(model, x, threads=2))


@pytest.mark.parametrize("per_channel", [False, True])
def test_mlp_with_relu_fuses_both_matmuls(tmp_path, per_channel):
    model = quantized(tmp_path, (32,), per_channel, relu_between=True, batched=False)
    ops = optimized_ops(model, tmp_path)
    # The Relu between is the first QLinearMatMul's requantization when Q saturates at its zero point.
    assert ops["QLinearMatMul"] == 2 and ops["MatMul"] == 0 and ops["Relu"] == 0, ops
    assert_two_layers_within_two_steps(model, inputs((32,), 16, seed=6))


def assert_two_layers_within_two_steps(model, x):
    fused = nee_out(model, x)
    step = output_step(model)
    # One step at the first layer can move the second layer's output by a little more than one step.
    assert np.max(np.abs(fused - nee_out(model, x, level=0))) / step <= 2.001
    assert np.max(np.abs(fused - ort_out(model, x, optimize=False))) / step <= 2.001
    assert ort_fused_steps(fused, model, x, step) <= 2.001
    assert np.array_equal(fused, nee_out(model, x, threads=2))


def gemm_model(path, trans_b, relu_between):
    """x[N,32] -> Gemm(W1, b1) (-> Relu -> Gemm(W2, b2)) -> y, W stored [out, in] with transB (a classifier's
    layout) or [in, out] without."""
    rng = np.random.default_rng(4)
    dims = [(32, 48), (48, 10)] if relu_between else [(32, 10)]
    inits, nodes, x = [], [], "x"
    for i, (k, n) in enumerate(dims):
        w = (rng.standard_normal((n, k) if trans_b else (k, n)) / 6).astype(np.float32)
        b = (rng.standard_normal(n) / 4).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i + 1 == len(dims) else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [out], transB=1 if trans_b else 0))
        if out != "y":
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
            x = f"r{i}"
    graph = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_quantized_gemm_fuses_into_qgemm_within_one_step(tmp_path, per_channel, trans_b):
    """Gemm(DQ(a), DQ(W), DQ(bias)) -> Q into com.microsoft QGemm (ONNX Runtime fuses the same group into its
    QGemm); the kernel is bitwise the reference (tests/unit/ep/qgemm_fast_test.cc)."""
    src = tmp_path / "float.onnx"
    gemm_model(src, trans_b, relu_between=False)
    model = static_int8(src, tmp_path, (32,), per_channel=per_channel)
    ops = optimized_ops(model, tmp_path)
    assert ops["QGemm"] == 1 and ops["Gemm"] == 0, ops
    x = inputs((32,), 16, seed=7) * np.float32(1.3)  # [16, 32]; partly beyond the calibrated range
    fused = nee_out(model, x)
    step = output_step(model)
    d_unfused = np.max(np.abs(fused - nee_out(model, x, level=0))) / step
    d_ort_qdq = np.max(np.abs(fused - ort_out(model, x, optimize=False))) / step
    d_ort_fused = ort_fused_steps(fused, model, x, step)
    print(f"per_channel={per_channel} trans_b={trans_b}: fused vs unfused {d_unfused:.2f} steps, vs ORT's QDQ "
          f"{d_ort_qdq:.2f}, vs ORT fused {d_ort_fused:.2f}")
    assert d_unfused <= 1.001 and d_ort_qdq <= 1.001 and d_ort_fused <= 1.001
    assert np.array_equal(fused, nee_out(model, x, threads=2))


def test_mlp_of_gemms_with_relu_fuses_both(tmp_path):
    src = tmp_path / "float.onnx"
    gemm_model(src, trans_b=True, relu_between=True)
    model = static_int8(src, tmp_path, (32,), per_channel=True)
    ops = optimized_ops(model, tmp_path)
    assert ops["QGemm"] == 2 and ops["Gemm"] == 0 and ops["Relu"] == 0, ops
    assert_two_layers_within_two_steps(model, inputs((32,), 16, seed=8))
