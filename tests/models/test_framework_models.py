"""Models exported by other frameworks' real converters (LightGBM and XGBoost through onnxmltools,
Keras through tf2onnx, JAX through jax2onnx, scikit-learn pipelines through skl2onnx), made by
tests/models/export_frameworks.py. Each runs through nee under every session configuration and is
compared with the framework's own outputs stored next to it. Needs numpy and nee only.

Tolerances (absolute atol, relative rtol), by what is compared:
  label  exact: a class label must never change.
  proba  atol 1e-4: the frameworks compute in float64 (trees, scikit-learn) or float32 with other
         summation orders; the exports compute in float32, and probabilities are in [0, 1].
  value  tree ensembles and scikit-learn: rtol 1e-5, atol 1e-4 — float32 sums of a few dozen
         leaf values against the framework's float64 (diabetes targets are ~25..350).
         neural networks (Keras, JAX): rtol 1e-4, atol 1e-5, as for the PyTorch exports —
         float32 both sides, differing only in accumulation order and in exp/tanh kernels.
"""
import glob
import json
import os
import sys

import numpy as np
import pytest

import nee

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ["lightgbm", "xgboost", "keras", "jax", "sklearn_pipelines"]
FIXTURES = os.path.join(HERE, "frameworks")  # not tests/models/<fw>: that would shadow the packages
MODELS = sorted(os.path.relpath(os.path.dirname(p), FIXTURES)
                for fw in FRAMEWORKS for p in glob.glob(os.path.join(FIXTURES, fw, "*", "meta.json")))

sys.path.insert(0, os.path.join(HERE, ".."))
from session_configs import CONFIGS, session_options  # noqa: E402

NEURAL = {"keras", "jax"}

# Known nee failures: model -> reason (each an xfail(strict=True) so a fix shows up).
KNOWN_FAILURES = {}


def tolerance(framework, kind):
    if kind == "proba":
        return dict(rtol=0, atol=1e-4)
    if framework in NEURAL:
        return dict(rtol=1e-4, atol=1e-5)
    return dict(rtol=1e-5, atol=1e-4)


def load(model):
    folder = os.path.join(FIXTURES, model)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    feeds = {name: np.load(os.path.join(folder, f"input_{name}.npy")) for name in meta["inputs"]}
    expected = {os.path.basename(p)[len("expected_"):-len(".npy")]: np.load(p)
                for p in glob.glob(os.path.join(folder, "expected_*.npy"))}
    return folder, meta, feeds, expected


def as_matrix(value, zipmap):
    if not zipmap:
        return np.asarray(value)
    # ZipMap: one {label: probability} dict per row; columns in sorted label order, which is the
    # frameworks' classes_ order.
    assert isinstance(value, list) and all(isinstance(row, dict) for row in value)
    keys = sorted(value[0])
    assert all(sorted(row) == keys for row in value)
    return np.array([[row[k] for k in keys] for row in value], dtype=np.float32)


def test_models_were_exported():
    found = {m.split(os.sep)[0] for m in MODELS}
    assert set(FRAMEWORKS) <= found, MODELS
    assert len(MODELS) >= 18, MODELS


def cases():
    for m in MODELS:
        if m in KNOWN_FAILURES:
            yield pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[m]))
        else:
            yield m


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("model", list(cases()))
def test_matches_framework(model, config):
    folder, meta, feeds, expected = load(model)
    sess = nee.InferenceSession(os.path.join(folder, "model.onnx"), session_options(config))
    names = [o.name for o in sess.get_outputs()]
    outputs = dict(zip(names, sess.run(None, feeds)))
    for check in meta["checks"]:
        got = as_matrix(outputs[check["output"]], check.get("zipmap", False))
        want = expected[check["expected"]]
        assert got.shape == want.shape, (check, got.shape, want.shape)
        if check["kind"] == "label":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, **tolerance(meta["framework"], check["kind"]))
