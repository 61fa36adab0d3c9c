"""Writes the models of c_api_overrides_test.cc (run from this folder).

free_dims.onnx: y = Add(x, B), x float [Dim1, Dim2, 3] with dim denotations
DATA_BATCH and DATA_CHANNEL, B a float [3] initializer = [1, 2, 3].
external_bias.onnx: y = Add(x, P), x float [2], P a float [2] initializer
stored as external data in P_not_on_disk.bin, which does not exist."""
import onnx
from onnx import TensorProto, helper


def save(nodes, inputs, outputs, initializers, path):
    graph = helper.make_graph(nodes, path.split(".")[0], inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["Dim1", "Dim2", 3])
x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
x.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["Dim1", "Dim2", 3])
b = helper.make_tensor("B", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
save([helper.make_node("Add", ["x", "B"], ["y"])], [x], [y], [b], "free_dims.onnx")

p = helper.make_tensor("P", TensorProto.FLOAT, [2], [0.0, 0.0])
p.ClearField("float_data")
p.data_location = TensorProto.EXTERNAL
for key, value in (("location", "P_not_on_disk.bin"), ("offset", "0"), ("length", "8")):
    entry = p.external_data.add()
    entry.key, entry.value = key, value
save([helper.make_node("Add", ["x", "P"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [p], "external_bias.onnx")
