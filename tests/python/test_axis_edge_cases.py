"""Axis attributes and inputs at the edges: a rank-0 input, axes outside [-rank, rank).

Several kernels and shape rules indexed a scalar's (empty) dims by a normalized
axis 0 and crashed: Concat, Compress, Unique, LpNormalization,
MeanVarianceNormalization, SplitToSequence, QLinearConcat (ops/op_util.h
NormalizeDimAxis). Each case (tests/python/axis_cases.py) must either compute
what onnx.reference computes or fail with a nee error naming the node; never
crash. nee is stricter than onnx.reference where the ONNX specification
leaves no valid axis (e.g. Flatten, LayerNormalization or OneHot with an axis
outside the documented range: the reference indexes numpy arrays with it).
"""
import numpy as np
import pytest
from onnx import helper, reference

import nee
from axis_cases import cases

CASES = list(cases())

# Where onnx.reference fails but nee computes a result, and why that is right.
NEE_COMPUTES = {
    # Softmax of a scalar along its only (implicit) axis: one element, as in ONNX Runtime.
    "LogSoftmax_rank0_axis-1": np.float32(0.0), "LogSoftmax_rank0_axis0": np.float32(0.0),
    "Hardmax_rank0_axis-1": np.float32(1.0), "Hardmax_rank0_axis0": np.float32(1.0),
    # TopK of a scalar with k=1: the scalar itself and index 0.
    "TopK_rank0_axis0": np.float32(2.0),
}
# Where onnx.reference computes a different shape than the specification says.
SPEC_DIFFERS = {
    # CumSum's output has the input's shape (a scalar here); the reference
    # returns np.cumsum's flattened [2.0].
    "CumSum_rank0_axis0": np.float32(2.0),
}
# onnx.reference has no kernel for these (com.microsoft), or an axis the
# specification ignores for per-tensor scales (QuantizeLinear and
# DequantizeLinear with a one-element scale).
NO_REFERENCE = ("QLinearConcat_", "DequantizeLinear_")


def run_reference(model, feeds):
    try:
        return reference.ReferenceEvaluator(model).run(None, feeds), None
    except Exception as e:  # noqa: BLE001 - the reference's own failures vary in type
        return None, e


@pytest.mark.parametrize("name,model,feeds", CASES, ids=[c[0] for c in CASES])
def test_axis_case_is_computed_as_the_reference_or_refused(name, model, feeds):
    try:
        got = nee.InferenceSession(model.SerializeToString()).run(None, feeds)
        nee_error = None
    except nee.NeeError as e:
        got, nee_error = None, e
    if nee_error is not None:
        op = model.graph.node[-1].op_type
        assert f"{op})" in str(nee_error), str(nee_error)  # "node 'n' (Op)" or "(domain.Op)"
        return
    if name in SPEC_DIFFERS:
        assert np.asarray(got[0]).shape == np.shape(SPEC_DIFFERS[name])
        np.testing.assert_allclose(got[0], SPEC_DIFFERS[name])
        return
    if name.startswith(NO_REFERENCE):
        # Per-tensor quantization: the axis is unused; check the arithmetic.
        if name.startswith("DequantizeLinear_"):
            np.testing.assert_allclose(got[0], (feeds["q"].astype(np.float32) - 0) * 0.5)
            return
        # QLinearConcat of q with itself, input and output sharing scale and
        # zero point: requantizing leaves the values as they are.
        axis = helper.get_attribute_value(model.graph.node[0].attribute[0])
        np.testing.assert_array_equal(got[0], np.concatenate([feeds["q"], feeds["q"]], axis=axis))
        return
    expected, ref_error = run_reference(model, feeds)
    if ref_error is not None:
        assert name in NEE_COMPUTES, f"{name}: onnx.reference fails ({ref_error}) but nee computed {got}"
        np.testing.assert_allclose(np.asarray(got[0]), NEE_COMPUTES[name])
        return
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, list):
            assert len(g) == len(e)
            for gi, ei in zip(g, e):
                np.testing.assert_allclose(gi, ei, rtol=1e-6, atol=1e-6)
        else:
            assert np.asarray(g).shape == np.asarray(e).shape, name
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_scalar_axis_errors_name_the_problem():
    by_name = {c[0]: c for c in CASES}
    for name in ("Concat_rank0_axis0", "Compress_rank0_axis0", "Unique_rank0_axis0", "LpNormalization_rank0_axis0",
                 "MeanVarianceNormalization_rank0_axis0", "SplitToSequence_rank0_axis0",
                 "Concat_dynamic_rank0", "Compress_dynamic_rank0",
                 "Unique_dynamic_rank0", "LpNormalization_dynamic_rank0", "SplitToSequence_dynamic_rank0",
                 "MeanVarianceNormalization_dynamic_rank0"):
        _, model, feeds = by_name[name]
        with pytest.raises(nee.NeeError) as info:
            nee.InferenceSession(model.SerializeToString()).run(None, feeds)
        message = str(info.value)
        assert "scalar" in message or "rank 0" in message or "rank >= 1" in message, f"{name}: {message}"
