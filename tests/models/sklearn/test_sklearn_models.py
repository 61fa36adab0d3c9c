"""Runs the scikit-learn models exported by export_models.py through nee and
compares with scikit-learn's own predictions (stored as .npy next to each
model): labels exactly, probabilities within 1e-4, regression values within
a relative 1e-5. Needs only numpy and the nee package (not scikit-learn).
"""
import json
import os

import numpy as np
import pytest

import nee

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MODELS = sorted(d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "model.onnx")))


def load(name):
    folder = os.path.join(HERE, name)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    arrays = {f[:-4]: np.load(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".npy")}
    return folder, meta, arrays


def run(folder, x, threads=0):
    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    session = nee.InferenceSession(os.path.join(folder, "model.onnx"), options)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def probability_matrix(value, zipmap):
    if not zipmap:
        return np.asarray(value)
    # ZipMap output: one {label: probability} dict per row; columns in label
    # order, which is scikit-learn's classes_ order (sorted).
    assert isinstance(value, list) and all(isinstance(row, dict) for row in value)
    keys = sorted(value[0])
    assert all(sorted(row) == keys for row in value)
    return np.array([[row[k] for k in keys] for row in value], dtype=np.float32)


def test_models_were_exported():
    assert len(MODELS) >= 15, MODELS


@pytest.mark.parametrize("name", MODELS)
def test_matches_sklearn(name):
    folder, meta, arrays = load(name)
    outputs = run(folder, arrays["input_0"])
    if meta["kind"] == "classifier":
        label = np.asarray(outputs[meta["outputs"]["label"]])
        np.testing.assert_array_equal(label, arrays["expected_label"])
        proba = probability_matrix(outputs[meta["outputs"]["probabilities"]], meta["outputs"]["zipmap"])
        assert proba.shape == arrays["expected_proba"].shape
        np.testing.assert_allclose(proba, arrays["expected_proba"], rtol=0, atol=1e-4)
    else:
        value = np.asarray(outputs[meta["outputs"]["value"]])
        expected = arrays["expected_value"]
        assert value.shape == expected.shape
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["rf_classifier", "gb_regressor", "scaler_logreg_digits"])
def test_thread_count_does_not_change_results(name):
    folder, meta, arrays = load(name)
    x = np.repeat(arrays["input_0"], 20, axis=0)  # enough rows to split across threads
    one, four = run(folder, x, threads=1), run(folder, x, threads=4)
    for key in one:
        a, b = one[key], four[key]
        if isinstance(a, list):
            assert a == b
        else:
            np.testing.assert_array_equal(a, b)


def test_digits_demo_model():
    folder = os.path.join(REPO, "examples", "models")
    x = np.load(os.path.join(folder, "digits_test_x.npy"))
    y = np.load(os.path.join(folder, "digits_test_y.npy"))
    session = nee.InferenceSession(os.path.join(folder, "digits_logreg.onnx"))
    label, proba = session.run(["label", "probabilities"], {"input": x})
    assert label.dtype == np.int64 and label.shape == y.shape
    assert proba.dtype == np.float32 and proba.shape == (len(y), 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(label, proba.argmax(axis=1))
    # scikit-learn's own test accuracy (examples/models/README.md): 436 of 450.
    assert int((label == y).sum()) == 436
