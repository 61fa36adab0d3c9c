"""Attribute defaults live in one place: each op version's declaration (src/ops/attr_spec.inc,
generated from onnx's and onnxruntime's schemas). Sessions point every node at its declaration, and
`Node::Get*` answers an absent attribute with the declared default; a kernel's own fallback is only
for nodes that are not bound (and must agree, which the audit below checks).

Oracles: onnxruntime and onnx.reference for the values where nee's old hard-coded fallbacks
disagreed with the spec (RNN's activations, Clip-6's bounds); numpy with the default onnx.defs
declares for Selu-1 (onnxruntime has no Selu-1 kernel, and onnx.reference applies Selu-6's constants
at every opset).
"""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nee
from nee import _nee

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))


def session(m, config="default", **options):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from session_configs import session_options

    so = session_options(config)
    for k, v in options.items():
        setattr(so, k, v)
    return nee.InferenceSession(m.SerializeToString(), so)


def ort_run(m, feed):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feed)


def test_node_tests_read_no_fallback_that_disagrees_with_a_declaration():
    """Runs every ONNX node test (and the model-level tests, whose opset-6 models reach the early
    versions: Gemm-6's broadcast, BatchNormalization-6's is_test) under the default and
    reference-kernel configurations with the audit on: no kernel, shape rule or pass may read an
    absent attribute with a fallback other than its declared default (or treat as required one the
    spec gives a default)."""
    import run_conformance as rc

    _nee._take_attr_default_mismatches()
    _nee._set_attr_default_audit(True)
    try:
        for name, case in sorted(rc.load_cases(rc.KINDS).items()):
            for config in ("default", "reference"):
                try:
                    rc.run_case(case, config)
                except Exception:  # pass or fail is the conformance suite's business
                    pass
    finally:
        _nee._set_attr_default_audit(False)
    assert _nee._take_attr_default_mismatches() == []


def unary_model(op, opset, shape, **attrs):
    n = helper.make_node(op, ["x"], ["y"], name="n", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


CONFIGS = ["default", "no-opt", "reference"]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("activations", [None, ["Tanh", "Tanh"]])
def test_rnn_forward_takes_the_first_of_the_declared_two_activations(config, activations):
    """RNN declares activations=["Tanh", "Tanh"]; a forward RNN uses the first. nee used to refuse
    the explicit pair ("activations has 2 entries"); onnxruntime runs both spellings."""
    rng = np.random.default_rng(0)
    feed = {"X": rng.standard_normal((3, 2, 4)).astype(np.float32),
            "W": rng.standard_normal((1, 5, 4)).astype(np.float32),
            "R": rng.standard_normal((1, 5, 5)).astype(np.float32)}
    attrs = {} if activations is None else {"activations": activations}
    n = helper.make_node("RNN", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=5, **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feed.items()],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    expected = ort_run(m, feed)
    actual = session(m, config).run(None, feed)
    for e, a in zip(expected, actual):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


CLIP_X = np.array([-np.inf, -1.0, 0.5, 2.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("opset", [6, 10])
def test_clip6_bounds_default_to_flt_max(config, opset):
    """Clip-6 declares min=-FLT_MAX and max=FLT_MAX: infinities become finite (nee treated absent
    bounds as none). Oracle: onnx.reference at opset 6 and 10, onnxruntime at 10."""
    from onnx.reference import ReferenceEvaluator

    m = unary_model("Clip", opset, [6])
    (expected,) = ReferenceEvaluator(m).run(None, {"x": CLIP_X})
    if opset == 10:
        np.testing.assert_array_equal(ort_run(m, {"x": CLIP_X})[0], expected)
    (actual,) = session(m, config).run(None, {"x": CLIP_X})
    np.testing.assert_array_equal(actual, expected)
    assert np.isfinite(actual[[0, 4]]).all()


@pytest.mark.parametrize("config", CONFIGS)
def test_clip6_fused_into_conv_keeps_the_declared_bounds(config):
    """Conv + Clip-10 without bounds (fused into FusedConv at the default level): an infinite
    convolution output becomes FLT_MAX, as in onnxruntime."""
    w = np.ones((1, 1, 1, 1), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Clip", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
                          [onnx.numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    m.ir_version = 7
    x = np.array([-np.inf, 1, 2, np.inf], np.float32).reshape(1, 1, 2, 2)
    (expected,) = ort_run(m, {"x": x})
    (actual,) = session(m, config).run(None, {"x": x})
    np.testing.assert_array_equal(actual, expected)
    assert np.isfinite(actual).all()


@pytest.mark.parametrize("config", CONFIGS)
def test_selu1_uses_selu1s_declared_constants(config):
    """Selu-1 (opsets 1 to 5) declares alpha=1.6732 and gamma=1.0507; Selu-6 the float32 constants
    1.67326319... and 1.05070102... (nee used the latter for both)."""
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], np.float32)
    for opset, since in ((5, 1), (6, 6)):
        attrs = onnx.defs.get_schema("Selu", opset).attributes
        assert onnx.defs.get_schema("Selu", opset).since_version == since
        alpha = np.float32(attrs["alpha"].default_value.f)
        gamma = np.float32(attrs["gamma"].default_value.f)
        expected = np.where(x <= 0, gamma * (alpha * np.exp(x) - alpha), gamma * x).astype(np.float32)
        (actual,) = session(unary_model("Selu", opset, [5]), config).run(None, {"x": x})
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=0)
    assert alpha != np.float32(1.6732)  # the two versions' defaults do differ


def test_written_models_gain_no_attributes(tmp_path):
    """The optimized model a session writes (optimized_model_filepath) keeps its nodes' attributes
    as they were: declared defaults are read, never materialized."""
    m = unary_model("LeakyRelu", 17, [2, 3])
    out = tmp_path / "optimized.onnx"
    session(m, graph_optimization_level=1, optimized_model_filepath=str(out))
    written = onnx.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["LeakyRelu"]
    assert list(written.graph.node[0].attribute) == []


@pytest.mark.parametrize("smooth_softmax", [None, -1, 0])
def test_group_query_attention_smooth_softmax_default(smooth_softmax):
    """com.microsoft.GroupQueryAttention declares smooth_softmax=-1; onnxruntime smooths only at 1 (absent,
    -1 and 0 agree). Read with the declared default, a check `!= 0` refused every GQA node without the
    attribute in a session (found by the audit in the unit tests' RunOp)."""
    rng = np.random.default_rng(1)
    # One decoding step (S = 1) after 3 cached positions: 2 query heads sharing 1 kv head of size 8.
    feed = {"q": rng.standard_normal((2, 1, 16)).astype(np.float32),
            "k": rng.standard_normal((2, 1, 8)).astype(np.float32),
            "v": rng.standard_normal((2, 1, 8)).astype(np.float32),
            "past_k": rng.standard_normal((2, 1, 3, 8)).astype(np.float32),
            "past_v": rng.standard_normal((2, 1, 3, 8)).astype(np.float32),
            "seqlens_k": np.array([3, 2], np.int32), "total": np.array(4, np.int32)}
    attrs = {} if smooth_softmax is None else {"smooth_softmax": smooth_softmax}
    n = helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"], ["y", "pk", "pv"],
                         domain="com.microsoft", num_heads=2, kv_num_heads=1, **attrs)
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT32 if name in ("seqlens_k", "total") else TensorProto.FLOAT,
                                            value.shape) for name, value in feed.items()]
    g = helper.make_graph([n], "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "pk", "pv")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    expected = ort_run(m, feed)
    for config in CONFIGS:
        actual = session(m, config).run(None, feed)
        for e, a in zip(expected, actual):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
