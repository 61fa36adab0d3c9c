"""The optimizer runs inside subgraph bodies (If branches, Loop bodies, nested ones): their constants
fold, reading the enclosing graphs' fixed initializers but never an overridable one (an initializer
that is also a graph input), and the results stay those of onnx.reference at every level, for both
branches, for an overridden default, and when ONNX Runtime runs the file `nee optimize` wrote."""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

F = TensorProto.FLOAT
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NEE_BIN = os.environ.get("NEE_BIN", os.path.join(_ROOT, "build", "bin", "nee"))


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name + "_v"))


def branch_then():
    """Constants folded into one, the outer fixed W unsqueezed (foldable from the enclosing graph),
    the outer overridable D read as it is at run time."""
    nodes = [
        const("t_c1", np.array([1.0, 2.0, 3.0], np.float32)),
        const("t_c2", np.array([0.5, -1.0, 4.0], np.float32)),
        helper.make_node("Add", ["t_c1", "t_c2"], ["t_c12"]),
        const("t_axes", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["W", "t_axes"], ["t_wu"]),
        helper.make_node("Mul", ["x", "t_wu"], ["t_xw"]),
        helper.make_node("Add", ["t_xw", "t_c12"], ["t_s"]),
        helper.make_node("Add", ["t_s", "D"], ["then_out"]),
    ]
    return helper.make_graph(nodes, "then", [], [helper.make_tensor_value_info("then_out", F, [2, 3])])


def branch_else():
    """A nested If whose branches fold constants of their own and the outer W."""
    inner_then = helper.make_graph(
        [const("i_c", np.array([2.0], np.float32)), helper.make_node("Mul", ["W", "i_c"], ["i_w2"]),
         helper.make_node("Sub", ["x", "i_w2"], ["inner_out"])],
        "inner_then", [], [helper.make_tensor_value_info("inner_out", F, [2, 3])])
    inner_else = helper.make_graph(
        [const("j_c", np.array([3.0], np.float32)), helper.make_node("Neg", ["j_c"], ["j_n"]),
         helper.make_node("Mul", ["x", "j_n"], ["inner_out2"])],
        "inner_else", [], [helper.make_tensor_value_info("inner_out2", F, [2, 3])])
    nodes = [
        helper.make_node("Not", ["flag"], ["e_not"]),
        helper.make_node("If", ["e_not"], ["e_if"], then_branch=inner_then, else_branch=inner_else),
        helper.make_node("Relu", ["e_if"], ["else_out"]),
    ]
    return helper.make_graph(nodes, "else", [], [helper.make_tensor_value_info("else_out", F, [2, 3])])


def loop_body():
    """v <- v * (c1 + c2) + W, three times; the factor and W's reshape fold inside the body."""
    nodes = [
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        const("l_c1", np.array([0.25], np.float32)),
        const("l_c2", np.array([0.5], np.float32)),
        helper.make_node("Add", ["l_c1", "l_c2"], ["l_f"]),
        const("l_shape", np.array([1, 3], np.int64)),
        helper.make_node("Reshape", ["W", "l_shape"], ["l_w"]),
        helper.make_node("Mul", ["v_in", "l_f"], ["l_m"]),
        helper.make_node("Add", ["l_m", "l_w"], ["v_out"]),
    ]
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [2, 3])])


def model_with_bodies():
    nodes = [
        helper.make_node("If", ["flag"], ["y"], then_branch=branch_then(), else_branch=branch_else()),
        helper.make_node("Loop", ["trips", "keep_going", "x"], ["z"], body=loop_body()),
    ]
    inits = [numpy_helper.from_array(np.array([1.5, -2.0, 0.25], np.float32), "W"),
             numpy_helper.from_array(np.array([10.0, 20.0, 30.0], np.float32), "D"),
             numpy_helper.from_array(np.array(3, np.int64), "trips"),
             # (an explicit condition: onnx.reference's Loop returns the initial value when it is omitted)
             numpy_helper.from_array(np.array(True), "keep_going")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
         helper.make_tensor_value_info("D", F, [3])],
        [helper.make_tensor_value_info("y", F, [2, 3]), helper.make_tensor_value_info("z", F, [2, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def feeds_for(flag, override_d):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    feeds = {"x": x, "flag": np.array(flag)}
    if override_d:
        feeds["D"] = np.array([-1.0, 0.0, 1.0], np.float32)
    return feeds


def body_node_counts(model):
    counts = {}
    for node in model.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                counts[f"{node.op_type}.{a.name}"] = len(a.g.node)
    return counts


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("override_d", [False, True])
def test_results_match_onnx_reference_at_every_level(flag, override_d):
    model = model_with_bodies()
    feeds = feeds_for(flag, override_d)
    want = ReferenceEvaluator(model).run(None, feeds)
    for level in (0, 1, 99):
        so = nee.SessionOptions()
        so.graph_optimization_level = nee.GraphOptimizationLevel(level)
        got = nee.InferenceSession(model.SerializeToString(), so).run(None, feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"level {level}")


def test_nee_optimize_folds_inside_bodies_and_onnxruntime_runs_the_result(tmp_path):
    model = model_with_bodies()
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(src))
    r = subprocess.run([NEE_BIN, "optimize", str(src), "-o", str(dst)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "fold-constants" in r.stdout and "attribute 'then_branch'" in r.stdout, r.stdout
    optimized = onnx.load(str(dst))
    before, after = body_node_counts(model), body_node_counts(optimized)
    # then: Mul(x, W') + c, + D (D is overridable: its Add stays); body: Identity, Mul, Add.
    assert after["If.then_branch"] == 3, after
    assert after["Loop.body"] == 3, after
    assert after["If.else_branch"] == before["If.else_branch"]  # Not, If, Relu: nothing to fold at this level
    inner = next(a.g for n in optimized.graph.node if n.op_type == "If"
                 for a in n.attribute if a.name == "else_branch")
    inner_if = next(n for n in inner.node if n.op_type == "If")
    for a in inner_if.attribute:  # the nested branches' constants folded too
        assert not any(n.op_type == "Constant" for n in a.g.node), a.name
    assert not any(n.op_type == "Constant" for a in optimized.graph.node[0].attribute for n in a.g.node)
    for flag in (True, False):
        for override_d in (False, True):
            feeds = feeds_for(flag, override_d)
            want = ReferenceEvaluator(model).run(None, feeds)
            got_ort = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, feeds)
            got_nee = nee.InferenceSession(str(dst)).run(None, feeds)
            for w, a, b in zip(want, got_ort, got_nee):
                np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-6)
                np.testing.assert_allclose(b, w, rtol=1e-6, atol=1e-6)
