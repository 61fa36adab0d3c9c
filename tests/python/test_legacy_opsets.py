"""Operator versions older than opset 7, as the IR-3 PyTorch exports in onnx's `pytorch-converted` and
`pytorch-operator` model tests use them (tests/conformance/run_conformance.py runs those).

ONNX Runtime has no kernels for these versions (BatchNormalization-6, Gemm-6, PRelu-6: "Could not find
an implementation"), so the oracles are numpy, written from the operator specifications of those
versions, and onnx.reference where it implements them.
"""
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from session_configs import CONFIGS, session_options  # noqa: E402

F = TensorProto.FLOAT


def model(node, inputs, outputs, opset, initializers=()):
    g = helper.make_graph([node], "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    return m


def run(m, feed, config="default"):
    return nee.InferenceSession(m.SerializeToString(), session_options(config)).run(None, feed)


# ---- BatchNormalization-6: is_test ---------------------------------------------------------------

BN_SHAPE = [3, 4, 2, 5]


def bn_model(opset, n_outputs=1, **attrs):
    c = BN_SHAPE[1]
    ins = [helper.make_tensor_value_info("x", F, BN_SHAPE)] + [
        helper.make_tensor_value_info(n, F, [c]) for n in ("scale", "bias", "mean", "var")]
    names = ["y", "running_mean", "running_var", "saved_mean", "saved_var"][:n_outputs]
    outs = [helper.make_tensor_value_info(n, F, None) for n in names]
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], names, **attrs)
    return model(node, ins, outs, opset)


def bn_feed():
    rng = np.random.default_rng(7)
    c = BN_SHAPE[1]
    return {"x": rng.normal(1.0, 2.0, BN_SHAPE).astype(np.float32),
            "scale": rng.uniform(0.5, 1.5, c).astype(np.float32),
            "bias": rng.normal(0, 1, c).astype(np.float32),
            "mean": rng.normal(0, 1, c).astype(np.float32),
            "var": rng.uniform(0.5, 2.0, c).astype(np.float32)}


def bn_numpy(f, mean, var, eps=1e-5):
    r = (1, -1, 1, 1)
    return (f["x"] - mean.reshape(r)) / np.sqrt(var.reshape(r) + eps) * f["scale"].reshape(r) + f["bias"].reshape(r)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("opset", [1, 6])
def test_batchnorm_before_7_with_is_test_uses_the_given_statistics(opset, config):
    """nee refused BatchNormalization below opset 7 ("does not exist at opset 6"): PyTorch's
    eval-mode exports (is_test=1) failed to load. Oracle: numpy and onnx.reference."""
    attrs = {"is_test": 1, "epsilon": 1e-3}
    if opset == 1:
        attrs["consumed_inputs"] = [0, 0, 0, 1, 1]  # legacy, ignored
    m = bn_model(opset, **attrs)
    f = bn_feed()
    (y,) = run(m, f, config)
    np.testing.assert_allclose(y, bn_numpy(f, f["mean"], f["var"], 1e-3), rtol=1e-5, atol=1e-5)
    if opset == 6:
        (ref,) = ReferenceEvaluator(m).run(None, f)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_batchnorm_6_without_is_test_is_training_mode(config):
    """is_test defaults to 0, training: normalize with the batch's statistics; the running ones
    move by momentum, the saved ones are the batch's (population variance, as onnx.reference)."""
    m = bn_model(6, n_outputs=5, momentum=0.8)
    f = bn_feed()
    y, running_mean, running_var, saved_mean, saved_var = run(m, f, config)
    axes = (0, 2, 3)
    batch_mean, batch_var = f["x"].mean(axis=axes), f["x"].var(axis=axes)
    np.testing.assert_allclose(y, bn_numpy(f, batch_mean, batch_var), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(saved_mean, batch_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(saved_var, batch_var, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(running_mean, f["mean"] * 0.8 + batch_mean * 0.2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(running_var, f["var"] * 0.8 + batch_var * 0.2, rtol=1e-5, atol=1e-6)


# ---- Gemm-6: broadcast ---------------------------------------------------------------------------


def gemm_model(opset, c_shape, **attrs):
    ins = [helper.make_tensor_value_info("a", F, [3, 4]), helper.make_tensor_value_info("b", F, [5, 4]),
           helper.make_tensor_value_info("c", F, c_shape)]
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, **attrs)
    return model(node, ins, [helper.make_tensor_value_info("y", F, None)], opset)


def gemm_feed(c_shape):
    rng = np.random.default_rng(3)
    return {"a": rng.normal(size=(3, 4)).astype(np.float32), "b": rng.normal(size=(5, 4)).astype(np.float32),
            "c": rng.normal(size=c_shape).astype(np.float32)}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize("c_shape,broadcast", [([3, 5], 0), ([5], 1), ([1, 5], 1), ([3, 1], 1), ([3, 5], 1)])
def test_gemm_before_7(opset, c_shape, broadcast, config):
    """nee refused Gemm below opset 7; PyTorch's nn.Linear export (Gemm-6, broadcast=1) failed to
    load. Oracle: numpy (alpha A B^T + beta C) and onnx.reference's Gemm_6."""
    m = gemm_model(opset, c_shape, alpha=0.5, beta=2.0, broadcast=broadcast)
    f = gemm_feed(c_shape)
    (y,) = run(m, f, config)
    want = 0.5 * f["a"] @ f["b"].T + 2.0 * f["c"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    if broadcast and opset == 6:  # onnx.reference has no Gemm-1, and adds C without beta when broadcast is 0
        (ref,) = ReferenceEvaluator(m).run(None, f)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [1, 6])
def test_gemm_before_7_refuses_a_c_to_broadcast_without_the_attribute(opset):
    """Without broadcast=1, C must be [M, N] (onnx.reference raises "without broadcast" too)."""
    m = gemm_model(opset, [5])
    with pytest.raises(Exception, match="broadcast attribute is 0"):
        run(m, gemm_feed([5]))
    if opset == 6:
        with pytest.raises(ValueError, match="without broadcast"):
            ReferenceEvaluator(m).run(None, gemm_feed([5]))


def test_gemm_6_requires_c():
    ins = [helper.make_tensor_value_info("a", F, [3, 4]), helper.make_tensor_value_info("b", F, [4, 5])]
    m = model(helper.make_node("Gemm", ["a", "b"], ["y"]), ins, [helper.make_tensor_value_info("y", F, None)], 6)
    with pytest.raises(Exception, match="input"):
        nee.InferenceSession(m.SerializeToString())


# ---- PRelu-6: a per-channel slope ----------------------------------------------------------------


def prelu_model(opset, x_shape, slope, as_initializer):
    ins = [helper.make_tensor_value_info("x", F, x_shape), helper.make_tensor_value_info("slope", F, list(slope.shape))]
    inits = [numpy_helper.from_array(slope, "slope")] if as_initializer else []
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    return model(node, ins, [helper.make_tensor_value_info("y", F, None)], opset, inits)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize("x_shape", [[2, 3], [2, 3, 4], [2, 3, 4, 5], [2, 3, 3]])
@pytest.mark.parametrize("as_initializer", [False, True])
def test_prelu_before_7_takes_one_slope_per_channel(opset, x_shape, as_initializer, config):
    """PRelu-6's slope "of size 1 is shared across channels", otherwise one per channel (axis 1), as
    PyTorch's nn.PReLU(num_parameters=C) exports it. nee applied numpy broadcasting (opset 7's rule)
    and refused [2,3,4] with [3]. Oracle: numpy with the slope as [C, 1, ...]; [2, 3, 3] is the case
    where numpy broadcasting would have run but along the last axis."""
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = prelu_model(opset, x_shape, slope, as_initializer)
    x = np.random.default_rng(5).normal(size=x_shape).astype(np.float32)
    feed = {"x": x} if as_initializer else {"x": x, "slope": slope}
    (y,) = run(m, feed, config)
    s = slope.reshape([3] + [1] * (len(x_shape) - 2))
    np.testing.assert_array_equal(y, np.where(x < 0, x * s, x))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_prelu_7_still_broadcasts_as_numpy(config):
    """From opset 7 the same [2, 3, 3] x [3] aligns the slope with the last axis (onnxruntime agrees)."""
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = prelu_model(7, [2, 3, 3], slope, False)
    m.ir_version = 7
    x = np.random.default_rng(5).normal(size=[2, 3, 3]).astype(np.float32)
    (y,) = run(m, {"x": x, "slope": slope}, config)
    np.testing.assert_array_equal(y, np.where(x < 0, x * slope, x))
    import onnxruntime as ort

    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "slope": slope})
    np.testing.assert_array_equal(y, want)


# ---- RNN, GRU, LSTM version 1 (and GRU-3) --------------------------------------------------------

RNN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_model(op, opset, direction, with_outputs, **attrs):
    seq, batch, inp, hidden = 4, 2, 3, 5
    dirs = 2 if direction == "bidirectional" else 1
    g = RNN_GATES[op]
    ins = [helper.make_tensor_value_info("x", F, [seq, batch, inp]),
           helper.make_tensor_value_info("w", F, [dirs, g * hidden, inp]),
           helper.make_tensor_value_info("r", F, [dirs, g * hidden, hidden]),
           helper.make_tensor_value_info("b", F, [dirs, 2 * g * hidden])]
    outs = ["y", "y_h", "y_c"][: (3 if op == "LSTM" else 2)]
    if direction is not None:
        attrs["direction"] = direction
    node = helper.make_node(op, ["x", "w", "r", "b"], outs, hidden_size=hidden, **attrs)
    m = model(node, ins, [helper.make_tensor_value_info(n, F, None) for n in outs[:with_outputs]], opset)
    feed = {}
    rng = np.random.default_rng(11)
    for vi in ins:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feed[vi.name] = rng.uniform(-0.8, 0.8, dims).astype(np.float32)
    return m, feed


def ort_run(m, feed):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("op,opset", [("RNN", 1), ("GRU", 1), ("GRU", 3), ("LSTM", 1)])
@pytest.mark.parametrize("direction", [None, "reverse", "bidirectional"])
def test_recurrent_ops_before_7_compute_what_7_does(op, opset, direction, config):
    """nee refused RNN/GRU/LSTM-1 and GRU-3 ("introduced in opset 7"). They compute what version 7
    does (output_sequence only said whether Y was wanted; GRU-1 is linear_before_reset=0). Oracle:
    onnxruntime, which has no kernel before 7, on the same node at opset 7. GRU-1's declared default
    direction is the misspelled "foward" (direction None: forward)."""
    old_attrs = {"output_sequence": 1} if opset == 1 else {}
    m, feed = rnn_model(op, opset, direction, 3, **old_attrs)
    m7, _ = rnn_model(op, 7, direction, 3)
    m7.ir_version = 7
    got = run(m, feed, config)
    want = ort_run(m7, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---- Split-1: the split attribute ----------------------------------------------------------------


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("as_input", [False, True])
def test_split_1_reads_the_split_attribute_or_input(as_input, config):
    """Split-1 takes the sizes from its optional second input or, without it, from the split
    attribute. The shape rule read only the input, so an attribute split of an axis that does not
    divide evenly was refused ("cannot be split evenly into 2 outputs"). onnxruntime and
    onnx.reference have no Split-1; oracle: numpy.split."""
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    ins = [helper.make_tensor_value_info("x", F, [2, 3, 5])]
    feed = {"x": x}
    if as_input:
        # Split-1 types its split input as T, the data's type (the checker refuses int64 there).
        ins.append(helper.make_tensor_value_info("split", F, [2]))
        feed["split"] = np.array([2, 3], np.float32)
        node = helper.make_node("Split", ["x", "split"], ["y", "z"], axis=2)
    else:
        node = helper.make_node("Split", ["x"], ["y", "z"], axis=2, split=[2, 3])
    m = model(node, ins, [helper.make_tensor_value_info(n, F, None) for n in ("y", "z")], 1)
    y, z = run(m, feed, config)
    want_y, want_z = np.split(x, [2], axis=2)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


# ---- Upsample-1: height_scale and width_scale ----------------------------------------------------


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", [None, "nearest", "bilinear"])
def test_upsample_1_scales_height_and_width(mode, config):
    """Upsample-1 (experimental) takes height_scale and width_scale for an NCHW input; nee refused it
    ("introduced in opset 7"). It is Upsample-7 with scales [1, 1, h, w]. Oracle: onnxruntime (which has
    no Upsample-1) on that Upsample-7, and the spec's own nearest example."""
    x = np.random.default_rng(2).normal(size=(2, 3, 4, 5)).astype(np.float32)
    attrs = {} if mode is None else {"mode": mode}
    ins = [helper.make_tensor_value_info("x", F, [2, 3, 4, 5])]
    outs = [helper.make_tensor_value_info("y", F, None)]
    m1 = model(helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0, **attrs), ins, outs, 1)
    m7 = model(helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0],
                                **({} if mode is None else {"mode": "linear" if mode == "bilinear" else mode})),
               ins, outs, 7)
    m7.ir_version = 7
    (y,) = run(m1, {"x": x}, config)
    (want,) = ort_run(m7, {"x": x})
    assert y.shape == (2, 3, 8, 15)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_upsample_1_spec_example():
    data = np.array([[[[1, 2], [3, 4]]]], np.float32)
    ins = [helper.make_tensor_value_info("x", F, [1, 1, 2, 2])]
    m = model(helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=2.0, mode="nearest"), ins,
              [helper.make_tensor_value_info("y", F, None)], 1)
    (y,) = run(m, {"x": data})
    np.testing.assert_array_equal(y, [[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]])
