"""Writes free_dims.onnx for c_api_overrides_test.cc (run from this folder).

y = Add(x, B): x float [Dim1, Dim2, 3] with dim denotations DATA_BATCH and
DATA_CHANNEL, B a float [3] initializer = [1, 2, 3]."""
import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["Dim1", "Dim2", 3])
x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
x.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["Dim1", "Dim2", 3])
b = helper.make_tensor("B", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
graph = helper.make_graph([helper.make_node("Add", ["x", "B"], ["y"])], "free_dims", [x], [y], [b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, "free_dims.onnx")
