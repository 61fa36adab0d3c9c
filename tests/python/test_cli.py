"""The `nee` command line: run, inspect, errors and exit codes."""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from cli_util import NEE, nee_cli


def mlp(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc"), helper.make_node("Sigmoid", ["h"], ["y"], name="act")],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="cli-test")
    model.ir_version = 8
    model.metadata_props.add(key="purpose", value="testing")
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    return path


def test_run_with_npy_input_matches_onnxruntime(tmp_path):
    path = mlp(tmp_path)
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nee_cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "output 0 'y'" in r.stdout and "[3,4]" in r.stdout
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output_0.npy"), expected, rtol=1e-5, atol=1e-6)


def test_run_inputs_dir_with_pb_and_pb_output(tmp_path):
    path = mlp(tmp_path)
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    data = tmp_path / "data"
    data.mkdir()
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    r = nee_cli("run", path, "--inputs-dir", data, "--output-dir", tmp_path / "out", "--output-format", "pb")
    assert r.returncode == 0, r.stderr
    out = onnx.TensorProto()
    out.ParseFromString((tmp_path / "out" / "output_0.pb").read_bytes())
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(numpy_helper.to_array(out), expected, rtol=1e-5, atol=1e-6)


def test_run_random_uses_dim_overrides(tmp_path):
    r = nee_cli("run", mlp(tmp_path), "--random", "--dim", "batch=5", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "[5,4]" in r.stdout


def test_inspect_reports_model_and_plan(tmp_path):
    r = nee_cli("inspect", mlp(tmp_path), "--plan", "--dim", "batch=16")
    assert r.returncode == 0, r.stderr
    for text in ("cli-test", "ai.onnx:13", "x: tensor(float) [batch,8]", "purpose = testing", "Gemm", "Sigmoid",
                 "parameters: 36", "arena size"):
        assert text in r.stdout, text


def test_inspect_opt_level_shows_the_optimized_graph(tmp_path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["s"]),
         helper.make_node("Identity", ["s"], ["y"])],
        "matmul_add", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "matmul_add.onnx"
    onnx.save(model, path)
    as_written = nee_cli("inspect", path)
    assert as_written.returncode == 0, as_written.stderr
    assert "MatMul" in as_written.stdout and "Identity" in as_written.stdout and "Gemm" not in as_written.stdout
    optimized = nee_cli("inspect", path, "--opt-level", "99")
    assert optimized.returncode == 0, optimized.stderr
    assert "Gemm" in optimized.stdout and "MatMul" not in optimized.stdout and "Identity" not in optimized.stdout


def test_errors_exit_1_with_a_message(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x96\x01\x12\xff\xff\xff\xff\x0f")
    r = nee_cli("run", bad, "--random")
    assert r.returncode == 1 and "error" in r.stderr
    r = nee_cli("run", tmp_path / "missing.onnx", "--random")
    assert r.returncode == 1 and "missing.onnx" in r.stderr
    path = mlp(tmp_path)
    np.save(tmp_path / "wrong.npy", np.zeros((3, 8), np.float64))
    r = nee_cli("run", path, "--input", f"x={tmp_path / 'wrong.npy'}")
    assert r.returncode == 1 and "'x'" in r.stderr and "float" in r.stderr
    r = nee_cli("run", path)
    assert r.returncode == 1 and "not given" in r.stderr
    r = nee_cli("frobnicate", path)
    assert r.returncode == 2


def test_non_tensor_outputs_are_written_as_value_protos(tmp_path):
    """A ZipMap-style output (sequence of maps) goes to output_<i>.pb as a SequenceProto."""
    seq = helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="seq")
    graph = helper.make_graph([seq], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "seq.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", np.array([1.5, -2.0], np.float32))
    r = nee_cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    proto = onnx.SequenceProto()
    proto.ParseFromString((tmp_path / "out" / "output_0.pb").read_bytes())
    values = onnx.numpy_helper.to_list(proto)
    assert len(values) == 2
    for v in values:
        np.testing.assert_array_equal(v, [1.5, -2.0])


# ---- nee bench: the report's structure and its errors (never its timings) ----

def bench_report(stdout):
    """The 'key: value' lines of a bench report as a dict."""
    return dict(line.split(":", 1) for line in stdout.splitlines() if ":" in line)


def test_bench_reports_latency_throughput_creation_and_memory(tmp_path):
    path = mlp(tmp_path)
    r = nee_cli("bench", path, "--runs", 5, "--warmup", 1, "--batch", 4, "--threads", 1)
    assert r.returncode == 0, r.stderr
    report = bench_report(r.stdout)
    assert set(report) >= {"model", "threads", "inputs", "session creation", "runs", "latency ms", "throughput",
                           "peak memory"}
    assert report["threads"].strip() == "1"
    assert "[4,8]" in report["inputs"]  # --batch sets the symbolic first dim
    assert report["runs"].split() == ["5", "timed", "after", "1", "warmup"]
    latency = report["latency ms"].split()
    values = dict(zip(latency[0::2], map(float, latency[1::2])))
    assert set(values) == {"median", "p90", "p99", "min", "max", "mean"}
    assert values["min"] <= values["median"] <= values["p90"] <= values["p99"] <= values["max"]
    assert "runs/s" in report["throughput"] and "(batch 4)" in report["throughput"]
    assert report["session creation"].strip().endswith("ms")
    assert "(VmHWM)" in report["peak memory"]
    assert r.stderr == ""  # no progress bar when stderr is not a terminal


def test_bench_dim_sets_symbolic_dims(tmp_path):
    r = nee_cli("bench", mlp(tmp_path), "--runs", 2, "--warmup", 0, "--dim", "batch=3")
    assert r.returncode == 0, r.stderr
    report = bench_report(r.stdout)
    assert "[3,8]" in report["inputs"] and "(batch 3)" in report["throughput"]
    assert report["threads"].strip() == "default"


def test_bench_reads_given_inputs_and_randomizes_the_rest(tmp_path):
    """A Gather over a 2-row table: random integers in [0, 10) would index past it (BERT's token types), so that
    input is given, in a file (--input) or a folder (--inputs-dir); the other one stays random."""
    table = numpy_helper.from_array(np.ones((2, 4), np.float32), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("Add", ["e", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3]),
                                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table])
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    r = nee_cli("bench", path, "--runs", 2, "--warmup", 0)
    assert r.returncode == 1 and "out of range" in r.stderr  # random ids
    np.save(tmp_path / "ids.npy", np.array([[0, 1, 1]], np.int64))
    r = nee_cli("bench", path, "--runs", 2, "--warmup", 0, "--input", f"ids={tmp_path / 'ids.npy'}")
    assert r.returncode == 0, r.stderr
    assert "ids tensor(int64)[1,3]" in bench_report(r.stdout)["inputs"]
    (tmp_path / "dir").mkdir()
    np.save(tmp_path / "dir" / "input_0.npy", np.array([[1, 0, 1]], np.int64))
    r = nee_cli("bench", path, "--runs", 2, "--warmup", 0, "--inputs-dir", tmp_path / "dir")
    assert r.returncode == 0, r.stderr
    r = nee_cli("bench", path, "--runs", 2, "--input", f"bogus={tmp_path / 'ids.npy'}")
    assert r.returncode == 1 and "'bogus' is not an input of this model" in r.stderr


def test_bench_progress_bar_only_on_a_terminal(tmp_path):
    import pty
    master, slave = pty.openpty()
    try:
        r = subprocess.run([NEE, "bench", str(mlp(tmp_path)), "--runs", "3", "--warmup", "1"], stdout=subprocess.PIPE,
                           stderr=slave, text=True, timeout=120)
        os.close(slave)
        slave = -1
        shown = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other side is closed: everything was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert r.returncode == 0
    assert b"3/3 timed" in shown and b"1/1 warmup" in shown
    assert "#" not in r.stdout  # the bar stays off stdout


def test_bench_bad_flags_are_clear_usage_errors(tmp_path):
    path = mlp(tmp_path)
    cases = {
        ("--runs", "0"): "--runs expects a whole number from 1",
        ("--runs", "ten"): "--runs expects a whole number from 1",
        ("--warmup", "-1"): "--warmup expects a whole number from 0",
        ("--batch", "0"): "--batch expects a whole number from 1",
        ("--batch", "2.5"): "--batch expects a whole number from 1",
        ("--threads", "x"): "--threads expects a number",
        ("--dim", "batch"): "--dim expects NAME=VALUE",
        ("--dim", "batch=-2"): "size must not be negative",
        ("--input", "x"): "--input expects NAME=VALUE",
        ("--expect", "y=a.npy"): "option '--expect' does not apply to nee bench",
        ("--bogus",): "option '--bogus' does not apply to nee bench",
        ("--runs",): "--runs needs a value",
    }
    for args, message in cases.items():
        r = nee_cli("bench", path, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        assert "nee bench MODEL" in r.stderr  # the usage follows
    r = nee_cli("run", path, "--random", "--runs", "3")
    assert r.returncode == 2 and "applies only to nee bench" in r.stderr
    r = nee_cli("bench", tmp_path / "missing.onnx")
    assert r.returncode == 1 and "missing.onnx" in r.stderr


def test_bench_batch_leaves_fixed_dims_alone(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "fixed.onnx"
    onnx.save(model, path)
    r = nee_cli("bench", path, "--runs", 2, "--warmup", 0, "--batch", 5)
    assert r.returncode == 0, r.stderr
    report = bench_report(r.stdout)
    assert "[2,3]" in report["inputs"] and "(batch 2)" in report["throughput"]
