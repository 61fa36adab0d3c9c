"""float16 MatMul and Gemm on nee's float16-weight kernel (src/ep/cpu/f16_gemm.cc, f16_matmul_fast.cc),
which the widen-narrow-float pass leaves float16 at the AVX2 level: a `nee quantize --mode fp16` model's
weights are packed once and kept float16, widened in registers as the kernel reads them.

Oracles, each independent of nee's kernel:
  - numpy evaluating the same per-op rounding (float64 sums of the float16 values, each op's output rounded
    once to float16): the reference kernels' computation, up to float32 accumulation order;
  - ONNX Runtime running the same fp16 model (it also rounds each op's output to float16);
  - the float32 model, within what float16's 11 significant bits allow through three layers.
Under NEE_MAX_ISA=portable the pass widens these nodes instead; the values are the same.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import nee

from cli_util import nee_cli

H, F, S, B, HEADS = 48, 70, 9, 2, 4  # hidden, projection (not a multiple of 32), sequence, batch, heads


def cpu_has_f16_gemm():
    if os.environ.get("NEE_MAX_ISA") == "portable":
        return False
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return any(line.startswith("flags") and {"avx2", "fma", "f16c"} <= set(line.split()) for line in f)


def float32_model(path):
    """x[B,S,H] -> MatMul(W1[H,F]) + b1 -> Relu -> p; p[:, :, :64] as heads -> q @ q^T -> scores[B,HEADS,S,S];
    z[11,H] -> Gemm(W2[F,H]^T, C[F], alpha .5, beta 2) -> g[11,F]."""
    rng = np.random.default_rng(41)
    w1 = (rng.standard_normal((H, F)) / np.sqrt(H)).astype(np.float32)
    b1 = rng.standard_normal(F).astype(np.float32) * 0.1
    w2 = (rng.standard_normal((F, H)) / np.sqrt(H)).astype(np.float32)
    c = rng.standard_normal(F).astype(np.float32)
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W1"], ["h"], name="fc1"), n("Add", ["h", "b1"], ["hb"], name="bias"),
             n("Relu", ["hb"], ["p"], name="relu"),
             n("Slice", ["p", "zero", "sixty_four", "minus_one"], ["p64"], name="slice"),
             n("Reshape", ["p64", "heads_shape"], ["q4"], name="split_heads"),
             n("Transpose", ["q4"], ["q"], name="to_heads", perm=[0, 2, 1, 3]),
             n("Transpose", ["q4"], ["kt"], name="to_keys", perm=[0, 2, 3, 1]),
             n("MatMul", ["q", "kt"], ["scores"], name="scores"),
             n("Gemm", ["z", "W2", "C"], ["g"], name="gemm", transB=1, alpha=0.5, beta=2.0)]
    inits = [numpy_helper.from_array(a, name) for a, name in ((w1, "W1"), (b1, "b1"), (w2, "W2"), (c, "C"))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), name) for v, name in
              (([0], "zero"), ([64], "sixty_four"), ([-1], "minus_one"), ([B, S, HEADS, 16], "heads_shape"))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H]),
                                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [11, H])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [B, HEADS, S, S]),
                               helper.make_tensor_value_info("g", TensorProto.FLOAT, [11, F])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, dict(W1=w1, b1=b1, W2=w2, C=c)


def per_op_float16(feed, w):
    """The fp16 model's computation in numpy: float16 inputs and weights, float64 sums, each op rounded once."""
    h16 = lambda a: np.asarray(a, np.float64).astype(np.float32).astype(np.float16)  # noqa: E731
    f64 = lambda a: np.asarray(a, np.float16).astype(np.float64)  # noqa: E731
    x, z = h16(feed["x"]), h16(feed["z"])
    h = h16(f64(x) @ f64(h16(w["W1"])))
    p = h16(np.maximum(f64(h) + f64(h16(w["b1"])), 0))
    q = p[:, :, :64].reshape(B, S, HEADS, 16).transpose(0, 2, 1, 3)
    scores = h16(f64(q) @ f64(q).transpose(0, 1, 3, 2))
    g = h16(0.5 * (f64(z) @ f64(h16(w["W2"])).T) + 2.0 * f64(h16(w["C"])))
    return [scores, g]


def run(path, feed, threads=1, level=nee.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = level
    return nee.InferenceSession(str(path), so).run(None, feed)


def ulp16(v):
    """One float16 ulp at |v| (11 significant bits; subnormals' spacing below 2^-14)."""
    v = np.maximum(np.abs(np.asarray(v, np.float64)), 2.0 ** -14)
    return 2.0 ** (np.floor(np.log2(v)) - 10)


def test_fp16_model_on_the_float16_weight_kernel(tmp_path):
    src, weights = float32_model(tmp_path / "model.onnx")
    out = tmp_path / "model_fp16.onnx"
    nee.quantize(str(src), str(out), mode="fp16")
    rng = np.random.default_rng(42)
    feed = {"x": rng.standard_normal((B, S, H)).astype(np.float32),
            "z": rng.standard_normal((11, H)).astype(np.float32)}

    # The optimized graph keeps float16 MatMul / Gemm and their float16 weights where the kernel runs.
    opt = tmp_path / "opt.onnx"
    r = nee_cli("optimize", out, "-o", opt, "--opt-level", "2")
    assert r.returncode == 0, r.stderr
    om = onnx.load(str(opt))
    inits = {i.name: i.data_type for i in om.graph.initializer}
    gemms = [nd for nd in om.graph.node if nd.op_type in ("MatMul", "Gemm")]
    assert len(gemms) == 3
    want_type = TensorProto.FLOAT16 if cpu_has_f16_gemm() else TensorProto.FLOAT
    assert all(inits[i] == want_type for nd in gemms for i in nd.input if i in inits), inits

    got = run(out, feed)
    # The same bits at 1, 2 and 3 threads.
    for threads in (2, 3):
        for a, b in zip(run(out, feed, threads), got):
            assert a.tobytes() == b.tobytes()

    # numpy's per-op rounding: within one float16 ulp of each element where only the last op's sum order
    # differs (g); two of the output's scale for the scores, whose inputs went through two roundings.
    want = per_op_float16(feed, weights)
    for name, g, w, ulps in (("scores", got[0], want[0], 2), ("g", got[1], want[1], 1)):
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        assert g.shape == w.shape
        tol = ulps * ulp16(np.maximum(np.abs(g64), np.abs(w64))) if ulps == 1 else ulps * ulp16(np.abs(w64).max())
        assert np.all(np.abs(g64 - w64) <= tol), (name, np.abs(g64 - w64).max())
        assert np.mean(g64 == w64) >= 0.9, (name, np.mean(g64 == w64))

    # The reference kernels (optimizations off) compute the same per-op rounding.
    ref = run(out, feed, level=nee.GraphOptimizationLevel.ORT_DISABLE_ALL)
    for g, w in zip(got, ref):
        assert np.abs(g.astype(np.float64) - w).max() <= 2 * ulp16(np.abs(w).max())

    # ONNX Runtime on the same fp16 model (its NchwcTransformer crashes on some float16 MatMul graphs:
    # docs/quantization.md's caveat).
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["NchwcTransformer"])
    for g, w in zip(got, sess.run(None, feed)):
        assert np.abs(g.astype(np.float64) - w).max() <= 2 * ulp16(np.abs(w).max())

    # The float32 model: float16's precision through three roundings of the inputs, weights and outputs.
    f32 = run(src, feed)
    for g, w in zip(got, f32):
        assert np.abs(g.astype(np.float64) - w).max() <= 4e-3 * np.abs(w).max()
