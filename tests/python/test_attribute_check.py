"""Node attributes against each op version's declaration (src/ops/attr_spec.inc): nee accepts
exactly the models `onnx.checker.check_model(full_check=True)` accepts, the independent oracle,
for unknown, mistyped, repeated and missing-required attributes."""
import onnx
import pytest
from onnx import TensorProto, helper

import nee


def model(nodes, opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = 8
    return m


def node(op, **attrs):
    return helper.make_node(op, ["x"], ["y"], name="n", **attrs)


def repeated(op, name, first, second):
    n = node(op, **{name: first})
    n.attribute.append(helper.make_attribute(name, second))
    return n


def layer_norm(**attrs):
    scale = helper.make_node("Constant", [], ["scale"], value=helper.make_tensor("s", TensorProto.FLOAT, [3], [1] * 3))
    return [scale, helper.make_node("LayerNormalization", ["x", "scale"], ["y"], name="n", **attrs)]


def branch(nodes):
    return helper.make_graph(nodes, "b", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])


def if_model(then_attrs, with_else=True):
    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True]))
    inner = helper.make_node("Relu", ["x"], ["y"], name="inner", **then_attrs)
    branches = {"then_branch": branch([inner])}
    if with_else:
        branches["else_branch"] = branch([helper.make_node("Identity", ["x"], ["y"])])
    return model([const, helper.make_node("If", ["c"], ["y"], name="n", **branches)])


def function_model(body_attrs, call_attrs):
    """A model-local function whose body's LeakyRelu takes `alpha` from the caller's `a`."""
    ref = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    ref.ref_attr_name = "a"
    body = helper.make_node("LeakyRelu", ["i"], ["o"], **body_attrs)
    body.attribute.append(ref)
    fn = helper.make_function("local", "MyLeaky", ["i"], ["o"], [body], [helper.make_opsetid("", 17)], ["a"])
    m = model([helper.make_node("MyLeaky", ["x"], ["y"], name="n", domain="local", **call_attrs)],
              extra_opsets=[helper.make_opsetid("local", 1)])
    m.functions.append(fn)
    return m


def untyped(n, name):
    """`n` with attribute `name`'s type field cleared (AttributeProto.type UNDEFINED), its value kept."""
    for a in n.attribute:
        if a.name == name:
            a.ClearField("type")
    return n


def untyped_if_model():
    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True]))
    inner = untyped(helper.make_node("LeakyRelu", ["x"], ["y"], name="inner", alpha=0.1), "alpha")
    return model([const, helper.make_node("If", ["c"], ["y"], name="n", then_branch=branch([inner]),
                                          else_branch=branch([helper.make_node("Identity", ["x"], ["y"])]))])


def untyped_function_model():
    m = function_model({}, {"a": 0.3})
    m.functions[0].node[0].attribute.append(helper.make_attribute("__x", 1))
    untyped(m.functions[0].node[0], "__x")
    return m


CASES = {
    "no attributes": model([node("LeakyRelu")]),
    "valid float": model([node("LeakyRelu", alpha=0.2)]),
    "unknown": model([node("LeakyRelu", beta=0.2)]),
    "reserved __ name": model([node("Relu", __internal=1)]),
    "int for float": model([node("LeakyRelu", alpha=1)]),
    "ints for int": model([node("Cast", to=[1])]),
    "required given": model([node("Cast", to=TensorProto.FLOAT)]),
    "required missing": model([node("Cast")]),
    "repeated": model([repeated("LeakyRelu", "alpha", 0.1, 0.2)]),
    "old attribute at new opset": model([node("Relu", consumed_inputs=[0])]),
    "old attribute at old opset": model([node("Relu", consumed_inputs=[0])], opset=5),
    "transpose perm int": model([node("Transpose", perm=1)]),
    "softmax axis float": model([node("Softmax", axis=1.0)]),
    "LayerNormalization-17 takes any attribute": model(layer_norm(whatever=1)),
    "unknown inside an If branch": if_model({"foo": 1}),
    "If without else_branch": if_model({}, with_else=False),
    "valid If": if_model({}),
    "function body takes the caller's attribute": function_model({}, {"a": 0.3}),
    "function body with an unknown attribute": function_model({"foo": 1}, {"a": 0.3}),
    "ml Normalizer norm int": model([helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm=1)],
                                    extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)]),
    "no type, declared attribute": model([untyped(node("LeakyRelu", alpha=0.2), "alpha")]),
    "no type, reserved __ name": model([untyped(node("Relu", __internal=1), "__internal")]),
    "no type, LayerNormalization-17's undeclared attribute": model(
        [layer_norm(whatever=1)[0], untyped(layer_norm(whatever=1)[1], "whatever")]),
    "no type inside an If branch": untyped_if_model(),
    "no type in a function body": untyped_function_model(),
    "ml Normalizer valid": model([helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L2")],
                                 extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)]),
}


def onnx_accepts(m):
    try:
        onnx.checker.check_model(m, full_check=True)
        return True
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return False


def nee_accepts(m):
    try:
        nee.InferenceSession(m.SerializeToString())
        return True
    except nee.InvalidGraph as e:
        if "attribute" not in str(e):
            raise  # refused for something else: the case itself is wrong
        return False


@pytest.mark.parametrize("name", sorted(CASES))
def test_acceptance_matches_onnx_checker(name):
    m = CASES[name]
    assert nee_accepts(m) == onnx_accepts(m)


def test_an_attribute_without_a_type_is_refused_naming_node_and_attribute():
    with pytest.raises(nee.InvalidGraph, match=r"node 'n' \(LeakyRelu\): attribute 'alpha' has no type"):
        nee.InferenceSession(CASES["no type, declared attribute"].SerializeToString())
    with pytest.raises(nee.InvalidGraph, match=r"node 'inner' \(LeakyRelu\): attribute 'alpha' has no type"):
        nee.InferenceSession(CASES["no type inside an If branch"].SerializeToString())
    with pytest.raises(nee.InvalidGraph, match=r"attribute '__x' has no type"):
        nee.InferenceSession(CASES["no type in a function body"].SerializeToString())


def test_errors_name_the_node_the_attribute_and_the_op_version():
    with pytest.raises(nee.InvalidGraph, match=r"node 'n' \(LeakyRelu\): unknown attribute 'beta' "
                                               r"\(LeakyRelu-16 has alpha\)"):
        nee.InferenceSession(CASES["unknown"].SerializeToString())
    with pytest.raises(nee.InvalidGraph, match="attribute 'alpha' must be FLOAT, got INT"):
        nee.InferenceSession(CASES["int for float"].SerializeToString())
    with pytest.raises(nee.InvalidGraph, match="required attribute 'to' .* is missing"):
        nee.InferenceSession(CASES["required missing"].SerializeToString())
    with pytest.raises(nee.InvalidGraph, match="node 'inner' \\(Relu\\): unknown attribute 'foo'"):
        nee.InferenceSession(CASES["unknown inside an If branch"].SerializeToString())


# ---- Model-local functions no node calls: checked like onnx.checker checks every function ----


def unused_function_model(body_nodes, function_opsets=(("", 17),)):
    """A model whose graph is one Relu, carrying a function local.Unused that nothing calls."""
    fn = helper.make_function("local", "Unused", ["i"], ["o"], body_nodes,
                              [helper.make_opsetid(d, v) for d, v in function_opsets])
    m = model([helper.make_node("Relu", ["x"], ["y"])], extra_opsets=[helper.make_opsetid("local", 1)])
    m.functions.append(fn)
    return m


def calls_other_function_model():
    """local.Unused calls local.Helper (valid); nothing calls local.Unused."""
    m = unused_function_model([helper.make_node("Helper", ["i"], ["o"], domain="local")],
                              function_opsets=(("", 17), ("local", 1)))
    m.functions.append(helper.make_function("local", "Helper", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                            [helper.make_opsetid("", 17)]))
    return m


UNUSED_FUNCTION_CASES = {
    "valid": unused_function_model([helper.make_node("Relu", ["i"], ["o"])]),
    "valid, calls another local function": calls_other_function_model(),
    "unknown attribute": unused_function_model([helper.make_node("Relu", ["i"], ["o"], foo=1)]),
    "mistyped attribute": unused_function_model([helper.make_node("LeakyRelu", ["i"], ["o"], alpha=1)]),
    "required attribute missing": unused_function_model([helper.make_node("Cast", ["i"], ["o"])]),
    "unknown op": unused_function_model([helper.make_node("NoSuchOp", ["i"], ["o"])]),
    "arity": unused_function_model([helper.make_node("Relu", ["i", "i"], ["o"])]),
    "undefined input": unused_function_model([helper.make_node("Relu", ["zz"], ["o"])]),
    "output defined twice": unused_function_model([helper.make_node("Relu", ["i"], ["o"]),
                                                   helper.make_node("Relu", ["i"], ["o"])]),
    "op older than the function's opset": unused_function_model([helper.make_node("Relu", ["i"], ["o"],
                                                                                  consumed_inputs=[0])]),
    "old attribute at the function's old opset": unused_function_model(
        [helper.make_node("Relu", ["i"], ["o"], consumed_inputs=[0])], function_opsets=(("", 5),)),
    "function's opset differs, op the same at both": unused_function_model(
        [helper.make_node("Relu", ["i"], ["o"])], function_opsets=(("", 16),)),
    "function's opset differs, op changed between": unused_function_model(
        [helper.make_node("Relu", ["i"], ["o"])], function_opsets=(("", 13),)),
}


def nee_refusal(m):
    try:
        nee.InferenceSession(m.SerializeToString())
        return None
    except nee.NeeError as e:
        return str(e)


@pytest.mark.parametrize("name", sorted(UNUSED_FUNCTION_CASES))
def test_functions_no_node_calls_are_checked_as_onnx_checker_does(name):
    m = UNUSED_FUNCTION_CASES[name]
    refusal = nee_refusal(m)
    assert (refusal is None) == onnx_accepts(m), refusal
    if refusal is not None:
        assert "model-local function 'local.Unused'" in refusal, refusal
