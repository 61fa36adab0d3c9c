"""Constants a kernel packed are dropped by the session (KernelContext::DropConstantInput): the
outputs stay those of ONNX Runtime, bit for bit the same from run to run, across input shapes and
thread counts, when a constant is shared by a packing and a non-packing reader, when it is also a
graph output, and when two sessions are made from the same file."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

F = TensorProto.FLOAT
D = 64


def build_model():
    rng = np.random.default_rng(7)
    w = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    inits = {
        "Wq": w(D, D), "Wk": w(D, D), "Wv": w(D, D), "bq": w(D),
        "Wshared": w(D, D),      # MatMul (packs) and Gather (reads in place)
        "Wout": w(D, 32),        # MatMul (packs) and a graph output
        "Wgemm": w(D, D),        # Gemm transB=0
        "WgemmT": w(D, D),       # Gemm transB=1 (kept: a one-row A reads it in place)
        "Wvec": w(D, 16),        # MatMul with a 1-D A
        "Wffn": w(D, 4 * D), "bffn": w(4 * D), "Wffn2": w(4 * D, D),
        "idx": np.array([1, 3], dtype=np.int64),
        "scale": np.array(1.0 / np.sqrt(D), dtype=np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["X", "Wq"], ["q0"]),
        helper.make_node("Add", ["q0", "bq"], ["q"]),
        helper.make_node("MatMul", ["X", "Wk"], ["k"]),
        helper.make_node("MatMul", ["X", "Wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["att"]),
        helper.make_node("MatMul", ["att", "Wshared"], ["h0"]),
        helper.make_node("Gemm", ["h0", "Wgemm"], ["h1"]),
        helper.make_node("Gemm", ["h1", "WgemmT"], ["h2"], transB=1),
        helper.make_node("MatMul", ["h2", "Wffn"], ["f0"]),
        helper.make_node("Add", ["f0", "bffn"], ["f1"]),
        helper.make_node("Relu", ["f1"], ["f2"]),
        helper.make_node("MatMul", ["f2", "Wffn2"], ["f3"]),
        helper.make_node("MatMul", ["f3", "Wout"], ["Y"]),
        helper.make_node("Gather", ["Wshared", "idx"], ["G"], axis=0),
        helper.make_node("MatMul", ["vec", "Wvec"], ["V"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("X", F, ["S", D]), helper.make_tensor_value_info("vec", F, [D])],
        [helper.make_tensor_value_info("Y", F, ["S", 32]), helper.make_tensor_value_info("G", F, [2, D]),
         helper.make_tensor_value_info("V", F, [16]), helper.make_tensor_value_info("Wout", F, [D, 32])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, inits


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    model, inits = build_model()
    path = str(tmp_path_factory.mktemp("drop") / "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path, inits


def feeds(rows, seed):
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((rows, D)).astype(np.float32),
            "vec": rng.standard_normal(D).astype(np.float32)}


def nee_session(path, threads):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    return nee.InferenceSession(path, so)


def test_dropped_constants_keep_outputs(model_file):
    path, inits = model_file
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    cases = [feeds(rows, seed) for rows, seed in ((8, 1), (1, 2), (8, 1), (24, 3), (1, 2))]
    first = {}
    for threads in (1, 2):
        sessions = [nee_session(path, threads), nee_session(path, threads)]  # twice from the same file
        for sess in sessions:
            for i, feed in enumerate(cases):
                got = sess.run(None, feed)
                want = ref.run(None, feed)
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
                np.testing.assert_array_equal(got[3], inits["Wout"])  # a graph output is never dropped
                np.testing.assert_array_equal(got[1], inits["Wshared"][[1, 3]])
                key = (feed["X"].shape[0], float(feed["X"][0, 0]))
                if key in first:  # the same feed: the same bits, run after run, whatever the thread count
                    for g, f in zip(got, first[key]):
                        np.testing.assert_array_equal(g, f)
                else:
                    first[key] = got


def test_dropped_constants_from_memory_and_levels(model_file):
    path, _ = model_file
    with open(path, "rb") as f:
        data = f.read()
    feed = feeds(5, 9)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)
    for level in (0, 99):
        so = nee.SessionOptions()
        so.graph_optimization_level = nee.GraphOptimizationLevel(level)
        sess = nee.InferenceSession(data, so)
        for _ in range(2):
            for g, w in zip(sess.run(None, feed), want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def conv_chain_model():
    """Conv (BatchNormalization folded in: a weight the optimizer makes) -> Relu -> 3x3 stride 2 -> depthwise
    3x3 -> 3x3 stride 1 -> Relu -> 1x1, symbolic batch: blocked convs whose packed weights are dropped
    (pointwise, depthwise, AVX2's strided direct conv) or kept (the 3x3 stride-1 conv, which Winograd or
    the direct kernel may take depending on the input's shape)."""
    rng = np.random.default_rng(3)
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    inits = {"W1": w(32, 16, 1, 1), "B1": w(32), "W2": w(32, 32, 3, 3), "W3": w(32, 32, 3, 3),
             "W4": w(16, 32, 1, 1), "W5": w(32, 1, 3, 3), "g": 1 + 0.1 * w(32), "b": w(32), "m": w(32),
             "v": 1 + np.abs(w(32))}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["a"]),
             helper.make_node("BatchNormalization", ["a", "g", "b", "m", "v"], ["an"]),
             helper.make_node("Relu", ["an"], ["ar"]),
             helper.make_node("Conv", ["ar", "W2"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["cr"]),
             helper.make_node("Conv", ["cr", "W5"], ["dw"], group=32, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["dw", "W3"], ["e"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["e"], ["er"]),
             helper.make_node("Conv", ["er", "W4"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 16, 20, 20])],
                              [helper.make_tensor_value_info("y", F, ["N", 16, 10, 10])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("threads", [1, 2])
def test_dropped_conv_weights_keep_outputs_across_batches(threads):
    """Once the first run has packed (and dropped) the convs' weights, runs at other batch sizes, empty ones
    included, still agree with ONNX Runtime, and one feed gives the same bits every time."""
    data = conv_chain_model()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    sess = nee.InferenceSession(data, so)
    first = {}
    for batch in (2, 0, 1, 3, 0, 2):
        x = np.random.default_rng(batch).standard_normal((batch, 16, 20, 20)).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        want = ref.run(None, {"x": x})[0]
        assert got.shape == want.shape == (batch, 16, 10, 10)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        if batch in first:
            np.testing.assert_array_equal(got, first[batch])
        first[batch] = got
