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


@pytest.mark.parametrize("build", [cnn_model, mlp_model, noops_model])
def test_levels_agree_with_onnxruntime_and_remove_nodes(build, libnee):
    rng = np.random.default_rng(7)
    model, feeds = build(rng)
    (want,) = run_ort(model, feeds)
    for level in (0, 1, 99):
        (got,) = run_nee(model, feeds, level)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"level {level}")
    before, after = node_count(libnee, model, 0), node_count(libnee, model, 99)
    assert before == len(model.graph.node)
    assert after < before


def test_expected_node_counts(libnee):
    rng = np.random.default_rng(3)
    # CNN: Conv, Relu, Conv, Relu, Conv, GlobalAveragePool, Flatten, Gemm.
    assert node_count(libnee, cnn_model(rng)[0], 99) == 8
    # MLP: three Gemm and two Relu.
    assert node_count(libnee, mlp_model(rng)[0], 99) == 5
    # Relu, one merged Transpose, Neg (renamed to the graph output).
    assert node_count(libnee, noops_model(rng)[0], 99) == 3
