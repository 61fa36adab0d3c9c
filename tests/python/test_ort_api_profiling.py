"""Profiling: the trace nee writes has the structure of ONNX Runtime's (the same
script runs on both and the events are compared), and `nee profile` prints the
per-operator table and writes that trace."""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ort_api_util import rt, session  # noqa: F401  (rt is a fixture)

EVENT_FIELDS = {"cat", "pid", "tid", "dur", "ts", "ph", "name", "args"}


def chain_model():
    """Q = Cast<bool>(Cast<int64>(Reshape(X, S))): named nodes, several element types."""
    nodes = [helper.make_node("Reshape", ["X", "S"], ["Y"], name="reshape"),
             helper.make_node("Cast", ["Y"], ["Z"], name="to_int", to=TensorProto.INT64),
             helper.make_node("Cast", ["Z"], ["Q"], name="to_bool", to=TensorProto.BOOL)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("S", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("Q", TensorProto.BOOL, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


FEED = {"X": np.ones((2, 3), np.float32), "S": np.array([3, 2], np.int64)}


def profile(rt, tmp_path, runs=2):
    so = rt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = session(rt, chain_model(), sess_options=so)
    for _ in range(runs):
        sess.run(None, FEED)
    path = sess.end_profiling()
    assert path.startswith(str(tmp_path / "prof")) and path.endswith(".json")
    with open(path) as f:
        return json.load(f)


def test_events_have_onnxruntimes_fields(rt, tmp_path):
    events = profile(rt, tmp_path)
    for e in events:
        assert set(e) == EVENT_FIELDS, e
        assert e["ph"] == "X" and e["cat"] in ("Session", "Node")
        assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["args"], dict)
    names = [e["name"] for e in events if e["cat"] == "Session"]
    assert {"model_loading_array", "session_initialization"} <= set(names)
    assert names.count("model_run") == 2


def test_node_events_match_onnxruntimes(tmp_path):
    """One event per node run, named and described as ONNX Runtime describes it."""
    import nee
    import onnxruntime

    def nodes(module, folder):
        folder.mkdir()
        return [(e["name"], e["args"]["op_name"], e["args"]["provider"], e["args"]["input_type_shape"],
                 e["args"]["output_type_shape"]) for e in profile(module, folder) if e["cat"] == "Node"]
    expected = nodes(onnxruntime, tmp_path / "ort")
    assert len(expected) == 6 and expected[0] == (
        "reshape_kernel_time", "Reshape", "CPUExecutionProvider", [{"float": [2, 3]}, {"int64": [2]}],
        [{"float": [3, 2]}])
    assert nodes(nee, tmp_path / "nee") == expected


def test_nee_records_each_phase_of_making_the_session(tmp_path):
    import nee
    events = profile(nee, tmp_path, runs=1)
    session_events = {e["name"]: e for e in events if e["cat"] == "Session"}
    init = session_events["session_initialization"]
    for phase in ("function_inlining", "model_check", "thread_pool_creation", "execution_planning"):
        e = session_events[phase]
        assert init["ts"] <= e["ts"] and e["ts"] + e["dur"] <= init["ts"] + init["dur"] + 1, phase
    assert session_events["model_loading_array"]["ts"] <= init["ts"]
    run = session_events["model_run"]
    for e in events:
        if e["cat"] == "Node":
            assert run["ts"] <= e["ts"] and e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 1
            assert e["args"]["thread_id"] == e["tid"] and e["args"]["kernel"] in ("optimized", "reference")


def test_graph_optimization_is_a_phase_when_it_runs(tmp_path):
    import nee
    so = nee.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = session(nee, chain_model(), sess_options=so)
    with open(sess.end_profiling()) as f:
        assert "graph_optimization" in [e["name"] for e in json.load(f)]


def test_nee_profile_prints_a_table_and_writes_the_trace(tmp_path):
    model = tmp_path / "model.onnx"
    onnx.save(chain_model(), str(model))
    np.save(tmp_path / "s.npy", FEED["S"])
    out = subprocess.run([os.environ.get("NEE_BIN", "build/bin/nee"), "profile", str(model), "--runs", "3",
                          "--input", f"S={tmp_path / 's.npy'}", "--profile", str(tmp_path / "trace")],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    header = next(line for line in out.splitlines() if line.startswith("op "))
    assert header.split() == ["op", "calls", "total", "ms", "share", "mean", "us"]
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in (["Reshape"], ["Cast"])}
    assert rows["Cast"][1] == "6" and rows["Reshape"][1] == "3"
    assert sum(float(r[3].rstrip("%")) for r in rows.values()) == pytest.approx(100, abs=0.2)
    path = out.split("profile written to ")[1].strip()
    with open(path) as f:
        events = json.load(f)
    assert sum(e["cat"] == "Node" for e in events) == 9
    assert sum(e["name"] == "model_run" for e in events) == 3


@pytest.mark.parametrize("option", [["--warmup", "2"], ["--expect", "Q=q.npy"], ["--output-dir", "out"]])
def test_nee_profile_refuses_options_of_other_commands(tmp_path, option):
    model = tmp_path / "model.onnx"
    onnx.save(chain_model(), str(model))
    result = subprocess.run([os.environ.get("NEE_BIN", "build/bin/nee"), "profile", str(model)] + option,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"option '{option[0]}' does not apply to nee profile" in result.stderr


def test_weight_packing_on_the_first_run_is_its_own_event(tmp_path):
    """A MatMul with constant weights packs them on its first run: that time is reported as
    "<node>_kernel_prepare" (once), not as kernel time, so every run's kernel time is comparable."""
    import nee
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64, 256])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [64, 256])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = nee.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = session(nee, model, sess_options=so)
    for _ in range(3):
        sess.run(None, {"X": np.ones((64, 256), np.float32)})
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    runs = sorted((e for e in events if e["name"] == "model_run"), key=lambda e: e["ts"])
    prepares = [e for e in events if e["name"] == "mm_kernel_prepare"]
    kernels = sorted((e for e in events if e["name"] == "mm_kernel_time"), key=lambda e: e["ts"])
    assert len(runs) == 3 and len(kernels) == 3 and len(prepares) == 1
    prepare = prepares[0]
    assert prepare["cat"] == "Node" and prepare["args"]["op_name"] == "MatMul" and prepare["dur"] > 0
    assert runs[0]["ts"] <= prepare["ts"] and prepare["ts"] + prepare["dur"] <= kernels[0]["ts"] <= runs[1]["ts"]
