"""SessionOptions and RunOptions as ONNX Runtime has them: the same attributes and
defaults, AttributeError for unknown names, config entries, free dimension
overrides, replacement initializers, the optimized model file and profiling.
Each behaviour runs against onnxruntime and nee and must agree."""
import json
import os

import numpy as np
import onnxruntime
import pytest

import nee
from ort_api_util import (X32, add_model, external_bias_model, free_dims_model, model_with_ort_config,  # noqa: F401
                          mul_model, rt, session, write)

SESSION_ATTRS = ["enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
                 "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
                 "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
                 "optimized_model_filepath", "profile_file_prefix", "use_deterministic_compute",
                 "use_per_session_threads"]
RUN_ATTRS = ["log_severity_level", "log_verbosity_level", "logid", "only_execute_path_to_fetches", "terminate"]


def _plain(value):
    return int(value) if hasattr(value, "__int__") and not isinstance(value, (bool, str)) else value


@pytest.mark.parametrize("attr", SESSION_ATTRS)
def test_session_options_defaults_match(attr):
    assert _plain(getattr(nee.SessionOptions(), attr)) == _plain(getattr(onnxruntime.SessionOptions(), attr))


@pytest.mark.parametrize("attr", RUN_ATTRS)
def test_run_options_defaults_match(attr):
    assert getattr(nee.RunOptions(), attr) == getattr(onnxruntime.RunOptions(), attr)


@pytest.mark.parametrize("cls", ["SessionOptions", "RunOptions"])
def test_unknown_attributes_raise_attribute_error(rt, cls):
    options = getattr(rt, cls)()
    with pytest.raises(AttributeError):
        options.intra_op_num_thread = 2  # misspelt
    with pytest.raises(AttributeError):
        options.no_such_option  # noqa: B018


def test_wrongly_typed_values_raise_type_error(rt):
    so = rt.SessionOptions()
    with pytest.raises(TypeError):
        so.intra_op_num_threads = "two"
    with pytest.raises(TypeError):
        so.logid = 3


def test_enum_attributes_round_trip(rt):
    so = rt.SessionOptions()
    so.execution_mode = rt.ExecutionMode.ORT_PARALLEL
    so.execution_order = rt.ExecutionOrder.PRIORITY_BASED
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert so.execution_mode == rt.ExecutionMode.ORT_PARALLEL
    assert so.execution_order == rt.ExecutionOrder.PRIORITY_BASED
    assert so.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = session(rt, mul_model(), sess_options=so)
    np.testing.assert_array_equal(sess.run(None, {"X": X32})[0], X32 * X32)


def test_session_config_entries(rt):
    so = rt.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
    assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.raises(RuntimeError, match="SessionOptions does not have configuration with key: INVALID"):
        so.get_session_config_entry("INVALID")
    session(rt, mul_model(), sess_options=so)  # the session accepts them


def test_run_config_entries(rt):
    ro = rt.RunOptions()
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with pytest.raises(RuntimeError, match="RunOptions does not have configuration with key: nope"):
        ro.get_run_config_entry("nope")
    ro.logid = "thread1"
    ro.log_severity_level = 3
    ro.only_execute_path_to_fetches = True
    out = session(rt, mul_model()).run(None, {"X": X32}, ro)
    np.testing.assert_array_equal(out[0], X32 * X32)


@pytest.mark.parametrize("by", ["name", "denotation"])
def test_free_dimension_overrides(by):
    def shapes_and_result(rt):
        so = rt.SessionOptions()
        if by == "name":
            so.add_free_dimension_override_by_name("Dim1", 4)
            so.add_free_dimension_override_by_name("Dim2", 6)
        else:
            so.add_free_dimension_override_by_denotation("DATA_BATCH", 4)
            so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 6)
        sess = session(rt, free_dims_model(), sess_options=so)
        x = -np.arange(120, dtype=np.float32).reshape(4, 6, 5)
        return sess.get_inputs()[0].shape, sess.run(None, {"x": x})[0]

    ort_shape, ort_out = shapes_and_result(onnxruntime)
    nee_shape, nee_out = shapes_and_result(nee)
    assert nee_shape == ort_shape == [4, 6, 5]
    np.testing.assert_array_equal(nee_out, ort_out)


def test_free_dimension_override_refuses_other_sizes(rt):
    so = rt.SessionOptions()
    so.add_free_dimension_override_by_name("Dim1", 4)
    sess = session(rt, free_dims_model(), sess_options=so)
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument):
        sess.run(None, {"x": np.ones((3, 6, 5), np.float32)})


def test_add_initializer_replaces_the_models(rt):
    so = rt.SessionOptions()
    w = rt.OrtValue.ortvalue_from_numpy(np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], dtype=np.float32))
    so.add_initializer("W", w)
    out = session(rt, mul_model(), sess_options=so).run(["Y"], {"X": X32})[0]
    np.testing.assert_array_equal(out, X32 * np.array([[2, 1], [4, 3], [6, 5]], np.float32))


def test_add_external_initializers_stand_in_for_missing_external_data(tmp_path):
    path = write(external_bias_model(), tmp_path)  # P_not_on_disk.bin does not exist

    def result(rt):
        so = rt.SessionOptions()
        so.add_external_initializers(["P"], [rt.OrtValue.ortvalue_from_numpy(np.array([10, 20], np.float32))])
        sess = rt.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
        return sess.run(None, {"X": np.arange(4, dtype=np.float32).reshape(2, 2)})[0]

    ours, theirs = result(nee), result(onnxruntime)
    np.testing.assert_array_equal(theirs, [[10, 21], [12, 23]])
    np.testing.assert_array_equal(ours, theirs)


def test_add_external_initializers_refuse_what_the_model_does_not_store_externally(rt, tmp_path):
    so = rt.SessionOptions()
    so.add_external_initializers(["B"], [rt.OrtValue.ortvalue_from_numpy(np.array([10, 20, 30], np.float32))])
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.Fail):
        rt.InferenceSession(write(add_model(), tmp_path), sess_options=so, providers=["CPUExecutionProvider"])


def test_add_external_initializers_of_another_shape_are_refused(tmp_path):
    so = nee.SessionOptions()
    so.add_external_initializers(["P"], [nee.OrtValue.ortvalue_from_numpy(np.zeros(3, np.float32))])
    with pytest.raises(nee.InvalidArgument, match=r"'P'.*float\[2\].*float\[3\]"):
        nee.InferenceSession(write(external_bias_model(), tmp_path), sess_options=so)


def test_session_options_stored_in_the_model(rt, tmp_path, monkeypatch):
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    config = '{"session_options": {"inter_op_num_threads": 5, "intra_op_num_threads": 2, ' \
             '"graph_optimization_level": 99, "enable_profiling": 1}}'
    so = rt.SessionOptions()
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = session(rt, model_with_ort_config(config), sess_options=so)
    got = sess.get_session_options()
    assert (got.inter_op_num_threads, got.intra_op_num_threads, got.enable_profiling) == (5, 2, True)
    assert got.execution_mode == rt.ExecutionMode.ORT_SEQUENTIAL
    path = sess.end_profiling()  # ONNX Runtime writes it in the current folder: the model's options replace ours
    assert os.path.isfile(path)
    os.remove(path)


def test_add_initializer_of_a_wrong_type_is_refused():
    so = nee.SessionOptions()
    so.add_initializer("W", nee.OrtValue.ortvalue_from_numpy(np.ones((3, 2), np.int64)))
    with pytest.raises(nee.InvalidArgument, match="'W'.*float"):
        session(nee, mul_model(), sess_options=so)


def test_optimized_model_filepath_writes_a_model_onnxruntime_runs(rt, tmp_path):
    model = write(mul_model(), tmp_path)
    so = rt.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    rt.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])
    assert os.path.isfile(so.optimized_model_filepath)
    out = onnxruntime.InferenceSession(so.optimized_model_filepath).run(None, {"X": X32})[0]
    np.testing.assert_array_equal(out, X32 * X32)


def test_optimized_model_filepath_from_model_bytes(tmp_path):
    so = nee.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session(nee, mul_model(), sess_options=so)
    assert os.path.getsize(so.optimized_model_filepath) > 0


def test_profiling_writes_a_chrome_trace(rt, tmp_path):
    so = rt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = session(rt, mul_model(), sess_options=so)
    start = sess.get_profiling_start_time_ns()
    assert start > 0
    sess.run(None, {"X": X32})
    path = sess.end_profiling()
    assert os.path.isfile(path)
    with open(path) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any(e.get("ph") == "X" for e in events)
    for e in events:
        assert {"name", "ph", "ts", "pid"} <= set(e)


def test_profiling_start_times_are_chronological(rt, tmp_path):
    starts = []
    for i in range(3):
        so = rt.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / f"p{i}")
        sess = session(rt, mul_model(), sess_options=so)
        starts.append(sess.get_profiling_start_time_ns())
        os.remove(sess.end_profiling())
    assert starts == sorted(starts)


def test_profiling_off(rt):
    sess = session(rt, mul_model())
    assert sess.get_profiling_start_time_ns() == 0
    assert sess.end_profiling() == ""


def test_session_options_are_kept(rt):
    so = rt.SessionOptions()
    so.intra_op_num_threads = 1
    so.logid = "kept"
    sess = session(rt, mul_model(), sess_options=so)
    assert sess.get_session_options().intra_op_num_threads == 1
    assert sess.get_session_options().logid == "kept"


def test_what_nee_cannot_load_is_refused_by_name():
    so = nee.SessionOptions()
    so.register_custom_ops_library("./libcustom_op_library.so")  # not there, and not a nee library
    with pytest.raises(nee.InvalidArgument, match="libcustom_op_library.so"):
        session(nee, mul_model(), sess_options=so)
    so = nee.SessionOptions()
    so.add_session_config_entry("session.load_model_format", "ORT")
    with pytest.raises(nee.NotImplemented, match="ORT"):
        session(nee, mul_model(), sess_options=so)
    with pytest.raises(nee.NotImplemented, match="LoRA"):
        nee.RunOptions().add_active_adapter(object())
