"""Models exported by real frameworks, run through nee (CLI and Python API) without the framework,
compared with the framework's own outputs (PyTorch) or ONNX Runtime's (quantized models)."""
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

import nee

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
NEE = os.environ.get("NEE_BIN", os.path.join(ROOT, "build", "bin", "nee"))

# Folders holding model.onnx with input_<i>.npy and expected_<i>.npy (sklearn has its own test).
MODEL_DIRS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(HERE, "*", "*", "expected_0.npy")))


def tolerance(folder):
    # Quantized models: one uint8 step of difference in an intermediate is allowed.
    return (1e-2, 2e-2) if "quantized" in folder else (1e-4, 1e-5)


def load_case(folder):
    inputs = [np.load(p) for p in sorted(glob.glob(os.path.join(folder, "input_*.npy")))]
    expected = [np.load(p) for p in sorted(glob.glob(os.path.join(folder, "expected_*.npy")))]
    return inputs, expected


# Every model must agree with its framework under each session configuration.
sys.path.insert(0, os.path.join(HERE, ".."))
from session_configs import CONFIGS, session_options  # noqa: E402


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("folder", MODEL_DIRS, ids=lambda f: os.path.relpath(f, HERE))
def test_python_api_matches_framework(folder, config):
    inputs, expected = load_case(folder)
    sess = nee.InferenceSession(os.path.join(folder, "model.onnx"), session_options(config))
    feed = {arg.name: x for arg, x in zip(sess.get_inputs(), inputs)}
    outputs = sess.run(None, feed)
    rtol, atol = tolerance(folder)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if "quantized" in folder:
        np.testing.assert_array_equal(outputs[0].argmax(-1), expected[0].argmax(-1))


@pytest.mark.parametrize("folder", MODEL_DIRS, ids=lambda f: os.path.relpath(f, HERE))
def test_cli_matches_framework(folder, tmp_path):
    inputs, expected = load_case(folder)
    sess = nee.InferenceSession(os.path.join(folder, "model.onnx"))
    args = [NEE, "run", os.path.join(folder, "model.onnx"), "--output-dir", str(tmp_path)]
    for i, arg in enumerate(sess.get_inputs()):
        args += ["--input", f"{arg.name}={os.path.join(folder, f'input_{i}.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rtol, atol = tolerance(folder)
    for i, want in enumerate(expected):
        np.testing.assert_allclose(np.load(tmp_path / f"output_{i}.npy"), want, rtol=rtol, atol=atol)
