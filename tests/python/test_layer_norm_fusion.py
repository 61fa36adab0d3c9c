"""Layer normalization written out in elementary ops (src/opt/fuse_layer_norm.cc): the forms exporters
write (torch before opset 17, Paddle's SVTR) become one LayerNormalization, and the results agree with ONNX
Runtime running the written-out graph and with nee's unoptimized run. Where the pattern is not whole (an
intermediate value read elsewhere, a mean over a leading axis) nothing is fused."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

RNG = np.random.default_rng(5)


def decomposed(opset, axes, square="pow", gamma=True, beta=True, gamma_shape=None, extra_output=False,
               shape=(2, 5, 24)):
    """x -> LayerNorm over `axes` written out; returns the model."""
    rank = len(shape)
    inits, nodes = [], []
    normalized = [shape[a] for a in sorted(a % rank for a in axes)]

    def reduce_mean(x, y):
        if opset >= 18:
            name = y + "_axes"
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), name))
            nodes.append(helper.make_node("ReduceMean", [x, name], [y], keepdims=1))
        else:
            nodes.append(helper.make_node("ReduceMean", [x], [y], axes=axes, keepdims=1))

    reduce_mean("x", "mean")
    nodes.append(helper.make_node("Sub", ["x", "mean"], ["d"]))
    if square == "pow":
        inits.append(numpy_helper.from_array(np.array(2.0, np.float32), "two"))
        nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"]))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["sq"]))
    reduce_mean("sq", "var")
    inits.append(numpy_helper.from_array(np.array(1e-5, np.float32), "eps"))
    nodes.append(helper.make_node("Add", ["var", "eps"], ["ve"]))
    nodes.append(helper.make_node("Sqrt", ["ve"], ["std"]))
    nodes.append(helper.make_node("Div", ["d", "std"], ["n"]))
    out = "n"
    if gamma:
        g = (RNG.standard_normal(gamma_shape or normalized) * 0.5 + 1).astype(np.float32)
        inits.append(numpy_helper.from_array(g, "gamma"))
        nodes.append(helper.make_node("Mul", ["gamma", out], ["scaled"]))
        out = "scaled"
        if beta:
            inits.append(numpy_helper.from_array(RNG.standard_normal(normalized).astype(np.float32), "beta"))
            nodes.append(helper.make_node("Add", [out, "beta"], ["y"]))
            out = "y"
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(shape))]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, list(shape)))
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def optimized_ops(tmp_path, model):
    so = nee.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    sess = nee.InferenceSession(model.SerializeToString(), so)
    return sess, [n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node]


def expect_agrees(sess, model, shape):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    got = sess.run(None, {"x": x})
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(0)
    plain = nee.InferenceSession(model.SerializeToString(), so).run(None, {"x": x})
    for g, w, p in zip(got, want, plain):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, p, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset,axes,square,gamma,beta,gamma_shape", [
    (13, [-1], "pow", True, True, None),        # torch before opset 17
    (11, [2], "mul", True, True, None),         # d * d, a positive axis
    (18, [-1], "pow", True, True, None),        # the axes as an input
    (13, [-2, -1], "pow", True, True, None),    # two trailing axes
    (13, [-1], "pow", True, False, None),       # no beta
    (13, [-1], "pow", False, False, None),      # neither: gamma made of ones
    (13, [-1], "pow", True, True, [1, 1, 24]),  # gamma with leading 1s
])
def test_written_out_layer_norm_becomes_one_op(tmp_path, opset, axes, square, gamma, beta, gamma_shape):
    model = decomposed(opset, axes, square, gamma, beta, gamma_shape)
    sess, ops = optimized_ops(tmp_path, model)
    assert ops == ["LayerNormalization"], ops
    expect_agrees(sess, model, (2, 5, 24))


@pytest.mark.parametrize("kind", ["d_is_an_output", "leading_axis"])
def test_an_incomplete_pattern_is_left_alone(tmp_path, kind):
    if kind == "leading_axis":  # normalized over the middle axis, not the trailing ones
        model = decomposed(13, [1], gamma=False)
    else:
        model = decomposed(13, [-1], extra_output=True)
    sess, ops = optimized_ops(tmp_path, model)
    assert "LayerNormalization" not in ops and ops.count("ReduceMean") == 2, ops
    expect_agrees(sess, model, (2, 5, 24))
