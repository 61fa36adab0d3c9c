"""com.microsoft DynamicQuantizeLSTM behaves as ONNX Runtime, which defines it: X and the
hidden state are quantized to uint8 on the fly before the integer products. ONNX Runtime
on one thread is the oracle: at more threads it quantizes the hidden state per group of batch
rows, a group per thread, so its result moves with its thread count, while nee's stays the
one-thread result at any thread count (bitwise). The float LSTM on the dequantized weights,
which nee computed before, differs from it by far more than the tolerance here."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

HIDDEN, INPUT, SEQ = 6, 5, 7


def lstm_model(direction, per_column, signed, with_lens, with_states):
    rng = np.random.default_rng(7)
    dirs = 2 if direction == "bidirectional" else 1
    # Signed weights in 7 bits, as onnxruntime.quantization's reduce_range makes them: ONNX
    # Runtime's AVX2 (non-VNNI) u8 x s8 kernel adds pairs of products in saturating 16-bit
    # lanes, which full-range int8 weights overflow, so on such CPUs the oracle itself is off.
    qtype, lo, hi = (np.int8, -64, 64) if signed else (np.uint8, 0, 256)
    w = rng.integers(lo, hi, (dirs, INPUT, 4 * HIDDEN)).astype(qtype)
    r = rng.integers(lo, hi, (dirs, HIDDEN, 4 * HIDDEN)).astype(qtype)
    scale_shape = (dirs, 4 * HIDDEN) if per_column else (dirs,)
    zero = 0 if signed else 128
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
             numpy_helper.from_array(rng.uniform(-0.3, 0.3, (dirs, 8 * HIDDEN)).astype(np.float32), "B"),
             numpy_helper.from_array(rng.uniform(0.004, 0.02, scale_shape).astype(np.float32), "ws"),
             numpy_helper.from_array(np.full(scale_shape, zero, qtype), "wz"),
             numpy_helper.from_array(rng.uniform(0.004, 0.02, scale_shape).astype(np.float32), "rs"),
             numpy_helper.from_array(np.full(scale_shape, zero, qtype), "rz")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [SEQ, "batch", INPUT])]
    names = ["X", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"]
    if with_lens:
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch"]))
        names[4] = "lens"
    if with_states:
        for name in ("h0", "c0"):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [dirs, "batch", HIDDEN]))
        names[5], names[6] = "h0", "c0"
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h", "Y_c"], domain="com.microsoft",
                            hidden_size=HIDDEN, direction=direction)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")]
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def feeds(batch, with_lens, with_states, dirs):
    rng = np.random.default_rng(11)
    feed = {"X": rng.uniform(-2, 2, (SEQ, batch, INPUT)).astype(np.float32)}
    if with_lens:
        feed["lens"] = np.array([SEQ, 3, 0, 5][:batch], np.int32)
    if with_states:
        feed["h0"] = rng.uniform(-1, 1, (dirs, batch, HIDDEN)).astype(np.float32)
        feed["c0"] = rng.uniform(-1, 1, (dirs, batch, HIDDEN)).astype(np.float32)
    return feed


def _threads(n):
    options = nee.SessionOptions()
    options.intra_op_num_threads = n
    return options


def ort_session(model, threads=1):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("per_column, signed", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("batch, with_lens, with_states", [(1, False, False), (3, False, True), (4, True, True)])
def test_dynamic_quantize_lstm_matches_onnxruntime(direction, per_column, signed, batch, with_lens, with_states):
    model = lstm_model(direction, per_column, signed, with_lens, with_states)
    feed = feeds(batch, with_lens, with_states, 2 if direction == "bidirectional" else 1)
    expected = ort_session(model, 1).run(None, feed)
    first = None
    for threads in (1, 2, 3):
        got = nee.InferenceSession(model, sess_options=_threads(threads)).run(None, feed)
        for name, g, e in zip(("Y", "Y_h", "Y_c"), got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=2e-5, err_msg=name)
        if first is None:
            first = got
        for g, f in zip(got, first):
            assert np.array_equal(g, f), f"{threads} threads changed the result"  # thread-count independent


def test_only_y_h_asked_for_keeps_finished_states():
    """Without Y, ONNX Runtime keeps a finished sequence's last state (not zeros) in the batch it
    quantizes at the next steps; the other sequences' results depend on that."""
    model = lstm_model("forward", True, True, True, True)
    feed = feeds(4, True, True, 1)
    expected = ort_session(model).run(["Y_h", "Y_c"], feed)
    got = nee.InferenceSession(model, sess_options=_threads(1)).run(["Y_h", "Y_c"], feed)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_run(bad):
    """A NaN or infinite X element is garbage in for both runtimes (their outputs then differ), but
    nee runs. NaN takes no part in the range X is quantized with (0 always does), so the steps
    before it come out as ONNX Runtime computes them with a 0 in its place."""
    model = lstm_model("forward", True, True, False, False)
    feed = feeds(2, False, False, 1)
    feed["X"][SEQ - 1, 1, 2] = bad  # the last step of the second sequence
    y, y_h, y_c = nee.InferenceSession(model, sess_options=_threads(1)).run(None, feed)
    assert y.shape == (SEQ, 1, 2, HIDDEN) and y_h.shape == y_c.shape == (1, 2, HIDDEN)
    if np.isnan(bad):
        feed["X"][SEQ - 1, 1, 2] = 0
        expected = ort_session(model).run(None, feed)[0]
        np.testing.assert_allclose(y[:SEQ - 1], expected[:SEQ - 1], rtol=1e-4, atol=2e-5)
