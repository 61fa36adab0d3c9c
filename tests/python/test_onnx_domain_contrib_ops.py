"""Ops whose ONNX-domain declaration is not onnx's: LayerNormalization-1 and
SimplifiedLayerNormalization-1, which onnxruntime's contrib schemas put in the ONNX domain (its
transformer optimizer writes them) and which src/ops/attr_spec.inc now declares from there; and
Dropout-1/6, whose is_test=0 (the default) is training mode."""
import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nee

from cli_util import NEE


def ort_session(m):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def norm_model(op, opset=13, n_outputs=1, **attrs):
    """X [2, 3, 8] normalized over its last axis; LayerNormalization also takes a bias. The
    optional outputs (mean / inv_std_var) are float [2, 3, 1]."""
    rng = np.random.default_rng(7)
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [8], rng.standard_normal(8).astype(np.float32))
    inits = [scale]
    inputs = ["x", "scale"]
    if op == "LayerNormalization":
        inits.append(helper.make_tensor("bias", TensorProto.FLOAT, [8], rng.standard_normal(8).astype(np.float32)))
        inputs.append("bias")
    outputs = ["y", "stat1", "stat2"][:n_outputs]
    n = helper.make_node(op, inputs, outputs, name="n", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


OPS = [("LayerNormalization", 3), ("SimplifiedLayerNormalization", 2)]


@pytest.mark.parametrize("op,n_outputs", OPS)
def test_declared_and_run_as_onnxruntime_runs_them(op, n_outputs):
    """At opset 13 the declaration in force is onnxruntime's version 1 (LayerNormalization-17 is
    onnx's); nee runs the op with every output and matches ONNX Runtime."""
    decls = {(d, o, v) for d, o, v, *_ in nee._nee._op_declarations()}
    assert ("", op, 1) in decls
    m = norm_model(op, n_outputs=n_outputs, axis=-1, epsilon=1e-3, stash_type=1)
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    got = nee.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    want = ort_session(m).run(None, {"x": x})
    assert len(got) == len(want) == n_outputs
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,n_outputs", OPS)
def test_attributes_are_checked_as_onnxruntime_checks_them(op, n_outputs, tmp_path):
    """A declared attribute of another type is refused by the session and reported by `nee check`,
    as ONNX Runtime refuses it. An undeclared one is let through: onnxruntime's version-1 schemas,
    like onnx's LayerNormalization-17, accept any (scripts/gen_attr_spec.py asks ONNX Runtime)."""
    m = norm_model(op, axis=1.0)
    message = "node 'n' (%s): attribute 'axis' must be INT, got FLOAT (%s-1)" % (op, op)
    with pytest.raises(nee.InvalidModel, match=re.escape(message)):
        nee.InferenceSession(m.SerializeToString())
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    r = subprocess.run([NEE, "check", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and message in r.stdout, r.stdout + r.stderr
    with pytest.raises(Exception, match="axis"):
        ort_session(m)

    m = norm_model(op, alpha=1.0)
    x = np.ones((2, 3, 8), np.float32)
    np.testing.assert_allclose(nee.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0],
                               ort_session(m).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    onnx.save(m, str(path))
    r = subprocess.run([NEE, "check", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_arity_comes_from_the_declaration():
    """SimplifiedLayerNormalization-1 declares X and scale: a bias is refused, naming the formals."""
    m = norm_model("SimplifiedLayerNormalization")
    m.graph.initializer.append(helper.make_tensor("bias", TensorProto.FLOAT, [8], [0.0] * 8))
    m.graph.node[0].input.append("bias")
    with pytest.raises(nee.InvalidModel,
                       match=r"has 3 inputs, SimplifiedLayerNormalization-1 allows 2 \(X, scale\)"):
        nee.InferenceSession(m.SerializeToString())


# ---- Dropout-1 and -6 ----------------------------------------------------------------------------


def dropout_model(opset, **attrs):
    n = helper.make_node("Dropout", ["x"], ["y", "mask"], name="n", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("mask", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    return m


@pytest.mark.parametrize("opset", [1, 6])
def test_training_mode_dropout_is_refused_when_the_session_is_created(opset):
    """is_test=0, the default, is training mode ("a random dropout"): nee infers only and refuses
    it, as it refuses Dropout-12's training_mode=1, instead of returning its input unchanged.
    ONNX Runtime refuses these versions whatever is_test says (no kernel before Dropout-7)."""
    for attrs in ({}, {"is_test": 0}, {"is_test": 0, "ratio": 0.3}):
        with pytest.raises(nee.NotImplemented, match=r"node 'n' \(Dropout\): training-mode Dropout \(is_test=0"):
            nee.InferenceSession(dropout_model(opset, **attrs).SerializeToString())
    with pytest.raises(Exception, match="Could not find an implementation for Dropout"):
        ort_session(dropout_model(opset, is_test=1))


@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize("attrs", [{"is_test": 1}, {"is_test": 1, "ratio": 0.3}, {"is_test": 0, "ratio": 0.0}])
def test_test_mode_dropout_copies_its_input(opset, attrs):
    """is_test=1 ("the output is simply Y = X"), or a ratio of 0, which drops nothing: a copy, and a
    mask keeping every element (of X's type before Dropout-10)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, mask = nee.InferenceSession(dropout_model(opset, **attrs).SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(mask, np.ones((2, 3), np.float32))
