"""Custom operators: the example library (examples/custom_op) through the Python
API and `nee run --custom-ops`, ops written in Python with numpy, and every
way registering or running one fails. Expected values come from numpy."""
import functools
import os
import subprocess
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nee

from cli_util import NEE

LIB_DIR = os.path.join(os.path.dirname(NEE), "..", "lib")
EXAMPLE_LIB = os.path.abspath(os.environ.get("NEE_EXAMPLE_OPS", os.path.join(LIB_DIR, "libnee_example_ops.so")))
BAD_ABI_LIB = os.path.abspath(os.path.join(LIB_DIR, "libnee_test_bad_abi_ops.so"))


def needs_library(test):
    """The example library is part of every build (CMake target nee_example_ops): missing is a failure, not a skip."""
    @functools.wraps(test)
    def checked(*args, **kwargs):
        assert os.path.exists(EXAMPLE_LIB), f"{EXAMPLE_LIB} missing: build the nee_example_ops target"
        return test(*args, **kwargs)
    return checked


def example_model(batch="batch"):
    """s = Swish(x, alpha=0.5); y = WeightedSum(s, x, weights=[2, -1]) (domain nee.example)."""
    nodes = [helper.make_node("Swish", ["x"], ["s"], name="swish", domain="nee.example", alpha=0.5),
             helper.make_node("WeightedSum", ["s", "x"], ["y"], name="wsum", domain="nee.example",
                              weights=[2.0, -1.0])]
    graph = helper.make_graph(nodes, "example", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("nee.example", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def example_expected(x):
    swish = x / (1 + np.exp(-0.5 * x))
    return 2 * swish - x


def options_with(*libraries, level=None):
    so = nee.SessionOptions()
    for lib in libraries:
        so.register_custom_ops_library(lib)
    if level is not None:
        so.graph_optimization_level = level
    return so


@needs_library
@pytest.mark.parametrize("level", [nee.GraphOptimizationLevel.ORT_DISABLE_ALL, nee.GraphOptimizationLevel.ORT_ENABLE_ALL])
def test_example_library_matches_numpy(level):
    sess = nee.InferenceSession(example_model(), options_with(EXAMPLE_LIB, level=level))
    rng = np.random.default_rng(0)
    for batch in (1, 4, 2):
        x = rng.standard_normal((batch, 3)).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, example_expected(x), rtol=1e-5, atol=1e-6)


@needs_library
def test_example_library_through_the_cli(tmp_path):
    model = tmp_path / "example.onnx"
    model.write_bytes(example_model())
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = subprocess.run([NEE, "run", str(model), "--custom-ops", EXAMPLE_LIB, "--input", f"x={tmp_path / 'x.npy'}",
                        "--output-dir", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(out / "output_0.npy"), example_expected(x), rtol=1e-5, atol=1e-6)
    r = subprocess.run([NEE, "run", str(model), "--random"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "operator 'Swish' of domain 'nee.example' is not registered" in r.stderr
    r = subprocess.run([NEE, "run", str(model), "--random", "--custom-ops", "/nonexistent/libops.so"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "/nonexistent/libops.so" in r.stderr
    r = subprocess.run([NEE, "bench", str(model), "--custom-ops", EXAMPLE_LIB], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "--custom-ops" in r.stderr


@needs_library
def test_nee_check_with_the_library_types_the_custom_ops(tmp_path):
    model = tmp_path / "example.onnx"
    model.write_bytes(example_model())
    r = subprocess.run([NEE, "check", str(model)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "operator 'Swish' of domain 'nee.example' is not registered" in r.stdout
    r = subprocess.run([NEE, "check", str(model), "--custom-ops", EXAMPLE_LIB], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # The library's shape rules typed the custom ops' outputs.
    assert "s: tensor(float) [batch,3]" in r.stdout and "y: tensor(float) [batch,3]" in r.stdout
    assert "valid" in r.stdout.splitlines()[-1]
    r = subprocess.run([NEE, "check", str(model), "--custom-ops", "/nonexistent/libops.so"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "/nonexistent/libops.so" in r.stdout
    r = subprocess.run([NEE, "check", str(model), "--custom-ops"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--custom-ops needs a library path" in r.stderr


def test_an_unregistered_custom_op_names_its_domain_and_op():
    with pytest.raises(nee.NotImplemented, match="operator 'Swish' of domain 'nee.example' is not registered"):
        nee.InferenceSession(example_model())


@needs_library
def test_library_errors_name_the_path():
    with pytest.raises(nee.InvalidArgument, match="cannot load the library '/nonexistent/libnothing.so'"):
        nee.InferenceSession(example_model(), options_with("/nonexistent/libnothing.so"))
    with pytest.raises(nee.InvalidArgument, match="does not export 'nee_custom_ops_abi_version'"):
        nee.InferenceSession(example_model(), options_with("libm.so.6"))
    if os.path.exists(BAD_ABI_LIB):
        with pytest.raises(nee.InvalidArgument, match="libnee_test_bad_abi_ops.so' was built for custom-op ABI "
                                                      "version 99"):
            nee.InferenceSession(example_model(), options_with(BAD_ABI_LIB))
    with pytest.raises(nee.InvalidArgument, match="registered twice"):
        nee.InferenceSession(example_model(), options_with(EXAMPLE_LIB, EXAMPLE_LIB))


@needs_library
def test_a_library_compute_error_is_clean_and_the_session_stays_usable():
    sess = nee.InferenceSession(example_model(), options_with(EXAMPLE_LIB))
    x = np.zeros((2, 3), np.float32)
    x[1, 1] = np.nan
    with pytest.raises(nee.RuntimeException, match=r"node 'swish' \(nee.example.Swish\).*input element 4 is NaN"):
        sess.run(None, {"x": x})
    x[1, 1] = 1
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], example_expected(x), rtol=1e-5, atol=1e-6)


# ---- Ops written in Python ----------------------------------------------------

def scale_model(factor=2.0, extra=None):
    """y = Scale(x, factor) in domain nee.py, then Relu (a standard op after a custom one)."""
    attrs = {"factor": factor, **(extra or {})}
    nodes = [helper.make_node("Scale", ["x"], ["s"], name="scale", domain="nee.py", **attrs),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "scale", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("nee.py", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def scale(x, factor=1.0, **_):
    if np.isnan(x).any():
        raise ValueError("no NaN please")
    return (x * np.float32(factor)).astype(np.float32)


def test_a_python_op_matches_numpy():
    seen = {}

    def shape_fn(shape, **attrs):
        seen["shape"], seen["attrs"] = shape, attrs
        return shape

    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "Scale", scale, output_types=[np.float32], shape_fn=shape_fn)
    for level in (0, 99):
        so.graph_optimization_level = level
        sess = nee.InferenceSession(scale_model(-3.0, {"label": "L", "axes": [1, 2], "ws": [0.5]}), so)
        x = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x * -3, 0))
    assert seen["shape"] == (2, 4)  # the run's concrete shapes (the declared ("n", 4) at creation)
    assert seen["attrs"] == {"factor": -3.0, "label": "L", "axes": [1, 2], "ws": [0.5]}


def test_a_python_op_error_is_clean_and_the_session_stays_usable():
    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "Scale", scale)
    sess = nee.InferenceSession(scale_model(), so)
    with pytest.raises(nee.RuntimeException, match=r"node 'scale' \(nee.py.Scale\).*ValueError: no NaN please"):
        sess.run(None, {"x": np.full((1, 4), np.nan, np.float32)})
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * 2)


def test_a_python_op_returning_the_wrong_type_is_reported():
    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "Scale", lambda x, **a: x.astype(np.float64), output_types=np.float32)
    sess = nee.InferenceSession(scale_model(), so)
    with pytest.raises(nee.RuntimeException, match="returned float64, the op declares float32"):
        sess.run(None, {"x": np.ones((1, 4), np.float32)})


def test_a_shape_fn_error_fails_session_creation():
    def bad_shape(shape, **attrs):
        raise RuntimeError("cannot tell")

    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "Scale", scale, shape_fn=bad_shape)
    with pytest.raises(nee.InvalidGraph, match=r"node 'scale' \(nee.py.Scale\).*RuntimeError: cannot tell"):
        nee.InferenceSession(scale_model(), so)


def test_python_ops_are_per_session():
    doubled, tripled = nee.SessionOptions(), nee.SessionOptions()
    doubled.register_custom_op("nee.py", "Scale", lambda x, factor, **a: x * np.float32(2))
    tripled.register_custom_op("nee.py", "Scale", lambda x, factor, **a: x * np.float32(3))
    a = nee.InferenceSession(scale_model(), doubled)
    b = nee.InferenceSession(scale_model(), tripled)
    x = np.ones((1, 4), np.float32)
    assert a.run(None, {"x": x})[0][0, 0] == 2
    assert b.run(None, {"x": x})[0][0, 0] == 3
    with pytest.raises(nee.NotImplemented, match="domain 'nee.py'"):
        nee.InferenceSession(scale_model())


def test_a_variadic_python_op_with_two_outputs():
    nodes = [helper.make_node("SumMax", ["a", "b", "c"], ["sum", "max"], name="summax", domain="nee.py")]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in "abc"]
    outputs = [helper.make_tensor_value_info("sum", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("max", TensorProto.INT64, None)]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("nee.py", 1)])
    model.ir_version = 8
    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "SumMax", lambda *xs: (sum(xs), np.array(len(xs), np.int64)),
                          num_inputs=(1, None), num_outputs=2, output_types=[np.float32, TensorProto.INT64],
                          shape_fn=lambda *shapes: [shapes[0], ()])
    sess = nee.InferenceSession(model.SerializeToString(), so)
    feeds = {n: np.full((2, 2), i + 1, np.float32) for i, n in enumerate("abc")}
    total, count = sess.run(None, feeds)
    np.testing.assert_array_equal(total, np.full((2, 2), 6, np.float32))
    assert count.dtype == np.int64 and count.shape == () and count == 3


def test_a_python_op_runs_from_many_threads():
    so = nee.SessionOptions()
    so.register_custom_op("nee.py", "Scale", scale)
    sess = nee.InferenceSession(scale_model(), so)
    errors = []

    def work(seed):
        x = np.random.default_rng(seed).standard_normal((8, 4)).astype(np.float32)
        for _ in range(20):
            y = sess.run(None, {"x": x})[0]
            if not np.array_equal(y, np.maximum(x * 2, 0)):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_register_custom_op_checks_its_arguments():
    so = nee.SessionOptions()
    with pytest.raises(TypeError):
        so.register_custom_op("nee.py", "Scale", 42)
    with pytest.raises(nee.InvalidArgument):
        so.register_custom_op("", "Scale", scale)
    with pytest.raises(nee.InvalidArgument):
        so.register_custom_op("nee.py", "Scale", scale, num_inputs=(2, 1))
    so.register_custom_op("ai.onnx", "Scale", scale)  # refused by nee when a session is made
    with pytest.raises(nee.InvalidArgument, match="nee implements the domain 'ai.onnx'"):
        nee.InferenceSession(scale_model(), so)
