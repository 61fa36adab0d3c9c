"""Level-2 graph optimizations: models built with onnx.helper give the same outputs as ONNX Runtime
with nee's optimizations off (level 0) and on (level 99), and the optimized model has fewer nodes.

Node counts come from the C API (nee_session_model_stats counts the session's optimized graph),
read through ctypes from the shared library built next to the Python package."""
import ctypes
import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

F = TensorProto.FLOAT
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make_model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_nee(model, feeds, level):
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(level)
    return nee.InferenceSession(model.SerializeToString(), so).run(None, feeds)


class _Stats(ctypes.Structure):
    _fields_ = [("node_count", ctypes.c_size_t), ("initializer_count", ctypes.c_size_t),
                ("parameter_count", ctypes.c_int64), ("parameter_bytes", ctypes.c_int64)]


@pytest.fixture(scope="module")
def libnee():
    env = os.environ.get("NEE_LIBRARY")
    path = env or os.path.join(_ROOT, "build", "lib", "libnee.so")
    assert os.path.exists(path), f"libnee.so not found at {path} (build first, or set NEE_LIBRARY)"
    lib = ctypes.CDLL(path)
    lib.nee_session_options_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.nee_session_options_create.restype = ctypes.c_void_p
    lib.nee_session_options_set_optimization_level.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.nee_session_options_release.argtypes = [ctypes.c_void_p]
    lib.nee_session_create_from_memory.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                                   ctypes.POINTER(ctypes.c_void_p)]
    lib.nee_session_create_from_memory.restype = ctypes.c_void_p
    lib.nee_session_model_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Stats)]
    lib.nee_session_model_stats.restype = ctypes.c_void_p
    lib.nee_session_release.argtypes = [ctypes.c_void_p]
    return lib


def node_count(lib, model, level):
    options = ctypes.c_void_p()
    assert not lib.nee_session_options_create(ctypes.byref(options))
    lib.nee_session_options_set_optimization_level(options, level)
    data = model.SerializeToString()
    session = ctypes.c_void_p()
    assert not lib.nee_session_create_from_memory(data, len(data), options, ctypes.byref(session))
    stats = _Stats()
    assert not lib.nee_session_model_stats(session, ctypes.byref(stats))
    lib.nee_session_release(session)
    lib.nee_session_options_release(options)
    return stats.node_count


def cnn_model(rng):
    """Conv+BN+Relu twice (the second Conv without bias, groups of 2), Conv+Mul+Add, pooling, Flatten,
    MatMul+Add classifier; an Identity and a Dropout in between, as exporters leave them."""
    def bn(c):
        return {"scale": rng.uniform(0.5, 1.5, c), "shift": rng.normal(0, 0.1, c),
                "mean": rng.normal(0, 0.1, c), "var": rng.uniform(0.5, 2.0, c)}
    inits = {"W1": rng.normal(0, 0.3, (8, 3, 3, 3)), "B1": rng.normal(0, 0.1, 8),
             "W2": rng.normal(0, 0.3, (8, 4, 3, 3)), "W3": rng.normal(0, 0.3, (8, 8, 1, 1)),
             "s3": rng.uniform(0.5, 1.5, (8, 1, 1)), "b3": rng.normal(0, 0.1, (1, 8, 1, 1)),
             "Wfc": rng.normal(0, 0.3, (8, 10)), "bfc": rng.normal(0, 0.1, 10)}
    for i in (1, 2):
        inits.update({f"{k}{i}": v for k, v in bn(8).items()})
    inits = {k: np.asarray(v, np.float32) for k, v in inits.items()}
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "scale1", "shift1", "mean1", "var1"], ["n1"], epsilon=1e-5),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Identity", ["r1"], ["i1"]),
        helper.make_node("Conv", ["i1", "W2"], ["c2"], pads=[1, 1, 1, 1], group=2, strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c2", "scale2", "shift2", "mean2", "var2"], ["n2"]),
        helper.make_node("Relu", ["n2"], ["r2"]),
        helper.make_node("Conv", ["r2", "W3"], ["c3"]),
        helper.make_node("Mul", ["c3", "s3"], ["m3"]),
        helper.make_node("Add", ["m3", "b3"], ["a3"]),
        helper.make_node("GlobalAveragePool", ["a3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Dropout", ["f"], ["d"]),
        helper.make_node("MatMul", ["d", "Wfc"], ["mm"]),
        helper.make_node("Add", ["mm", "bfc"], ["logits"]),
    ]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 3, 16, 16])],
                       [helper.make_tensor_value_info("logits", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (2, 3, 16, 16)).astype(np.float32)}


def mlp_model(rng, sizes=(64, 128, 128, 10)):
    nodes, inits = [], {}
    prev = "x"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        inits[f"W{i}"] = rng.normal(0, 1 / np.sqrt(k), (k, n)).astype(np.float32)
        inits[f"b{i}"] = rng.normal(0, 0.1, n).astype(np.float32)
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"mm{i}"]))
        # The bias first on odd layers: Add is commutative.
        add_in = [f"mm{i}", f"b{i}"] if i % 2 == 0 else [f"b{i}", f"mm{i}"]
        last = i == len(sizes) - 2
        nodes.append(helper.make_node("Add", add_in, ["y" if last else f"a{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"a{i}"], [f"h{i}"]))
            prev = f"h{i}"
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", sizes[0]])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (5, sizes[0])).astype(np.float32)}


def noops_model(rng):
    """Transposes that cancel and that merge, Unsqueeze/Squeeze, a same-type Cast, a no-op Reshape,
    and an Identity whose output is the graph output."""
    inits = {"axes": np.array([0], np.int64), "shape": np.array([-1, 3, 4], np.int64)}
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t1"], perm=[2, 0, 1]),
        helper.make_node("Transpose", ["t1"], ["t2"], perm=[1, 2, 0]),
        helper.make_node("Unsqueeze", ["t2", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
        helper.make_node("Cast", ["s"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["c", "shape"], ["rs"]),
        helper.make_node("Transpose", ["rs"], ["t3"], perm=[1, 2, 0]),
        helper.make_node("Transpose", ["t3"], ["t4"], perm=[0, 2, 1]),
        helper.make_node("Neg", ["t4"], ["n"]),
        helper.make_node("Identity", ["n"], ["y"]),
    ]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 3, 4])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (2, 3, 4)).astype(np.float32)}


def conv_activations_model(rng):
    """A chain of Convs, each followed by an activation FusedConv takes: Relu6 as Clip(0, 6) (MobileNetV2),
    LeakyRelu, HardSigmoid, SiLU (x * Sigmoid(x)), Tanh, Sigmoid, HardSwish; the last Conv's output is
    also a graph output, so its Relu stays apart."""
    acts = [
        lambda i, o: [helper.make_node("Clip", [i, "zero", "six"], [o])],
        lambda i, o: [helper.make_node("LeakyRelu", [i], [o], alpha=0.2)],
        lambda i, o: [helper.make_node("HardSigmoid", [i], [o], alpha=0.3, beta=0.6)],
        lambda i, o: [helper.make_node("Sigmoid", [i], [o + "_s"]), helper.make_node("Mul", [o + "_s", i], [o])],
        lambda i, o: [helper.make_node("Tanh", [i], [o])],
        lambda i, o: [helper.make_node("Sigmoid", [i], [o])],
        lambda i, o: [helper.make_node("HardSwish", [i], [o])],
    ]
    inits = {"zero": np.float32(0), "six": np.float32(6)}
    nodes, prev = [], "x"
    for k, act in enumerate(acts):
        inits[f"W{k}"] = rng.normal(0, 0.5, (6, 6, 3, 3)).astype(np.float32)
        inits[f"B{k}"] = rng.normal(0, 0.5, 6).astype(np.float32)
        nodes.append(helper.make_node("Conv", [prev, f"W{k}", f"B{k}"], [f"c{k}"], pads=[1, 1, 1, 1]))
        nodes += act(f"c{k}", f"a{k}")
        prev = f"a{k}"
    inits["Wl"] = rng.normal(0, 0.5, (6, 6, 1, 1)).astype(np.float32)
    nodes += [helper.make_node("Conv", [prev, "Wl"], ["cl"]), helper.make_node("Relu", ["cl"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 6, 10, 10])],
                       [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("cl", F, None)],
                       inits)
    return model, {"x": rng.normal(0, 2, (2, 6, 10, 10)).astype(np.float32)}


def written_out_hard_swish_model(rng):
    """A PP-OCR-style block at opset 12 (no HardSwish op yet), each Conv followed by HardSwish written out as
    PaddlePaddle and older PyTorch exports write it: (x * Clip(x + 3, 0, 6)) / 6, x * (Clip(x + 3, 0, 6) / 6),
    and the division as a product with 1/6, and as PyTorch writes it before opset 14, x * HardSigmoid(x, 1/6,
    0.5); a 3x3 conv, a pointwise expansion, a depthwise conv, a projection and one more pointwise conv, with
    channel counts that the blocked layout takes."""
    n = helper.make_node
    forms = [
        lambda i, o: [n("Add", [i, "three"], [o + "_s"]), n("Clip", [o + "_s", "zero", "six"], [o + "_c"]),
                      n("Mul", [i, o + "_c"], [o + "_m"]), n("Div", [o + "_m", "six"], [o])],
        lambda i, o: [n("Add", ["three", i], [o + "_s"]), n("Clip", [o + "_s", "zero", "six"], [o + "_c"]),
                      n("Div", [o + "_c", "six"], [o + "_d"]), n("Mul", [o + "_d", i], [o])],
        lambda i, o: [n("Add", [i, "three"], [o + "_s"]), n("Clip", [o + "_s", "zero", "six"], [o + "_c"]),
                      n("Mul", [o + "_c", i], [o + "_m"]), n("Mul", ["sixth", o + "_m"], [o])],
        # PyTorch's nn.Hardswish before opset 14.
        lambda i, o: [n("HardSigmoid", [i], [o + "_g"], alpha=1 / 6), n("Mul", [i, o + "_g"], [o])],
    ]
    inits = {"three": np.float32(3), "zero": np.float32(0), "six": np.float32(6), "sixth": np.float32(1 / 6)}
    convs = [(16, 8, 3, 1), (32, 16, 1, 1), (32, 1, 3, 32), (16, 32, 1, 1), (16, 16, 1, 1)]  # (out, in/group, k, group)
    nodes, prev = [], "x"
    for k, (m, c, kernel, group) in enumerate(convs):
        inits[f"W{k}"] = rng.normal(0, 1.5 / np.sqrt(c * kernel * kernel), (m, c, kernel, kernel)).astype(np.float32)
        inits[f"B{k}"] = rng.normal(0, 0.5, m).astype(np.float32)
        pad = kernel // 2
        nodes.append(n("Conv", [prev, f"W{k}", f"B{k}"], [f"c{k}"], pads=[pad] * 4, group=group))
        if k < len(convs) - 1:
            nodes += forms[k % len(forms)](f"c{k}", f"a{k}")
            prev = f"a{k}"
    nodes[-1].output[0] = "y"
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 8, 12, 12])],
                       [helper.make_tensor_value_info("y", F, None)], inits, opset=12)
    return model, {"x": rng.normal(0, 2, (2, 8, 12, 12)).astype(np.float32)}


def resnet_block_model(rng):
    """Two ResNet basic blocks: Conv (no bias) + BatchNormalization + Relu, Conv + BatchNormalization,
    the residual Add, Relu; the second block's residual sum is also a graph output."""
    c = 8
    inits, nodes = {}, []
    prev = "x"
    for blk in (0, 1):
        for k in (0, 1):
            p = f"b{blk}c{k}"
            inits[f"{p}_W"] = rng.normal(0, 0.3, (c, c, 3, 3)).astype(np.float32)
            inits.update({f"{p}_{n}": v.astype(np.float32) for n, v in
                          (("scale", rng.uniform(0.5, 1.5, c)), ("shift", rng.normal(0, 0.1, c)),
                           ("mean", rng.normal(0, 0.1, c)), ("var", rng.uniform(0.5, 2.0, c)))})
            src = prev if k == 0 else f"b{blk}r0"
            nodes += [helper.make_node("Conv", [src, f"{p}_W"], [f"{p}_c"], pads=[1, 1, 1, 1]),
                      helper.make_node("BatchNormalization", [f"{p}_c"] + [f"{p}_{n}" for n in
                                       ("scale", "shift", "mean", "var")], [f"{p}_n"])]
            if k == 0:
                nodes.append(helper.make_node("Relu", [f"{p}_n"], [f"b{blk}r0"]))
        nodes += [helper.make_node("Add", [f"b{blk}c1_n", prev], [f"b{blk}sum"]),
                  helper.make_node("Relu", [f"b{blk}sum"], [f"b{blk}out"])]
        prev = f"b{blk}out"
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", c, 12, 12])],
                       [helper.make_tensor_value_info("b1out", F, None), helper.make_tensor_value_info("b1sum", F, None)],
                       inits)
    return model, {"x": rng.normal(0, 1, (2, c, 12, 12)).astype(np.float32)}


def _ln_nodes(prefix, x, out):
    return [helper.make_node("LayerNormalization", [x, f"{prefix}_g", f"{prefix}_b"], [out], epsilon=1e-5)]


def transformer_model(rng, hidden=32, ffn=64):
    """Two BERT-like feed-forward blocks on [batch, seq, hidden]: MatMul + bias + GELU (erf form, as torch
    exports nn.GELU before opset 20; the second block the tanh form of GPT-2's gelu_new), MatMul + bias,
    residual Add + LayerNormalization; the first residual sum is read again (pre-LN style)."""
    c = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5),
         "three": np.float32(3), "k": np.float32(0.044715), "s2pi": np.float32(np.sqrt(2 / np.pi))}
    inits = dict(c)
    for blk in (0, 1):
        inits[f"W1_{blk}"] = rng.normal(0, 1 / np.sqrt(hidden), (hidden, ffn)).astype(np.float32)
        inits[f"b1_{blk}"] = rng.normal(0, 0.1, ffn).astype(np.float32)
        inits[f"W2_{blk}"] = rng.normal(0, 1 / np.sqrt(ffn), (ffn, hidden)).astype(np.float32)
        inits[f"b2_{blk}"] = rng.normal(0, 0.1, hidden).astype(np.float32)
        inits[f"ln{blk}_g"] = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
        inits[f"ln{blk}_b"] = rng.normal(0, 0.1, hidden).astype(np.float32)
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "W1_0"], ["h0"]), n("Add", ["h0", "b1_0"], ["hb0"]),
        n("Div", ["hb0", "sqrt2"], ["d0"]), n("Erf", ["d0"], ["e0"]), n("Add", ["e0", "one"], ["a0"]),
        n("Mul", ["hb0", "a0"], ["m0"]), n("Mul", ["m0", "half"], ["g0"]),
        n("MatMul", ["g0", "W2_0"], ["o0"]), n("Add", ["o0", "b2_0"], ["ob0"]),
        n("Add", ["ob0", "x"], ["r0"]), *_ln_nodes("ln0", "r0", "y0"),
        n("MatMul", ["y0", "W1_1"], ["h1"]), n("Add", ["b1_1", "h1"], ["hb1"]),
        n("Pow", ["hb1", "three"], ["p1"]), n("Mul", ["p1", "k"], ["kp1"]), n("Add", ["hb1", "kp1"], ["s1"]),
        n("Mul", ["s1", "s2pi"], ["u1"]), n("Tanh", ["u1"], ["t1"]), n("Add", ["t1", "one"], ["a1"]),
        n("Mul", ["hb1", "half"], ["hh1"]), n("Mul", ["hh1", "a1"], ["g1"]),
        n("MatMul", ["g1", "W2_1"], ["o1"]), n("Add", ["o1", "b2_1"], ["ob1"]),
        n("Add", ["ob1", "r0"], ["r1"]), *_ln_nodes("ln1", "r1", "y"),
    ]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq", hidden])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (2, 5, hidden)).astype(np.float32)}


@pytest.mark.parametrize("build", [cnn_model, mlp_model, noops_model, conv_activations_model, resnet_block_model,
                                   transformer_model, written_out_hard_swish_model])
def test_levels_agree_with_onnxruntime_and_remove_nodes(build, libnee):
    rng = np.random.default_rng(7)
    model, feeds = build(rng)
    want = run_ort(model, feeds)[0]
    for level in (0, 1, 99):
        got = run_nee(model, feeds, level)
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5, err_msg=f"level {level}")
    before, after = node_count(libnee, model, 0), node_count(libnee, model, 99)
    assert before == len(model.graph.node)
    assert after < before


def test_expected_node_counts(libnee):
    rng = np.random.default_rng(3)
    # CNN: FusedConv (Conv+BN+Relu) twice, Conv, GlobalAveragePool, Flatten, Gemm.
    assert node_count(libnee, cnn_model(rng)[0], 99) == 6
    # MLP: three Gemm and two Relu.
    assert node_count(libnee, mlp_model(rng)[0], 99) == 5
    # Relu, one merged Transpose, Neg (renamed to the graph output).
    assert node_count(libnee, noops_model(rng)[0], 99) == 3
    # Seven FusedConv, then the Conv whose output is also a graph output and its Relu.
    assert node_count(libnee, conv_activations_model(rng)[0], 99) == 9
    # Five convs, the first four with their HardSwish (fourteen nodes) fused: five FusedConvs, or (AVX2 and up)
    # some of them in the blocked layout between a ToBlocked and a FromBlocked. A HardSwish left unfused would
    # leave two or four nodes more.
    assert node_count(libnee, written_out_hard_swish_model(rng)[0], 99) <= 7
    # Per block: FusedConv (Conv+BN+Relu), FusedConv (Conv+BN+Add+Relu); the second block's sum is a graph
    # output, so its Relu stays apart.
    assert node_count(libnee, resnet_block_model(rng)[0], 99) == 5
    # Per block: ai.nee FusedMatMul (MatMul + BiasGelu / FastGelu), MatMul, SkipLayerNormalization (with the
    # second bias).
    assert node_count(libnee, transformer_model(rng)[0], 99) == 6


NEE_BIN = os.environ.get("NEE_BIN", os.path.join(_ROOT, "build", "bin", "nee"))


def test_nee_optimize_writes_a_model_onnxruntime_runs_and_nee_loads_as_is(tmp_path, libnee):
    """`nee optimize` writes the fused graph as standard ONNX: ONNX Runtime runs it with the original's
    outputs, it records the level, and nee loads it without optimizing again (same node count at level 0)."""
    import subprocess

    import onnx

    rng = np.random.default_rng(5)
    model, feeds = resnet_block_model(rng)
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(src))
    r = subprocess.run([NEE_BIN, "optimize", str(src), "-o", str(dst)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "fuse-conv-activation" in r.stdout and "changed" in r.stdout
    optimized = onnx.load(str(dst))  # (ONNX Runtime loading and running it below is the validity check)
    assert {p.key: p.value for p in optimized.metadata_props}.get("nee.optimization_level") == "99"
    assert any(n.op_type == "FusedConv" and n.domain == "com.microsoft" for n in optimized.graph.node)
    want = run_ort(model, feeds)
    got_ort = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, feeds)
    got_nee = nee.InferenceSession(str(dst)).run(None, feeds)
    for w, a, b in zip(want, got_ort, got_nee):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b, w, rtol=1e-4, atol=1e-5)
    # Loaded as written: nothing left to fuse, and a level-0 session sees the fused graph too.
    assert node_count(libnee, optimized, 0) == node_count(libnee, optimized, 99) == len(optimized.graph.node)
    # A bad level or a missing file is a usage or input error, not a crash.
    bad = subprocess.run([NEE_BIN, "optimize", str(tmp_path / "missing.onnx"), "-o", str(dst)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "missing.onnx" in bad.stderr
    usage = subprocess.run([NEE_BIN, "optimize", str(src)], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "-o" in usage.stderr
