"""`nee run --sandbox`: the model is read and run in a child process under
seccomp and resource limits; this process writes the outputs. (The filter
itself is tested in tests/tools/sandbox_test.cc: open, socket, exec and fork
fail in the child.) Sandboxed sessions of the library (SessionOptions.sandbox,
nee_session_options_set_sandbox): the same child, living as long as the
session (C side: tests/unit/api/sandboxed_session_test.cc)."""
import gc
import os
import signal
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee
from test_hostile import external_model  # x [2,3] @ w [3,4] (w in external data) -> Relu
from test_run_limits import ENDLESS, counting_loop, feed

from cli_util import nee_cli

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DIGITS = os.path.join(ROOT, "examples", "models", "digits_logreg.onnx")
DIGITS_X = os.path.join(ROOT, "examples", "models", "digits_test_x.npy")


def sandbox_available():
    r = nee_cli("run", DIGITS, "--random", "--sandbox")
    return r.returncode == 0 or "--sandbox is not available" not in r.stderr


pytestmark = pytest.mark.skipif(not sandbox_available(), reason="built without libseccomp")


def test_sandboxed_run_matches_onnxruntime_and_the_unconfined_run(tmp_path):
    r = nee_cli("run", DIGITS, "--input", f"input={DIGITS_X}", "--sandbox", "--threads", "2",
                "--output-dir", tmp_path / "boxed")
    assert r.returncode == 0, r.stderr
    assert "output 1 'probabilities': tensor(float)[450,10]" in r.stdout
    plain = nee_cli("run", DIGITS, "--input", f"input={DIGITS_X}", "--threads", "2", "--output-dir", tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    x = np.load(DIGITS_X)
    label, prob = ort.InferenceSession(DIGITS, providers=["CPUExecutionProvider"]).run(None, {"input": x})
    np.testing.assert_array_equal(np.load(tmp_path / "boxed" / "output_0.npy"), label)
    np.testing.assert_allclose(np.load(tmp_path / "boxed" / "output_1.npy"), prob, rtol=1e-5, atol=1e-6)
    for i in range(2):  # bitwise what the same nee computes unconfined
        assert (tmp_path / "boxed" / f"output_{i}.npy").read_bytes() == (tmp_path / "plain" / f"output_{i}.npy").read_bytes()


def test_sequence_and_map_outputs_cross_the_pipe(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["p"], axis=1),
         helper.make_node("ZipMap", ["p"], ["maps"], domain="ai.onnx.ml", classlabels_int64s=[3, 5, 7]),
         helper.make_node("SequenceConstruct", ["x", "p"], ["seq"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
         helper.make_value_info("maps", helper.make_sequence_type_proto(
             helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    path = tmp_path / "seq.onnx"
    onnx.save(model, path)
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nee_cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--sandbox", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    seq, maps = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got_seq = onnx.SequenceProto()
    got_seq.ParseFromString((tmp_path / "out" / "output_0.pb").read_bytes())
    got = [numpy_helper.to_array(t) for t in got_seq.tensor_values]
    assert len(got) == 2
    np.testing.assert_array_equal(got[0], seq[0])
    np.testing.assert_allclose(got[1], seq[1], rtol=1e-6)
    got_maps = onnx.SequenceProto()
    got_maps.ParseFromString((tmp_path / "out" / "output_1.pb").read_bytes())
    assert len(got_maps.map_values) == 2
    for m, expected in zip(got_maps.map_values, maps):
        keys = list(m.keys)
        values = np.concatenate([numpy_helper.to_array(t).reshape(-1) for t in m.values.tensor_values])
        assert keys == [3, 5, 7]
        np.testing.assert_allclose(values.reshape(-1), [expected[k] for k in keys], rtol=1e-6)


def test_external_data_in_the_folder_is_read_in_the_sandbox(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    x = np.ones((2, 3), np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nee_cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--sandbox", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"),
                                  np.maximum(x @ np.arange(12, dtype=np.float32).reshape(3, 4), 0))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "link.bin"])
def test_external_data_outside_the_folder_is_refused_in_the_sandbox(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 64)
    path = external_model(tmp_path, location)
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    r = nee_cli("run", path, "--random", "--sandbox")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "'w'" in r.stderr and "sandboxed process" not in r.stderr, r.stderr


def test_gigantic_allocation_is_contained(tmp_path):
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "fill.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "s.npy", np.array([1 << 40], np.int64))  # 4 TiB of floats
    r = nee_cli("run", path, "--input", f"s={tmp_path / 's.npy'}", "--sandbox", "--memory-limit", "256M")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "'fill'" in r.stderr and "memory" in r.stderr, r.stderr
    # The same without --memory-limit: the default budget and the address-space limit hold.
    r = nee_cli("run", path, "--input", f"s={tmp_path / 's.npy'}", "--sandbox")
    assert r.returncode == 3 and "'fill'" in r.stderr, r.stderr


def test_model_errors_keep_their_message_and_exit_status(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x07\x12\xff\xff")  # truncated
    plain = nee_cli("run", path, "--random")
    boxed = nee_cli("run", path, "--random", "--sandbox")
    assert plain.returncode == boxed.returncode == 1
    assert boxed.stderr == plain.stderr


def test_sandbox_usage_errors(tmp_path):
    r = nee_cli("run", DIGITS, "--random", "--sandbox", "--profile", tmp_path / "p")
    assert r.returncode == 2 and "--profile writes a file" in r.stderr
    r = nee_cli("inspect", DIGITS, "--sandbox")
    assert r.returncode == 2 and "--sandbox applies only to nee run" in r.stderr


# ---- Sandboxed sessions (the library) ----------------------------------------

CNN = os.path.join(ROOT, "tests", "models", "torch", "cnn_opset13", "model.onnx")
CNN_X = os.path.join(ROOT, "tests", "models", "torch", "cnn_opset13", "input_0.npy")


def sandboxed_options(**attributes):
    so = nee.SessionOptions()
    so.sandbox = True
    so.intra_op_num_threads = 2
    for name, value in attributes.items():
        setattr(so, name, value)
    return so


def plain_options():
    so = nee.SessionOptions()
    so.intra_op_num_threads = 2
    return so


def fill_model(tmp_path):
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "fill.onnx"
    onnx.save(model, path)
    return str(path)


def gone(pid):
    """True when no process (not even a zombie) has this pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sandbox_options_and_config_entry():
    so = nee.SessionOptions()
    assert so.sandbox is False and so.sandbox_address_space_bytes == 0 and so.sandbox_wall_ms == 0
    so.sandbox = True
    assert so.sandbox is True
    with pytest.raises(AttributeError):
        so.sandboxed = True  # a misspelling is an error, as for every other name
    so = nee.SessionOptions()
    so.add_session_config_entry("session.nee.sandbox", "1")
    sess = nee.InferenceSession(DIGITS, so)
    assert sess._session.sandbox_pid() > 0
    assert nee.InferenceSession(DIGITS)._session.sandbox_pid() == -1


@pytest.mark.parametrize("model,x_path", [(DIGITS, DIGITS_X), (CNN, CNN_X)])
def test_sandboxed_session_is_bitwise_the_plain_one(model, x_path):
    plain = nee.InferenceSession(model, plain_options())
    boxed = nee.InferenceSession(model, sandboxed_options())
    for a, b in ((plain.get_inputs(), boxed.get_inputs()), (plain.get_outputs(), boxed.get_outputs())):
        assert [(i.name, i.type, i.shape) for i in a] == [(i.name, i.type, i.shape) for i in b]
    pm, bm = plain.get_modelmeta(), boxed.get_modelmeta()
    assert (pm.producer_name, pm.graph_name, pm.custom_metadata_map) == \
        (bm.producer_name, bm.graph_name, bm.custom_metadata_map)
    x = np.load(x_path)
    name = plain.get_inputs()[0].name
    expected = plain.run(None, {name: x})
    for _ in range(3):  # repeated runs on one child
        got = boxed.run(None, {name: x})
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert e.dtype == g.dtype and e.shape == g.shape and e.tobytes() == g.tobytes()
    # Concurrent callers: runs are serialized on the child's socket.
    results = []

    def worker():
        results.append(all(g.tobytes() == e.tobytes() for e, g in zip(expected, boxed.run(None, {name: x}))))
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_sandboxed_session_errors_read_as_unsandboxed():
    plain = nee.InferenceSession(DIGITS, plain_options())
    boxed = nee.InferenceSession(DIGITS, sandboxed_options())
    bad = np.zeros((2, 7), np.float32)
    with pytest.raises(Exception) as p:
        plain.run(None, {"input": bad})
    with pytest.raises(Exception) as b:
        boxed.run(None, {"input": bad})
    assert type(p.value) is type(b.value) and str(p.value) == str(b.value)
    assert "input" in str(b.value)
    boxed.run(None, {"input": np.load(DIGITS_X)})  # still usable


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "link.bin"])
def test_sandboxed_session_refuses_external_data_outside_the_folder(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 64)
    path = external_model(tmp_path, location)
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    with pytest.raises(Exception) as p:
        nee.InferenceSession(str(path))
    with pytest.raises(Exception) as b:
        nee.InferenceSession(str(path), sandboxed_options())
    assert type(p.value) is type(b.value) and str(p.value) == str(b.value)
    assert "'w'" in str(b.value) and "sandboxed process" not in str(b.value)


def test_sandboxed_session_contains_a_gigantic_allocation(tmp_path):
    path = fill_model(tmp_path)
    small = np.array([4], np.int64)
    # nee's own memory budget (physical memory by default) stops 4 TiB, naming the node.
    boxed = nee.InferenceSession(path, sandboxed_options())
    with pytest.raises(Exception) as e:
        boxed.run(None, {"s": np.array([1 << 40], np.int64)})
    assert "'fill'" in str(e.value) and "memory" in str(e.value), str(e.value)
    assert boxed.run(None, {"s": small})[0].shape == (4,)
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return  # (scripts/sanitize.sh: the sanitizers need an unlimited address space, so none is set)
    # With the budget off, the child's address-space limit stops 4 GiB (this machine would allocate it).
    boxed = nee.InferenceSession(path, sandboxed_options(run_memory_limit_bytes=0, session_memory_limit_bytes=0,
                                                         sandbox_address_space_bytes=1 << 30))
    with pytest.raises(Exception) as e:
        boxed.run(None, {"s": np.array([1 << 30], np.int64)})
    assert type(e.value).__name__ == "OutOfMemory", repr(e.value)
    assert "'fill'" in str(e.value) and "cannot allocate 4294967296 bytes" in str(e.value), str(e.value)
    # The child's allocation failed as a status: it lives on, and so does the session.
    assert boxed.run(None, {"s": small})[0].shape == (4,)
    assert nee.InferenceSession(path).run(None, {"s": small})[0].shape == (4,)


def test_dead_child_is_an_error_and_no_zombie_is_left():
    boxed = nee.InferenceSession(DIGITS, sandboxed_options())
    pid = boxed._session.sandbox_pid()
    x = np.load(DIGITS_X)
    boxed.run(None, {"input": x})
    os.kill(pid, signal.SIGKILL)  # standing in for a crash or a limit
    with pytest.raises(Exception) as e:
        boxed.run(None, {"input": x})
    assert "sandboxed process was killed by signal 9" in str(e.value), str(e.value)
    with pytest.raises(Exception) as e:
        boxed.run(None, {"input": x})
    assert "ended earlier" in str(e.value), str(e.value)
    assert gone(pid)
    # Destroying a session kills and reaps its live child.
    boxed = nee.InferenceSession(DIGITS, sandboxed_options())
    pid = boxed._session.sandbox_pid()
    assert not gone(pid)
    del boxed
    gc.collect()
    assert gone(pid)


def test_sandboxed_session_time_limit_and_terminate_stop_the_run_in_the_child():
    sess = nee.InferenceSession(counting_loop(), sandboxed_options(run_timeout_ms=200))
    with pytest.raises(nee.RunCancelled, match=r"the_loop.*time limit of 200 ms"):
        sess.run(None, feed(ENDLESS))
    (acc,) = sess.run(None, feed(5))
    np.testing.assert_array_equal(acc, np.arange(4, dtype=np.float32) + 5)
    # terminate from another thread reaches the child (as SIGUSR1) and stops the loop there.
    sess = nee.InferenceSession(counting_loop(), sandboxed_options())
    run_options = nee.RunOptions()
    errors = []

    def run():
        try:
            sess.run(None, feed(ENDLESS), run_options)
        except nee.NeeError as e:
            errors.append(e)
    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    assert worker.is_alive()
    run_options.terminate = True
    worker.join(timeout=20)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], nee.RunCancelled) and "terminated" in str(errors[0])
    run_options.terminate = False
    (acc,) = sess.run(None, feed(3), run_options)  # the same child, still serving
    np.testing.assert_array_equal(acc, np.arange(4, dtype=np.float32) + 3)


def test_the_sandboxed_child_is_under_seccomp():
    sess = nee.InferenceSession(DIGITS, sandboxed_options())
    with open(f"/proc/{sess._session.sandbox_pid()}/status") as f:
        status = f.read()
    assert "Seccomp:\t2" in status and "NoNewPrivs:\t1" in status, status


def test_sandboxed_session_from_bytes():
    with open(DIGITS, "rb") as f:
        model = f.read()
    x = np.load(DIGITS_X)
    expected = nee.InferenceSession(model, plain_options()).run(None, {"input": x})
    boxed = nee.InferenceSession(model, sandboxed_options())
    assert boxed._session.sandbox_pid() > 0
    got = boxed.run(None, {"input": x})
    assert [g.tobytes() for g in got] == [e.tobytes() for e in expected]
