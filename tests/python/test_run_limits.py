"""Bounding a run: the caller's terminate flag, time limits and memory limits.

A valid model may loop for as long as its trip count says (2**62 iterations is
valid ONNX); these limits turn such a model into a clear error instead of a
hang or an exhausted machine, and the session stays usable afterwards.
Expected values come from numpy.
"""
import subprocess
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nee

from cli_util import NEE

ENDLESS = 2**62


def counting_loop(scan_elements=0):
    """acc = x + M (by a Loop adding 1 per iteration); with scan_elements > 0,
    each iteration also emits a fresh float tensor of ones of that size."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
             helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="count")]
    outputs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
               helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [4])]
    if scan_elements:
        size = helper.make_tensor("size", TensorProto.INT64, [1], [scan_elements])
        # ones computed from the iteration number (0 * i + 1): a chunk made from constants alone
        # (ConstantOfShape) is folded into one initializer that every iteration shares, taking no memory.
        zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
        nodes += [helper.make_node("Cast", ["i"], ["i_float"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["i_float", "zero"], ["i_zero"]),
                  helper.make_node("Add", ["i_zero", "one"], ["i_one"]),
                  helper.make_node("Expand", ["i_one", "size"], ["chunk"], name="chunk")]
        outputs.append(helper.make_tensor_value_info("chunk", TensorProto.FLOAT, [scan_elements]))
        initializers = [one, size, zero]
    else:
        initializers = [one]
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [4])],
        outputs, initializers)
    true = helper.make_tensor("true", TensorProto.BOOL, [], [True])
    loop_outputs = ["acc"] + (["chunks"] if scan_elements else [])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "true", "x"], loop_outputs, name="the_loop", body=body)], "counting",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [4])] +
        ([helper.make_tensor_value_info("chunks", TensorProto.FLOAT, ["iterations", scan_elements])] if scan_elements else []),
        [true])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def feed(m):
    return {"M": np.array(m, np.int64), "x": np.arange(4, dtype=np.float32)}


def test_session_time_limit_stops_an_endless_loop_and_the_session_stays_usable():
    options = nee.SessionOptions()
    options.run_timeout_ms = 200
    sess = nee.InferenceSession(counting_loop(), options)
    start = time.monotonic()
    with pytest.raises(nee.RunCancelled, match=r"the_loop.*time limit of 200 ms"):
        sess.run(None, feed(ENDLESS))
    assert time.monotonic() - start < 10
    (acc,) = sess.run(None, feed(5))
    np.testing.assert_array_equal(acc, np.arange(4, dtype=np.float32) + 5)


def test_run_options_time_limit_overrides_the_sessions():
    sess = nee.InferenceSession(counting_loop())  # no session limit
    run_options = nee.RunOptions()
    run_options.timeout_ms = 150
    with pytest.raises(nee.RunCancelled, match="time limit of 150 ms"):
        sess.run(None, feed(ENDLESS), run_options)
    with pytest.raises(nee.InvalidArgument):
        run_options.timeout_ms = -1


def test_terminate_from_another_thread_stops_a_running_loop():
    sess = nee.InferenceSession(counting_loop())
    run_options = nee.RunOptions()
    errors = []

    def run():
        try:
            sess.run(None, feed(ENDLESS), run_options)
        except nee.NeeError as e:  # noqa: PERF203
            errors.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    assert worker.is_alive()  # the loop really is running
    run_options.terminate = True
    worker.join(timeout=20)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], nee.RunCancelled)
    assert "terminated" in str(errors[0])


def test_terminate_flag_set_before_a_run_stops_it_until_cleared():
    sess = nee.InferenceSession(counting_loop())
    run_options = nee.RunOptions()
    run_options.terminate = True
    with pytest.raises(nee.RunCancelled):
        sess.run(None, feed(3), run_options)
    run_options.terminate = False
    (acc,) = sess.run(None, feed(3), run_options)
    np.testing.assert_array_equal(acc, np.arange(4, dtype=np.float32) + 3)


def test_memory_limit_stops_a_loop_that_accumulates_scan_outputs():
    options = nee.SessionOptions()
    options.run_memory_limit_bytes = 64 << 20
    options.run_timeout_ms = 120_000  # a safety net for the test itself; the memory limit must hit first
    sess = nee.InferenceSession(counting_loop(scan_elements=1 << 18), options)  # 1 MiB per iteration
    with pytest.raises(nee.OutOfMemory, match="memory limit of 64 MiB"):
        sess.run(None, feed(ENDLESS))
    acc, chunks = sess.run(None, feed(3))
    np.testing.assert_array_equal(acc, np.arange(4, dtype=np.float32) + 3)
    np.testing.assert_array_equal(chunks, np.ones((3, 1 << 18), np.float32))


def test_memory_limit_refuses_one_large_output_naming_the_node():
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = nee.SessionOptions()
    options.run_memory_limit_bytes = 16 << 20
    sess = nee.InferenceSession(model.SerializeToString(), options)
    with pytest.raises(nee.OutOfMemory, match="'big'.*memory limit of 16 MiB"):
        sess.run(None, {"s": np.array([64 << 20], np.int64)})
    (y,) = sess.run(None, {"s": np.array([1000], np.int64)})
    np.testing.assert_array_equal(y, np.zeros(1000, np.float32))


def test_cli_timeout_and_memory_limit(tmp_path):
    model = tmp_path / "loop.onnx"
    model.write_bytes(counting_loop(scan_elements=1 << 18))
    np.save(tmp_path / "m.npy", np.array(ENDLESS, np.int64))
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    common = [NEE, "run", model, "--input", f"M={tmp_path / 'm.npy'}", "--input", f"x={tmp_path / 'x.npy'}"]
    timed = subprocess.run([*map(str, common), "--timeout", "0.3", "--memory-limit", "8G"],
                           capture_output=True, text=True, timeout=60)
    assert timed.returncode == 3, timed.stderr
    assert "time limit of 300 ms" in timed.stderr and "the_loop" in timed.stderr
    capped = subprocess.run([*map(str, common), "--memory-limit", "32M", "--timeout", "120"],
                            capture_output=True, text=True, timeout=150)
    assert capped.returncode == 3, capped.stderr
    assert "memory limit of 32 MiB" in capped.stderr
    bad = subprocess.run([*map(str, common), "--timeout", "soon"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--timeout" in bad.stderr
