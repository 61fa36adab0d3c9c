"""Checks the models nee's ONNX writer produces with the reference tools.

Runs the C++ test FormatWriter.WritesModelsForTheExternalChecker with
NEE_WRITTEN_MODELS_DIR pointing at a temporary folder, then for each model it
wrote: onnx.checker.check_model(full_check=True), and onnxruntime must load it
and give the same outputs as the original model (or, for models built in the
IR, as numpy).

    NEE_UNIT_TEST_BINARY=build/bin/nee_unit_tests \
        /work/main/.venv/bin/python -m pytest tests/unit/format/check_written_models.py
"""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(HERE, "data")

# Written model -> the fixture it was read from (None: built in the IR).
MODELS = {
    "small.onnx": "small.onnx",
    "functions.onnx": "functions.onnx",
    "external.onnx": "external/model.onnx",
    "external_inlined.onnx": "external/model.onnx",
    "linear.onnx": None,
    "linear_external.onnx": None,
}


@pytest.fixture(scope="module")
def written_dir(tmp_path_factory):
    binary = os.environ.get("NEE_UNIT_TEST_BINARY", os.path.join(REPO, "build", "bin", "nee_unit_tests"))
    if not os.path.isabs(binary):
        binary = os.path.join(REPO, binary)
    assert os.path.exists(binary), f"unit test binary not found: {binary} (set NEE_UNIT_TEST_BINARY)"
    out = tmp_path_factory.mktemp("written")
    env = dict(os.environ, NEE_WRITTEN_MODELS_DIR=str(out))
    result = subprocess.run(
        [binary, "--gtest_filter=FormatWriter.WritesModelsForTheExternalChecker"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return str(out)


def random_inputs(session, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in inp.shape]
        assert inp.type == "tensor(float)", inp.type
        feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", sorted(MODELS))
def test_written_model_is_valid_and_equivalent(written_dir, name):
    path = os.path.join(written_dir, name)
    assert os.path.exists(path), f"{name} was not written"
    onnx.checker.check_model(path, full_check=True)
    written = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    source = MODELS[name]
    for seed in range(3):
        feeds = random_inputs(written, seed)
        got = written.run(None, feeds)
        if source is None:
            # linear*.onnx: y = x @ w + b with the constants of BuildLinearModel.
            w = np.array([[1, -1], [0.5, 2], [0, 3]], np.float32)
            b = np.array([0.25, -0.75], np.float32)
            expected = [feeds["x"] @ w + b]
        else:
            original = ort.InferenceSession(os.path.join(DATA, source), providers=["CPUExecutionProvider"])
            expected = original.run(None, feeds)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_external_data_is_in_a_side_file(written_dir):
    model = onnx.load(os.path.join(written_dir, "external.onnx"), load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert [t.name for t in external] == ["w_big", "b_small"]
    for t in external:
        info = {e.key: e.value for e in t.external_data}
        assert not os.path.isabs(info["location"])
        assert int(info["offset"]) % 4096 == 0
