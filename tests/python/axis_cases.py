"""Models that give an axis-taking operator a rank-0 input, or an axis outside
[-rank, rank): the cases of tests/python/test_axis_edge_cases.py.

Each case is (name, model). The expected behaviour comes from onnx.reference
(the ONNX reference implementation): where it computes a result, nee must
compute the same; where it fails, nee must raise a nee error, never crash."""
import numpy as np
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _model(node, inputs, outputs, initializers=(), opset=18, domain=""):
    graph = helper.make_graph([node], "axis_case", inputs, outputs, list(initializers))
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports, ir_version=8)


def _x(shape):
    return helper.make_tensor_value_info("x", F, shape)


def _y():
    return helper.make_tensor_value_info("y", F, None)


def _yi():
    return helper.make_tensor_value_info("y", I64, None)


def _i64(name, values, dims=None):
    values = list(values)
    return helper.make_tensor(name, I64, [len(values)] if dims is None else dims, values)


def cases():
    """Yields (name, model, feeds)."""
    axes = [-3, -2, -1, 0, 1, 2]
    scalar = np.array(2.0, np.float32)
    vector = np.array([1.0, -2.0, 3.0], np.float32)
    for rank, x in ((0, scalar), (1, vector)):
        shape = list(x.shape)
        feeds = {"x": x}
        for axis in axes:
            tag = f"rank{rank}_axis{axis}"
            # Ops whose only tensor input is x and whose axis is an attribute.
            for op, out, extra in (("Softmax", _y, {}), ("LogSoftmax", _y, {}), ("Hardmax", _y, {}),
                                   ("Flatten", _y, {}), ("ArgMax", _yi, {}), ("ArgMin", _yi, {}),
                                   ("LpNormalization", _y, {}), ("Split", _y, {"num_outputs": 1}),
                                   ("Concat", _y, {}), ("Unique", _y, {}),
                                   ("LayerNormalization", _y, {}), ("QuantizeLinear", None, {}),
                                   ("DequantizeLinear", None, {})):
                node_inputs = ["x"]
                inits = []
                outputs = [out()] if out else [helper.make_tensor_value_info("y", TensorProto.UINT8, None)]
                if op == "LayerNormalization":
                    node_inputs.append("scale")
                    inits.append(helper.make_tensor("scale", F, [], [2.0]))
                if op == "QuantizeLinear":
                    node_inputs += ["s", "z"]
                    inits += [helper.make_tensor("s", F, [1], [0.5]), helper.make_tensor("z", TensorProto.UINT8, [1], [3])]
                if op == "DequantizeLinear":
                    node_inputs = ["q", "s"]
                    inits += [helper.make_tensor("s", F, [1], [0.5])]
                    outputs = [_y()]
                node = helper.make_node(op, node_inputs, ["y"], axis=axis, **extra)
                if op == "DequantizeLinear":
                    q = helper.make_tensor_value_info("q", TensorProto.UINT8, shape)
                    yield (f"{op}_{tag}", _model(node, [q], outputs, inits, opset=21), {"q": x.astype(np.uint8)})
                else:
                    yield (f"{op}_{tag}", _model(node, [_x(shape)], outputs, inits), feeds)
            # Ops with an index or axes tensor.
            ind = helper.make_tensor("i", I64, [], [0])
            yield (f"Gather_{tag}", _model(helper.make_node("Gather", ["x", "i"], ["y"], axis=axis),
                                           [_x(shape)], [_y()], [ind]), feeds)
            ind = helper.make_tensor("i", I64, shape, [0] * x.size)
            yield (f"GatherElements_{tag}", _model(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis),
                                                   [_x(shape)], [_y()], [ind]), feeds)
            upd = helper.make_tensor("u", F, shape, [9.0] * x.size)
            yield (f"ScatterElements_{tag}",
                   _model(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis),
                          [_x(shape)], [_y()], [ind, upd]), feeds)
            yield (f"CumSum_{tag}", _model(helper.make_node("CumSum", ["x", "a"], ["y"]), [_x(shape)], [_y()],
                                           [helper.make_tensor("a", I64, [], [axis])]), feeds)
            yield (f"Compress_{tag}", _model(helper.make_node("Compress", ["x", "c"], ["y"], axis=axis), [_x(shape)],
                                             [_y()], [helper.make_tensor("c", TensorProto.BOOL, [1], [True])]), feeds)
            yield (f"OneHot_{tag}", _model(helper.make_node("OneHot", ["x", "d", "v"], ["y"], axis=axis), [_x(shape)],
                                           [_y()], [helper.make_tensor("d", I64, [], [4]),
                                                    helper.make_tensor("v", F, [2], [0.0, 1.0])]), feeds)
            yield (f"TopK_{tag}", _model(helper.make_node("TopK", ["x", "k"], ["y", "ind"], axis=axis), [_x(shape)],
                                         [_y(), helper.make_tensor_value_info("ind", I64, None)],
                                         [_i64("k", [1])]), feeds)
            yield (f"ReduceSum_{tag}", _model(helper.make_node("ReduceSum", ["x", "a"], ["y"]), [_x(shape)], [_y()],
                                              [_i64("a", [axis])]), feeds)
            yield (f"ReduceMax_{tag}", _model(helper.make_node("ReduceMax", ["x"], ["y"], axes=[axis]), [_x(shape)],
                                              [_y()], opset=13), feeds)
            yield (f"Squeeze_{tag}", _model(helper.make_node("Squeeze", ["x", "a"], ["y"]), [_x(shape)], [_y()],
                                            [_i64("a", [axis])]), feeds)
            yield (f"Unsqueeze_{tag}", _model(helper.make_node("Unsqueeze", ["x", "a"], ["y"]), [_x(shape)], [_y()],
                                              [_i64("a", [axis])]), feeds)
            yield (f"Slice_{tag}", _model(helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), [_x(shape)], [_y()],
                                          [_i64("s", [0]), _i64("e", [1]), _i64("a", [axis])]), feeds)
            yield (f"Pad_{tag}", _model(helper.make_node("Pad", ["x", "p", "", "a"], ["y"]), [_x(shape)], [_y()],
                                        [_i64("p", [1, 1]), _i64("a", [axis])]), feeds)
            yield (f"MeanVarianceNormalization_{tag}",
                   _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[axis]), [_x(shape)],
                          [_y()]), feeds)
            yield (f"SplitToSequence_{tag}",
                   _model(helper.make_node("SplitToSequence", ["x"], ["y"], axis=axis, keepdims=0), [_x(shape)],
                          [helper.make_tensor_sequence_value_info("y", F, None)]), feeds)
            seq_graph = helper.make_graph(
                [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
                 helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=1)],
                "axis_case", [_x(shape)], [_y()])
            yield (f"ConcatFromSequence_new_axis_{tag}",
                   helper.make_model(seq_graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), feeds)
            yield (f"DFT_{tag}", _model(helper.make_node("DFT", ["x", "", "a"], ["y"]), [_x(shape)], [_y()],
                                        [helper.make_tensor("a", I64, [], [axis])], opset=20), feeds)
            u8 = TensorProto.UINT8
            qx = helper.make_tensor_value_info("q", u8, None)  # (shape unknown: the kernel must check)
            yield (f"QLinearConcat_{tag}",
                   _model(helper.make_node("QLinearConcat", ["ys", "yz", "q", "s", "z", "q", "s", "z"], ["y"],
                                           axis=axis, domain="com.microsoft"),
                          [qx], [helper.make_tensor_value_info("y", u8, None)],
                          [helper.make_tensor("ys", F, [], [0.5]), helper.make_tensor("yz", u8, [], [1]),
                           helper.make_tensor("s", F, [], [0.5]), helper.make_tensor("z", u8, [], [1])],
                          domain="com.microsoft"), {"q": x.astype(np.uint8)})
            yield (f"ReverseSequence_{tag}",
                   _model(helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=axis, time_axis=0),
                          [_x(shape)], [_y()], [_i64("l", [1])]), feeds)
    # The same rank-0 cases with the input's shape undeclared, so that shape
    # inference cannot refuse them and the kernels must.
    for name, model, feeds in list(_dynamic_rank0()):
        yield name, model, feeds


def _dynamic_rank0():
    x = np.array(2.0, np.float32)
    dyn = helper.make_tensor_value_info("x", F, None)
    for op, attrs in (("Concat", {"axis": 0}), ("Compress", {"axis": 0}), ("Unique", {"axis": 0}),
                      ("LpNormalization", {"axis": 0}), ("SplitToSequence", {"axis": 0})):
        inputs, inits = ["x"], []
        if op == "Compress":
            inputs.append("c")
            inits.append(helper.make_tensor("c", TensorProto.BOOL, [1], [True]))
        out = (helper.make_tensor_sequence_value_info("y", F, None) if op == "SplitToSequence" else _y())
        yield (f"{op}_dynamic_rank0", _model(helper.make_node(op, inputs, ["y"], **attrs), [dyn], [out], inits),
               {"x": x})
    yield ("MeanVarianceNormalization_dynamic_rank0",
           _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0]), [dyn], [_y()]), {"x": x})
