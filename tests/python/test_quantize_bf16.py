"""`nee quantize --mode bf16` (src/opt/quantize_narrow_float.cc) and the widen-narrow-float pass that
runs float16 / bfloat16 graphs on nee's float32 kernels (src/opt/widen_narrow_float.cc).

Oracles, each independent of nee:
  - onnx's reference evaluator running nee's bf16 / fp16 model (it computes each op in the narrow
    type, rounding each op's output: the spec), and numpy with ml_dtypes evaluating the same per-op
    rounding; ONNX Runtime 1.32 has no CPU kernel for bfloat16 MatMul, so it only checks fp16 models;
  - the float32 model, within what bfloat16's 8 significant bits allow (2^-8 = 3.9e-3 relative per
    rounding, a few layers: 3e-2 of the output's scale);
  - onnx.checker (full check) on every written model.
The widening pass (and, on CPUs with AVX512-BF16, the bfloat16 MatMul kernel it leaves bfloat16
MatMuls to) is checked against nee's reference kernels (optimizations off) on the same narrow model:
both round each op's output once, so they agree up to float32 accumulation order (a sum that lands
next to a rounding boundary may round the other way: at most one narrow ulp, rarely).
"""
import json
import os

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

from cli_util import nee_cli

BF16 = ml_dtypes.bfloat16


def cpu_has_f16_gemm():
    """Whether nee's float16-weight MatMul/Gemm kernel runs here (the AVX2 level, with F16C): float16 MatMul
    and Gemm then stay float16. NEE_MAX_ISA=portable hides it."""
    if os.environ.get("NEE_MAX_ISA") == "portable":
        return False
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return any(line.startswith("flags") and {"avx2", "fma", "f16c"} <= set(line.split()) for line in f)


def cpu_has_avx512_bf16():
    """Whether nee's bfloat16 MatMul/Gemm/Conv kernels (vdpbf16ps) run here: those nodes then stay bfloat16.
    NEE_MAX_ISA=avx2 or portable hides AVX-512, AVX512-BF16 included."""
    if os.environ.get("NEE_MAX_ISA") in ("avx2", "portable"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and "avx512_bf16" in line.split() for line in f)
    except OSError:
        return False


def nee_run(path, feed, level=None, threads=1):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    if level is not None:
        so.graph_optimization_level = level
    return nee.InferenceSession(str(path), so).run(None, feed)


def mlp_model(path, opset=22):
    """x[4,16] -> MatMul -> Add -> Relu -> MatMul -> Add -> (Softmax, Sigmoid * 1e6): float32."""
    rng = np.random.default_rng(3)
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(f(16, 32), "W1"), numpy_helper.from_array(f(32), "b1"),
             numpy_helper.from_array(f(32, 8), "W2"), numpy_helper.from_array(f(8), "b2"),
             numpy_helper.from_array(np.array(1.0e6, dtype=np.float32), "big")]  # beyond float16's range
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W1"], ["h1"], name="fc1"), n("Add", ["h1", "b1"], ["a1"], name="bias1"),
             n("Relu", ["a1"], ["r1"], name="relu"), n("MatMul", ["r1", "W2"], ["h2"], name="fc2"),
             n("Add", ["h2", "b2"], ["a2"], name="bias2"), n("Softmax", ["a2"], ["prob"], name="softmax", axis=-1),
             n("Sigmoid", ["a2"], ["s"], name="sigmoid"), n("Mul", ["s", "big"], ["scaled"], name="scale")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [4, 8]),
                               helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [4, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def conv_model(path, opset):
    """x[1,3,8,8] -> Conv(pads 1) -> Relu -> GlobalAveragePool: float32."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "B")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"], name="relu"),
             n("GlobalAveragePool", ["r"], ["y"], name="pool")]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def narrow_ulp(values, dtype):
    """The narrow type's ulp at |values| (bits of precision: float16 11, bfloat16 8)."""
    bits = 8 if dtype == BF16 else 11
    mag = np.maximum(np.abs(values.astype(np.float64)), 2.0 ** -14)
    return 2.0 ** (np.floor(np.log2(mag)) - (bits - 1))


def init_values(model, name):
    init = next(i for i in model.graph.initializer if i.name == name)
    return numpy_helper.to_array(init)


# (1) conversion: io types kept, weights bfloat16 (no saturation), the spec's per-op rounding.
def test_bf16_conversion_matches_the_reference_evaluator_and_numpy(tmp_path):
    src = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "bf16.onnx"
    report = nee.quantize(str(src), str(out), mode="bf16")
    assert "8 nodes computing in bfloat16" in report and "saturated" not in report
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    src_m = onnx.load(str(src))
    io = lambda mm: [(v.name, v.type.tensor_type.elem_type) for v in list(mm.graph.input) + list(mm.graph.output)]  # noqa: E731
    assert io(m) == io(src_m)
    assert {i.data_type for i in m.graph.initializer} == {TensorProto.BFLOAT16}
    # Round to nearest even, and 1e6 is in range (bfloat16 has float32's exponent).
    for name in ("W1", "b1", "W2", "b2", "big"):
        want = numpy_helper.to_array(next(i for i in src_m.graph.initializer if i.name == name)).astype(BF16)
        got = init_values(m, name)
        assert got.dtype == BF16 and np.array_equal(got.view(np.uint16), want.view(np.uint16)), name
    assert float(init_values(m, "big")) == 999424.0

    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
    ref = ReferenceEvaluator(str(out)).run(None, {"x": x})
    # numpy + ml_dtypes: each op in float64 on bfloat16 inputs, its output rounded to bfloat16.
    w = {k: init_values(m, k).astype(np.float64) for k in ("W1", "b1", "W2", "b2", "big")}
    r = lambda v: v.astype(np.float32).astype(BF16).astype(np.float64)  # noqa: E731
    xb = r(x)
    a2 = r(r(np.maximum(r(r(xb @ w["W1"]) + w["b1"]), 0) @ w["W2"]) + w["b2"])
    e = np.exp(a2 - a2.max(axis=-1, keepdims=True))
    numpy_outs = [r(e / e.sum(axis=-1, keepdims=True)), r(r(1 / (1 + np.exp(-a2))) * w["big"])]
    for level in (nee.GraphOptimizationLevel.ORT_DISABLE_ALL, nee.GraphOptimizationLevel.ORT_ENABLE_ALL):
        got = nee_run(out, {"x": x}, level)
        for g, rf, npy in zip(got, ref, numpy_outs):
            assert g.dtype == np.float32 and g.shape == rf.shape
            # Accumulation order may move a sum across a rounding boundary: a couple of bfloat16 ulps
            # of the output's scale.
            tol = 2 * narrow_ulp(np.abs(rf).max(), BF16)
            assert np.abs(g - rf).max() <= tol, (level, np.abs(g - rf).max(), tol)
            assert np.abs(g - npy).max() <= tol, (level, np.abs(g - npy).max(), tol)
    # Against the float32 model: bfloat16's precision, a few roundings deep.
    want = nee_run(src, {"x": x})
    for g, f in zip(nee_run(out, {"x": x}), want):
        rel = np.abs(g - f).max() / np.abs(f).max()
        print(f"bf16 vs fp32: max error / max |y| = {rel:.2e}")
        assert rel < 3e-2


# (2) the op's declaration decides, and Conv allows bfloat16 from opset 22 only: a model at an older
# opset is converted to 22 first when that lets more nodes compute in bfloat16 (the Conv here), and
# keeps its opset when it does not (the MLP at 13: MatMul, Add, Relu, Softmax take bfloat16 from 13).
def default_opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def test_bf16_follows_type_constraints_at_the_opset(tmp_path):
    x = np.random.default_rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)
    for opset in (17, 22):
        src = conv_model(tmp_path / f"conv{opset}.onnx", opset)
        out = tmp_path / f"conv{opset}_bf16.onnx"
        report = nee.quantize(str(src), str(out), mode="bf16")
        m = onnx.load(str(out))
        onnx.checker.check_model(m, full_check=True)
        types = {i.name: i.data_type for i in m.graph.initializer}
        assert types["W"] == TensorProto.BFLOAT16 and types["B"] == TensorProto.BFLOAT16, opset
        assert default_opset(m) == 22
        assert [n.op_type for n in m.graph.node].count("Cast") == 2, opset  # the input's and the output's
        params = json.loads({p.key: p.value for p in m.metadata_props}["nee.lineage.1"])["parameters"]
        if opset == 17:
            assert "opset 17 -> 22 first, where Conv and the pools take bfloat16" in report
            assert params["opset_upgraded"] == {"from": 17, "to": 22}
        else:
            assert "opset" not in report and "opset_upgraded" not in params
        ref = ReferenceEvaluator(str(out)).run(None, {"x": x})[0]
        for level in (nee.GraphOptimizationLevel.ORT_DISABLE_ALL, nee.GraphOptimizationLevel.ORT_ENABLE_ALL):
            got = nee_run(out, {"x": x}, level)[0]
            assert np.abs(got - ref).max() <= 2 * narrow_ulp(np.abs(ref).max(), BF16), (opset, level)


def test_bf16_keeps_an_opset_that_already_allows_it(tmp_path):
    src = mlp_model(tmp_path / "mlp13.onnx", opset=13)
    out = tmp_path / "mlp13_bf16.onnx"
    report = nee.quantize(str(src), str(out), mode="bf16")
    assert "opset" not in report
    m = onnx.load(str(out))
    assert default_opset(m) == 13 and TensorProto.BFLOAT16 in {i.data_type for i in m.graph.initializer}


# Converting ReduceMean-13 to 18 turns its axes attribute into a Constant input, which allows bfloat16 at any
# opset: a node the conversion adds is no reason to convert (nothing original gains bfloat16 from 17 to 22).
def test_bf16_does_not_count_nodes_the_conversion_adds(tmp_path):
    n = helper.make_node
    nodes = [n("ReduceMean", ["x"], ["m"], name="mean", axes=[-1], keepdims=1), n("Sub", ["x", "m"], ["y"], name="sub")]
    graph = helper.make_graph(nodes, "mean", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    src = tmp_path / "mean17.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    out = tmp_path / "mean17_bf16.onnx"
    report = nee.quantize(str(src), str(out), mode="bf16")
    assert "opset" not in report and default_opset(onnx.load(str(out))) == 17


# (3) CLI, lineage record, errors.
def test_bf16_cli_and_lineage(tmp_path):
    src = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "bf16.onnx"
    r = nee_cli("quantize", src, "-o", out, "--mode", "bf16", "--exclude", "scale")
    assert r.returncode == 0, r.stderr
    assert "7 nodes computing in bfloat16" in r.stdout and "casts at bfloat16/float32 boundaries" in r.stdout
    props = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    params = json.loads(props["nee.lineage.1"])["parameters"]
    assert params["mode"] == "bf16" and params["keep_io_types"] is True and params["excluded_nodes"] == ["scale"]
    assert "fc1" in params["nodes"] and "scale" not in params["nodes"]
    bad = nee_cli("quantize", src, "-o", tmp_path / "x.onnx", "--mode", "bf8")
    assert bad.returncode == 1 and "expected dynamic, static, fp16, bf16 or int4" in bad.stderr
    assert not (tmp_path / "x.onnx").exists()


# (4) the widening pass: the same values as the reference kernels, for float16 and bfloat16.
def widened_and_reference(path, feed):
    ref = nee_run(path, feed, nee.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ref, [nee_run(path, feed, nee.GraphOptimizationLevel.ORT_ENABLE_ALL, threads) for threads in (1, 2)]


def expect_same_up_to_accumulation_order(got, want, dtype, what):
    # Each op rounds once in both; a float32 sum in another order can land on the other side of a
    # rounding boundary, one narrow ulp, which the next layer carries on: 2 ulps of the output's scale,
    # and nearly every element bit for bit equal.
    assert got.dtype == want.dtype and got.shape == want.shape, what
    tol = 2 * narrow_ulp(np.abs(want).max(), dtype)
    assert np.abs(got - want).max() <= tol, (what, np.abs(got - want).max(), tol)
    assert np.mean(got == want) >= 0.9, (what, np.mean(got == want))


def test_widening_matches_the_reference_kernels(tmp_path):
    x = np.random.default_rng(7).standard_normal((4, 16)).astype(np.float32)
    xc = np.random.default_rng(8).standard_normal((1, 3, 8, 8)).astype(np.float32)
    for mode, dtype in (("fp16", np.float16), ("bf16", BF16)):
        for name, src, feed in (("mlp", mlp_model(tmp_path / "mlp.onnx"), {"x": x}),
                                ("conv", conv_model(tmp_path / "conv.onnx", 22), {"x": xc})):
            out = tmp_path / f"{name}_{mode}.onnx"
            nee.quantize(str(src), str(out), mode=mode)
            # The pass's rewrite, as nee optimize writes it: float32 MatMul/Conv reading widened weights.
            opt = tmp_path / f"{name}_{mode}_opt.onnx"
            r = nee_cli("optimize", out, "-o", opt, "--opt-level", "2")
            assert r.returncode == 0, r.stderr
            om = onnx.load(str(opt))
            onnx.checker.check_model(om)
            heavy = [nd for nd in om.graph.node if nd.op_type in ("MatMul", "Conv", "FusedMatMul", "FusedConv")]
            # With AVX512-BF16, bfloat16 MatMuls and Convs stay bfloat16 (ep/cpu/bf16_matmul_fast.cc,
            # conv_bf16.cc; the Conv + Relu as ai.nee FusedConv) and read bfloat16 weights; at the AVX2
            # level float16 MatMuls stay float16 (ep/cpu/f16_matmul_fast.cc); the rest is widened.
            assert heavy
            for nd in heavy:
                native = cpu_has_avx512_bf16() if mode == "bf16" else nd.op_type == "MatMul" and cpu_has_f16_gemm()
                narrow_type = TensorProto.BFLOAT16 if mode == "bf16" else TensorProto.FLOAT16
                weight_type = narrow_type if native else TensorProto.FLOAT
                assert all(i.data_type == weight_type for i in om.graph.initializer if i.name in nd.input), nd.name
            ref, widened = widened_and_reference(out, feed)
            for threads, got in zip((1, 2), widened):
                for g, w in zip(got, ref):
                    expect_same_up_to_accumulation_order(g, w, dtype, f"{name} {mode} {threads} threads")
            # The reference evaluator (the spec) on the same narrow model agrees as closely.
            spec = ReferenceEvaluator(str(out)).run(None, feed)
            for g, s in zip(widened[0], spec):
                tol = 2 * narrow_ulp(np.abs(s).max(), dtype)
                assert np.abs(g - s).max() <= tol, (name, mode, np.abs(g - s).max(), tol)


def test_widened_fp16_agrees_with_onnxruntime(tmp_path):
    # ONNX Runtime also rounds each op's output to float16 (its CPU provider casts around float32 kernels
    # or runs float16 kernels): the same values up to accumulation order.
    x = np.random.default_rng(9).standard_normal((4, 16)).astype(np.float32)
    out = tmp_path / "mlp_fp16.onnx"
    nee.quantize(str(mlp_model(tmp_path / "mlp.onnx")), str(out), mode="fp16")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    want = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = nee_run(out, {"x": x})
    for g, w in zip(got, want):
        tol = 2 * narrow_ulp(np.abs(w).max(), np.float16)
        assert np.abs(g - w).max() <= tol, (np.abs(g - w).max(), tol)


# (5) bfloat16 Gemm and batched MatMul through a session: on AVX512-BF16 CPUs they stay bfloat16 and run
# the vdpbf16ps kernel (ep/cpu/bf16_gemm.cc); elsewhere they are widened. Either way each output is the
# float32 sum rounded once to bfloat16: numpy with ml_dtypes (float64 sums of the bfloat16 values, rounded
# once) is the oracle, and 1, 2 and 3 threads give the same bits.
def bf16_gemm_model(path):
    """x[37,50] bf16 -> Gemm(W[45,50]^T, C[45], alpha .5, beta 2) -> t[37,45]; t @ V[3,45,19] -> y[3,37,19]."""
    rng = np.random.default_rng(11)
    arr = lambda *s: rng.standard_normal(s).astype(BF16)  # noqa: E731
    w, c, v = arr(45, 50), arr(45), arr(3, 45, 19)
    n = helper.make_node
    nodes = [n("Gemm", ["x", "W", "C"], ["t"], name="gemm", transB=1, alpha=0.5, beta=2.0),
             n("MatMul", ["t", "V"], ["y"], name="batched")]
    inits = [numpy_helper.from_array(a, name) for a, name in ((w, "W"), (c, "C"), (v, "V"))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [37, 50])],
                              [helper.make_tensor_value_info("t", TensorProto.BFLOAT16, [37, 45]),
                               helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3, 37, 19])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, w, c, v


def test_bf16_gemm_and_batched_matmul_in_a_session(tmp_path):
    path, w, c, v = bf16_gemm_model(tmp_path / "gemm_bf16.onnx")
    x = np.random.default_rng(12).standard_normal((37, 50)).astype(BF16)
    f64 = lambda a: np.asarray(a).astype(np.float64)  # noqa: E731
    t = (0.5 * (f64(x) @ f64(w).T) + 2.0 * f64(c)).astype(np.float32).astype(BF16)
    want = [t, (f64(t) @ f64(v)).astype(np.float32).astype(BF16)]
    runs = [nee_run(path, {"x": x}, threads=threads) for threads in (1, 2, 3)]
    for got in runs[1:]:
        for g, one in zip(got, runs[0]):
            assert g.view(np.uint16).tobytes() == one.view(np.uint16).tobytes()
    ref = nee_run(path, {"x": x}, nee.GraphOptimizationLevel.ORT_DISABLE_ALL)
    for g, r, wnt in zip(runs[0], ref, want):
        assert g.dtype == BF16 and g.shape == wnt.shape
        g32, w32 = g.astype(np.float32), wnt.astype(np.float32)
        # A sum next to a rounding boundary may round the other way: one bfloat16 ulp of the element.
        ulp = narrow_ulp(np.maximum(np.abs(g32), np.abs(w32)), BF16)
        assert np.all(np.abs(g32 - w32) <= ulp), np.abs(g32 - w32).max()
        assert np.mean(g32 == w32) >= 0.9
        assert np.all(np.abs(g32 - r.astype(np.float32)) <= narrow_ulp(np.abs(g32), BF16) * 2)
    om_path = tmp_path / "gemm_opt.onnx"
    assert nee_cli("optimize", path, "-o", om_path, "--opt-level", "2").returncode == 0
    ops = [nd.op_type for nd in onnx.load(str(om_path)).graph.node]
    if cpu_has_avx512_bf16():
        assert ops == ["Gemm", "MatMul"]  # bfloat16 throughout, no Casts
    else:
        assert "Cast" in ops  # widened
