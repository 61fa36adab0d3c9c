"""`nee quantize --mode int4` / nee.quantize(mode="int4") and com.microsoft MatMulNBits
(src/opt/quantize_int4.cc, src/ops/matmul_nbits.cc, src/ep/cpu/matmul_nbits_fast.cc).

Oracles, each independent of nee:
  - ONNX Runtime's block quantizer, onnxruntime.capi quantize_matmul_4bits (the C++ routine its
    MatMulNBitsQuantizer calls; the quantizer module itself needs onnx_ir, which is not pinned), on the
    same weights: nee's initializers must be its bytes;
  - ONNX Runtime running nee's int4 model (it implements MatMulNBits): nee's outputs within float
    rounding of its outputs;
  - numpy dequantizing nee's initializers by the op's definition and multiplying;
  - the float32 model, within the error 4-bit weights allow (stated below).
"""
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi._pybind_state import quantize_matmul_4bits

import nee
from cli_util import nee_cli

K1, N1, N2 = 100, 70, 33  # K1 is not a multiple of any block size; N odd


def ort_run(path, feed, threads=1):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feed)


def nee_run(path, feed, threads=1, reference=False):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    so.reference_kernels_only = reference  # the reference kernel instead of the fast one
    return nee.InferenceSession(str(path), so).run(None, feed)


def mlp_model(path):
    """x[B,100] -> MatMul W1 -> Add -> Relu -> MatMul W2 -> y[B,33]; plus s = MatMul(x, x^T) of two
    activations (not a weight: stays float) and an excluded-able MatMul sharing W1."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((K1, N1)) / np.sqrt(K1)).astype(np.float32)
    w1[:, 3] *= 40  # one column with a much larger range than the others: per-block scales matter
    w2 = (rng.standard_normal((N1, N2)) / np.sqrt(N1)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"),
             numpy_helper.from_array((rng.standard_normal(N1) * 0.1).astype(np.float32), "b1")]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["a"], name="relu1"),
        helper.make_node("MatMul", ["a", "W2"], ["y"], name="fc2"),
        helper.make_node("Transpose", ["x"], ["xt"], name="xt"),
        helper.make_node("MatMul", ["x", "xt"], ["s"], name="gram"),
        helper.make_node("MatMul", ["x", "W1"], ["h2"], name="fc1_again"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N2]),
                               helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch", "batch"]),
                               helper.make_tensor_value_info("h2", TensorProto.FLOAT, ["batch", N1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path, {"W1": w1, "W2": w2}


def ort_block_quantize(w, block_size):
    """ONNX Runtime's asymmetric 4-bit block quantization of a [K, N] matrix, as its quantizer calls it."""
    k, n = w.shape
    blocks = (k + block_size - 1) // block_size
    padded = np.pad(w, ((0, blocks * block_size - k), (0, 0)))
    packed = np.zeros((n, blocks, block_size // 2), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    zero_points = np.zeros((n, (blocks + 1) // 2), np.uint8)
    quantize_matmul_4bits(packed, np.ascontiguousarray(padded), scales, zero_points, block_size, n,
                          blocks * block_size, False)
    return packed, scales, zero_points


def dequantize(b, scales, zero_points, k):
    """W [K, N] from MatMulNBits' inputs, by the op's definition (numpy)."""
    n, blocks, blob = b.shape
    q = np.empty((n, blocks, 2 * blob), np.float32)
    q[..., 0::2] = b & 15
    q[..., 1::2] = b >> 4
    zp = np.empty((n, 2 * zero_points.shape[1]), np.float32)
    zp[:, 0::2] = zero_points & 15
    zp[:, 1::2] = zero_points >> 4
    w = (q - zp[:, :blocks, None]) * scales.reshape(n, blocks)[..., None]
    return w.reshape(n, -1)[:, :k].T


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def test_writes_onnx_runtime_bytes_and_nodes(tmp_path):
    src, weights = mlp_model(tmp_path / "mlp.onnx")
    for block_size in (16, 32, 64, 128):
        out = tmp_path / f"int4_{block_size}.onnx"
        summary = nee.quantize(src, out, mode="int4", block_size=block_size)
        assert "3 nodes with weights quantized to int4 (MatMulNBits), 1 left as they were" in summary, summary
        assert "gram" in summary and "not a constant initializer" in summary
        model = onnx.load(str(out))
        onnx.checker.check_model(model, full_check=True)
        ops = [(n.name, n.domain, n.op_type) for n in model.graph.node]
        assert ("gram", "", "MatMul") in ops
        nbits = {n.name: n for n in model.graph.node if n.op_type == "MatMulNBits"}
        assert sorted(nbits) == ["fc1", "fc1_again", "fc2"] and all(n.domain == "com.microsoft" for n in nbits.values())
        attrs = {a.name: helper.get_attribute_value(a) for a in nbits["fc1"].attribute}
        assert attrs == {"K": K1, "N": N1, "bits": 4, "block_size": block_size}
        assert nbits["fc1"].input[1:] == nbits["fc1_again"].input[1:]  # one quantized copy of a shared weight
        inits = initializers(out)
        assert "W1" not in inits and "W2" not in inits  # the float weights are gone
        for name, w in weights.items():
            packed, scales, zero_points = ort_block_quantize(w, block_size)
            np.testing.assert_array_equal(inits[name + "_Q4"], packed)
            np.testing.assert_array_equal(inits[name + "_scales"], scales)
            np.testing.assert_array_equal(inits[name + "_zero_points"], zero_points)


@pytest.mark.parametrize("block_size", [16, 32, 128])
@pytest.mark.parametrize("batch", [1, 3, 8, 40])
def test_nee_matches_onnx_runtime_and_numpy(tmp_path, block_size, batch):
    src, weights = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "int4.onnx"
    nee.quantize(src, out, mode="int4", block_size=block_size)
    x = np.random.default_rng(batch).standard_normal((batch, K1)).astype(np.float32)
    want = ort_run(out, {"x": x})
    inits = initializers(out)
    w1 = dequantize(inits["W1_Q4"], inits["W1_scales"], inits["W1_zero_points"], K1)
    h2 = (x.astype(np.float64) @ w1.astype(np.float64)).astype(np.float32)
    for threads, reference in ((1, False), (2, False), (1, True)):
        got = nee_run(out, {"x": x}, threads, reference)
        for g, w, name in zip(got, want, ("y", "s", "h2")):
            assert g.shape == w.shape, name
            # Float rounding only: both dequantize the same 4-bit weights and sum in float32.
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()), err_msg=name)
        np.testing.assert_allclose(got[2], h2, rtol=1e-5, atol=1e-5 * float(np.abs(h2).max()))


def test_close_to_the_float_model(tmp_path):
    """Against fp32, on 256 random rows (loose: this is 4-bit's own error, not nee's). 15 levels over a
    block's range of Gaussian weights put a step near 0.4 sigma, an rms weight error near 0.1 sigma, so
    about 10% of y. Measured: relative rms error of y 0.092 / 0.114 / 0.120 / 0.140 and max error
    7.5% / 8.8% / 7.7% / 10.9% of max |y| at blocks 16 / 32 / 64 / 128. Asserted: rms below 0.16, max
    below 15%, and block 16 no worse than block 128."""
    src, _ = mlp_model(tmp_path / "mlp.onnx")
    x = np.random.default_rng(5).standard_normal((256, K1)).astype(np.float32)
    (y32, _, _) = nee_run(src, {"x": x})
    rms = {}
    for block_size in (16, 32, 64, 128):
        out = tmp_path / f"int4_{block_size}.onnx"
        nee.quantize(src, out, mode="int4", block_size=block_size)
        (y4, _, _) = nee_run(out, {"x": x})
        rms[block_size] = float(np.linalg.norm(y4 - y32) / np.linalg.norm(y32))
        worst = float(np.abs(y4 - y32).max() / np.abs(y32).max())
        assert rms[block_size] < 0.16 and worst < 0.15, (block_size, rms[block_size], worst)
    assert rms[16] <= rms[128], rms


def test_cli_lineage_and_exclude(tmp_path):
    src, _ = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "int4.onnx"
    r = nee_cli("quantize", src, "-o", out, "--mode", "int4", "--block-size", "64", "--exclude", "fc2")
    assert r.returncode == 0, r.stderr
    assert "2 nodes with weights quantized to int4 (MatMulNBits)" in r.stdout and "weights:" in r.stdout
    assert "kept: node 'fc2' (MatMul): excluded" in r.stdout
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node if n.name == "fc2"] == ["MatMul"]
    record = json.loads({p.key: p.value for p in model.metadata_props}["nee.lineage.1"])
    params = record["parameters"]
    assert params["mode"] == "int4" and params["block_size"] == 64 and params["bits"] == 4
    assert params["symmetric_weights"] is False and params["nodes"] == ["fc1", "fc1_again"]
    assert params["excluded_nodes"] == ["fc2"]
    x = np.random.default_rng(1).standard_normal((2, K1)).astype(np.float32)
    for g, w in zip(nee_run(out, {"x": x}), ort_run(out, {"x": x})):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()))
    # The default block size is 32.
    out32 = tmp_path / "int4_default.onnx"
    assert nee_cli("quantize", src, "-o", out32, "--mode", "int4").returncode == 0
    nbits = [n for n in onnx.load(str(out32)).graph.node if n.op_type == "MatMulNBits"]
    assert {helper.get_attribute_value(a) for n in nbits for a in n.attribute if a.name == "block_size"} == {32}


def test_bad_block_size_and_options(tmp_path):
    src, _ = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "out.onnx"
    for bad in ("24", "8", "0", "x"):
        r = nee_cli("quantize", src, "-o", out, "--mode", "int4", "--block-size", bad)
        assert r.returncode != 0 and not out.exists(), bad
        assert "block-size" in r.stderr or "block size" in r.stderr, r.stderr
    r = nee_cli("quantize", src, "-o", out, "--mode", "int4", "--block-size", "48")
    assert r.returncode == 1 and "power of two >= 16" in r.stderr and not out.exists(), r.stderr
    r = nee_cli("quantize", src, "-o", out, "--mode", "dynamic", "--block-size", "32")
    assert r.returncode != 0 and "--block-size applies to --mode int4 only" in r.stderr
    with pytest.raises(nee.InvalidArgument, match="power of two >= 16"):
        nee.quantize(src, out, mode="int4", block_size=40)
    with pytest.raises(nee.InvalidArgument, match="block_size applies to mode 'int4' only"):
        nee.quantize(src, out, mode="dynamic", block_size=32)
    with pytest.raises(nee.InvalidArgument, match="do not apply to mode 'int4'"):
        nee.quantize(src, out, mode="int4", per_channel=True)
    assert not out.exists()


def hostile_model(path, b_shape, scales_shape, bits=4, block_size=32):
    rng = np.random.default_rng(2)
    node = helper.make_node("MatMulNBits", ["x", "B", "S"], ["y"], name="q", domain="com.microsoft", K=K1, N=5,
                            bits=bits, block_size=block_size)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng.integers(0, 255, b_shape, dtype=np.uint8), "B"),
                               numpy_helper.from_array(np.ones(scales_shape, np.float32), "S")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_hostile_models_are_refused_by_name(tmp_path):
    x = {"x": np.ones((1, K1), np.float32)}
    cases = [
        ((5, 4, 8), (5, 4), "(B) must be uint8 [5, 4, 16]"),    # blobs half the size K needs
        ((5, 3, 16), (5, 3), "(B) must be uint8 [5, 4, 16]"),   # a block short
        ((5, 4, 16), (5, 2), "(scales) must hold N x blocks"),
    ]
    for i, (b_shape, s_shape, needle) in enumerate(cases):
        path = hostile_model(tmp_path / f"h{i}.onnx", b_shape, s_shape)
        with pytest.raises(nee.NeeError) as e:
            nee_run(path, x)
        assert "node 'q' (com.microsoft.MatMulNBits)" in str(e.value) and needle in str(e.value), str(e.value)
        with pytest.raises(Exception):  # ONNX Runtime refuses them too
            ort_run(path, x)
    path = hostile_model(tmp_path / "bits8.onnx", (5, 4, 32), (5, 4), bits=8)
    with pytest.raises(nee.NotImplemented, match="only 4-bit weights are implemented"):
        nee_run(path, x)


def test_empty_weight_is_kept(tmp_path):
    """A [0, N] weight has no block to quantize (MatMulNBits needs K >= 1): the MatMul stays, listed."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="empty")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.zeros((0, 3), np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src, out = tmp_path / "empty.onnx", tmp_path / "empty_int4.onnx"
    onnx.save(model, str(src))
    summary = nee.quantize(src, out, mode="int4")
    assert "0 nodes with weights quantized to int4" in summary and "B 'W' is empty" in summary, summary
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["MatMul"]
