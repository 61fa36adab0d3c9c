"""Shared by the test_ort_api_* suites: small models built with onnx.helper, and
the two runtimes the suites run every script against. ONNX Runtime is the
oracle: each behaviour is run on both and nee must match what ONNX Runtime does."""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import nee

RUNTIMES = {"onnxruntime": onnxruntime, "nee": nee}


@pytest.fixture(params=list(RUNTIMES))
def rt(request):
    """The runtime module a differential test runs against (`import onnxruntime as rt` or `import nee as rt`)."""
    return RUNTIMES[request.param]


def _model(nodes, inputs, outputs, initializers=(), opset=17, doc=""):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers), doc_string=doc)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def mul_model():
    """Y = X * W with W = [[1,2],[3,4],[5,6]] (ONNX Runtime's test model mul_1, rebuilt)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [1, 2, 3, 4, 5, 6])
    return _model([helper.make_node("Mul", ["X", "W"], ["Y"])],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 2])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 2])], [w])


def add_model(elem=TensorProto.FLOAT, shape=("N", 3)):
    """Y = X + B, B = [1, 2, 3] of the given element type; X has a symbolic first dim."""
    b = helper.make_tensor("B", elem, [3], [1, 2, 3])
    return _model([helper.make_node("Add", ["X", "B"], ["Y"])],
                  [helper.make_tensor_value_info("X", elem, list(shape))],
                  [helper.make_tensor_value_info("Y", elem, list(shape))], [b])


def two_input_model():
    """Z = X + Y (float [2, 2] each)."""
    return _model([helper.make_node("Add", ["X", "Y"], ["Z"])],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2]),
                   helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])],
                  [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 2])])


def identity_string_model():
    return _model([helper.make_node("Identity", ["input:0"], ["output:0"])],
                  [helper.make_tensor_value_info("input:0", TensorProto.STRING, [2, 2])],
                  [helper.make_tensor_value_info("output:0", TensorProto.STRING, [2, 2])])


def free_dims_model():
    """Abs over x: [Dim1 (DATA_BATCH), Dim2 (DATA_CHANNEL), 5] (as ONNX Runtime's abs_free_dimensions)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["Dim1", "Dim2", 5])
    dims = x.type.tensor_type.shape.dim
    dims[0].denotation = "DATA_BATCH"
    dims[1].denotation = "DATA_CHANNEL"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["Dim1", "Dim2", 5])
    return _model([helper.make_node("Abs", ["x"], ["y"])], [x], [y])


def sequence_model():
    """Y = SequenceLength(X), X a sequence of float tensors."""
    x = helper.make_tensor_sequence_value_info("X", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("Y", TensorProto.INT64, [])
    return _model([helper.make_node("SequenceLength", ["X"], ["Y"])], [x], [y])


def write(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def session(rt, model, **kwargs):
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return rt.InferenceSession(data, providers=["CPUExecutionProvider"], **kwargs)


X32 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)


def external_bias_model():
    """Y = X + P with P (float [2]) stored as external data in a file that does not exist
    ("P_not_on_disk.bin"): the caller supplies P (as in ONNX Runtime's test
    model_with_external_initializer_come_from_user)."""
    bias = helper.make_tensor("P", TensorProto.FLOAT, [2], [0, 0])
    bias.ClearField("float_data")
    bias.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "P_not_on_disk.bin"), ("offset", "0"), ("length", "8")):
        entry = bias.external_data.add()
        entry.key, entry.value = key, value
    return _model([helper.make_node("Add", ["X", "P"], ["Y"])],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])], [bias])


def model_with_ort_config(config_json):
    model = mul_model()
    helper.set_model_props(model, {"ort_config": config_json, "dummy_key": "dummy_value"})
    return model
