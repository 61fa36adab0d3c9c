"""Differential tests (ONNX Runtime and nee run the same script) of what changes
how a session executes: overridable initializers, the allow_spinning session
config entry and RunOptions.only_execute_path_to_fetches."""
import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee
from ort_api_util import rt, session  # noqa: F401  (rt is a fixture)

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 8
B = np.array([1, 2, 3], np.float32)
K = np.arange(2 * 2 * 3 * 3, dtype=np.float32).reshape(2, 2, 3, 3) / 16
X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
IMAGE = np.linspace(-1, 1, 2 * 5 * 5, dtype=np.float32).reshape(1, 2, 5, 5)


def overridable_model(ir_version=8, b_shape=(3,)):
    """Y = MatMul(X, W) + 2*B and Z = Conv(IMAGE, K), with W, B and K initializers
    also listed as graph inputs: the weights a kernel packs once, a chain the
    optimizer would fold and convolution weights, all overridable."""
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"]),
             helper.make_node("Mul", ["B", "two"], ["B2"]),
             helper.make_node("Add", ["XW", "B2"], ["Y"]),
             helper.make_node("Conv", ["IMAGE", "K"], ["Z"])]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4]),
              helper.make_tensor_value_info("IMAGE", TensorProto.FLOAT, [1, 2, 5, 5]),
              helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 3]),
              helper.make_tensor_value_info("B", TensorProto.FLOAT, list(b_shape)),
              helper.make_tensor_value_info("K", TensorProto.FLOAT, [2, 2, 3, 3])]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"), numpy_helper.from_array(K, "K"), two]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = ir_version
    return model


def conv2d(image, kernel):
    """Valid 2-D cross-correlation, NCHW (ONNX Conv without padding), in numpy."""
    _, channels, height, width = image.shape
    out = np.zeros((1, kernel.shape[0], height - 2, width - 2), np.float64)
    for m in range(kernel.shape[0]):
        for i in range(height - 2):
            for j in range(width - 2):
                out[0, m, i, j] = np.sum(image[0, :, i:i + 3, j:j + 3] * kernel[m])
    return out


def describe(args):
    return [(a.name, a.type, a.shape) for a in args]


def test_overridable_initializers_are_listed(rt):
    sess = session(rt, overridable_model())
    assert describe(sess.get_overridable_initializers()) == [
        ("W", "tensor(float)", [4, 3]), ("B", "tensor(float)", [3]), ("K", "tensor(float)", [2, 2, 3, 3])]
    assert [a.name for a in sess.get_inputs()] == ["X", "IMAGE"]


def test_before_ir_4_initializers_are_constants(rt):
    sess = session(rt, overridable_model(ir_version=3))
    assert sess.get_overridable_initializers() == []
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument, match="B"):
        sess.run(None, {"X": X, "IMAGE": IMAGE, "B": B})
    y, _ = sess.run(None, {"X": X, "IMAGE": IMAGE})
    np.testing.assert_allclose(y, X.astype(np.float64) @ W + 2 * B, rtol=1e-6)


@pytest.mark.parametrize("opt_level", ["ORT_DISABLE_ALL", "ORT_ENABLE_ALL"])
def test_feeding_an_initializer_overrides_it_for_that_run(rt, opt_level):
    so = rt.SessionOptions()
    so.graph_optimization_level = getattr(rt.GraphOptimizationLevel, opt_level)
    sess = session(rt, overridable_model(), sess_options=so)
    feed = {"X": X, "IMAGE": IMAGE}
    w2, b2, k2 = -W[:, ::-1].copy(), np.array([5, -1, 0.5], np.float32), K[::-1].copy() * 3
    for _ in range(2):  # the first run also packs the weights: the override must win on every run
        y, z = sess.run(None, {**feed, "W": w2, "B": b2, "K": k2})
        np.testing.assert_allclose(y, X.astype(np.float64) @ w2 + 2 * b2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, conv2d(IMAGE, k2), rtol=1e-5, atol=1e-5)
        y, z = sess.run(None, feed)  # the model's own values again
        np.testing.assert_allclose(y, X.astype(np.float64) @ W + 2 * B, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, conv2d(IMAGE, K), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value, message", [
    (np.ones(4, np.float32), "B"), (np.ones(3, np.float64), "double"), (np.ones((1, 3), np.float32), "B")])
def test_an_override_of_another_type_or_shape_is_refused(rt, value, message):
    sess = session(rt, overridable_model())
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument, match=message):
        sess.run(None, {"X": X, "IMAGE": IMAGE, "B": value})


def test_an_override_takes_any_shape_its_declaration_allows(rt):
    sess = session(rt, overridable_model(b_shape=("M",)))
    assert describe(sess.get_overridable_initializers())[1] == ("B", "tensor(float)", ["M"])
    y, _ = sess.run(None, {"X": X, "IMAGE": IMAGE, "B": np.array([10], np.float32)})  # broadcasts
    np.testing.assert_allclose(y, X.astype(np.float64) @ W + 20, rtol=1e-6)


def branch_model():
    """Y1 = Relu(Abs(X)), Y2 = Reshape(Abs(X), S): a wrong S fails only the branch to Y2."""
    nodes = [helper.make_node("Abs", ["X"], ["A"], name="abs"),
             helper.make_node("Reshape", ["A", "S"], ["Y2"], name="reshape"),
             helper.make_node("Relu", ["A"], ["Y1"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("S", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("Y1", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("Y2", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


BRANCH_FEED = {"X": np.arange(6, dtype=np.float32).reshape(2, 3) - 2, "S": np.array([4, 4], np.int64)}


def test_every_node_runs_by_default(rt):
    sess = session(rt, branch_model())
    for flag in (None, False):
        options = rt.RunOptions()
        if flag is not None:
            options.only_execute_path_to_fetches = flag
        assert options.only_execute_path_to_fetches is False
        with pytest.raises(rt.capi.onnxruntime_pybind11_state.Fail, match="reshape"):
            sess.run(["Y1"], BRANCH_FEED, options)


def test_only_execute_path_to_fetches_skips_the_other_branches():
    """ONNX Runtime's documented meaning, which its inference builds (PyPI's) compile out
    (test_ort_parity.py records that); the expected value comes from numpy."""
    sess = session(nee, branch_model())
    options = nee.RunOptions()
    options.only_execute_path_to_fetches = True
    y1, = sess.run(["Y1"], BRANCH_FEED, options)
    np.testing.assert_array_equal(y1, np.maximum(np.abs(BRANCH_FEED["X"]), 0))
    with pytest.raises(nee.Fail, match="reshape"):  # asked for, the branch runs and fails
        sess.run(["Y2", "Y1"], BRANCH_FEED, options)
    good = {**BRANCH_FEED, "S": np.array([3, 2], np.int64)}
    y2, y1 = sess.run(["Y2", "Y1"], good, options)
    np.testing.assert_array_equal(y2, np.abs(good["X"]).reshape(3, 2))


IDLE_CPU_SCRIPT = r"""
import sys, time
import numpy as np
from onnx import TensorProto, helper
rt = __import__(sys.argv[1])
g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g",
                      [helper.make_tensor_value_info("X", TensorProto.FLOAT, [256, 256])],
                      [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [256, 256])],
                      [helper.make_tensor("W", TensorProto.FLOAT, [256, 256], np.ones(256 * 256, np.float32))])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
so = rt.SessionOptions()
so.intra_op_num_threads = 2
so.add_session_config_entry("session.intra_op.allow_spinning", "0")
sess = rt.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
x = np.ones((256, 256), np.float32)
for _ in range(5):
    assert sess.run(None, {"X": x})[0][0, 0] == 256
start = time.process_time()
time.sleep(0.2)
print(time.process_time() - start)
"""


def test_without_spinning_an_idle_session_uses_no_cpu(rt):
    """With session.intra_op.allow_spinning=0 the pool's threads sleep as soon as a run
    ends: the process's CPU time over 200 ms of idling stays near zero (nee's default
    polls for up to 250 ms after each parallel loop, ONNX Runtime's briefly)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", IDLE_CPU_SCRIPT, rt.__name__], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    assert float(out.split()[-1]) < 0.02


def test_allow_spinning_is_read_back(rt):
    so = rt.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert session(rt, branch_model(), sess_options=so).run(["Y1"], {**BRANCH_FEED, "S": np.array([3, 2])})


def test_unknown_shapes_read_as_empty_lists(rt):
    """ONNX Runtime shows an input, output or overridable initializer declared without a shape as []."""
    graph = helper.make_graph([helper.make_node("Add", ["X", "B"], ["Y"])], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("B", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(B, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = session(rt, model)
    args = sess.get_inputs() + sess.get_outputs() + sess.get_overridable_initializers()
    assert [(a.name, a.type, a.shape) for a in args] == [
        ("X", "tensor(float)", []), ("Y", "tensor(float)", []), ("B", "tensor(float)", [])]
    y, = sess.run(None, {"X": np.ones(3, np.float32), "B": np.full(3, 2, np.float32)})
    np.testing.assert_array_equal(y, np.full(3, 3, np.float32))
