"""Running models as ONNX Runtime scripts do: inputs in every form ONNX Runtime
takes (lists converted to the declared type, strings as str/object/bytes/void
arrays, strided and read-only arrays, OrtValues, DLPack producers), providers,
run_async, I/O binding. Each script runs against onnxruntime and nee; the
results are compared with ONNX Runtime's or with numpy."""
import threading
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto

import nee
from ort_api_util import (X32, add_model, identity_string_model, mul_model, rt, sequence_model,  # noqa: F401
                          session, two_input_model)


@pytest.mark.parametrize("elem,feed", [(TensorProto.FLOAT, [[1, 2, 3]]), (TensorProto.FLOAT, [[1.5, 2, 3]]),
                                       (TensorProto.INT64, [[1, 2, 3], [4, 5, 6]]),
                                       (TensorProto.INT32, [[7, 8, 9]]), (TensorProto.DOUBLE, [[0.25, 1, 2]])])
def test_lists_take_the_declared_element_type(elem, feed):
    ours = session(nee, add_model(elem)).run(None, {"X": feed})[0]
    theirs = session(onnxruntime, add_model(elem)).run(None, {"X": feed})[0]
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_list_of_x(rt):
    out = session(rt, mul_model()).run([], {"X": X32.tolist()})[0]
    np.testing.assert_array_equal(out, X32 * X32)


STRING_FEEDS = {
    "str": lambda: np.array([["this", "is"], ["identity", "test"]], dtype=str),
    "object": lambda: np.array([["this", "is"], ["identity", "test"]], dtype=object),
    "list": lambda: [["this", "is"], ["identity", "test"]],
    "void": lambda: np.array([b"this", b"is..", b"iden", b"test"], dtype=np.void).reshape(2, 2),
}


@pytest.mark.parametrize("kind", list(STRING_FEEDS))
def test_string_inputs(kind):
    ours = session(nee, identity_string_model()).run(None, {"input:0": STRING_FEEDS[kind]()})[0]
    theirs = session(onnxruntime, identity_string_model()).run(None, {"input:0": STRING_FEEDS[kind]()})[0]
    assert ours.dtype == theirs.dtype == object
    np.testing.assert_array_equal(ours, theirs)


def test_bytes_string_inputs():
    # Expected from the input itself: ONNX Runtime 1.32 reads a fixed-width bytes array past the
    # end of its shorter items ("identitytest" for "identity"), so it is no oracle here.
    x = np.array([[b"this", b"is"], [b"identity", b"test"]])
    out = session(nee, identity_string_model()).run(None, {"input:0": x})[0]
    np.testing.assert_array_equal(out, np.array([["this", "is"], ["identity", "test"]], dtype=object))


def test_strided_and_read_only_arrays(rt):
    sess = session(rt, mul_model())
    strided = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], dtype=np.float32)[:, [1, 0]]
    np.testing.assert_array_equal(sess.run(None, {"X": strided})[0], strided * X32)
    wide = np.zeros((3, 4), np.float32)
    wide[:, ::2] = X32
    np.testing.assert_array_equal(sess.run(None, {"X": wide[:, ::2]})[0], X32 * X32)
    frozen = X32.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(sess.run(None, {"X": frozen})[0], X32 * X32)


def test_dlpack_producers_are_inputs():
    class Producer:  # any object with the DLPack protocol (as torch tensors have)
        def __init__(self, arr):
            self._arr = arr

        def __dlpack__(self, **kwargs):
            return self._arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._arr.__dlpack_device__()

    out = session(nee, mul_model()).run(None, {"X": Producer(X32)})[0]
    np.testing.assert_array_equal(out, X32 * X32)


def test_sequence_inputs(rt):
    seq = [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    assert session(rt, sequence_model()).run(None, {"X": seq})[0] == 2


def test_missing_inputs_raise_value_error_naming_them(rt):
    sess = session(rt, two_input_model())
    with pytest.raises(ValueError, match=r"Required inputs \(\['Y'\]\) are missing from input feed \(\['X'\]\)"):
        sess.run([], {"X": np.ones((2, 2), np.float32)})


def test_unknown_providers_warn_and_fall_back_to_the_cpu(rt):
    for providers in (["CUDAExecutionProvider"], ["CUDAExecutionProvider", "CPUExecutionProvider"],
                      [("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = rt.InferenceSession(mul_model().SerializeToString(), providers=providers)
        assert sess.get_providers() == ["CPUExecutionProvider"]
        assert sess.get_provider_options() == {"CPUExecutionProvider": {}}
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        rt.InferenceSession(mul_model().SerializeToString(), providers=["CUDAExecutionProvider"])


def test_set_providers(rt):
    sess = session(rt, mul_model())
    sess.set_providers(["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
        sess.set_providers(["InvalidProvider"])
    sess.disable_fallback()
    sess.enable_fallback()


def test_provider_argument_checks():
    from nee.capi.onnxruntime_inference_collection import check_and_normalize_provider_args as ours
    from onnxruntime.capi.onnxruntime_inference_collection import check_and_normalize_provider_args as theirs
    valid = ["a", "b", "c"]
    for providers, options in ((None, None), (["a"], None), (["a", "b"], None), ([("a", {1: 2}), "b"], None),
                               (["a", "b"], [{1: 2}, {}])):
        assert ours(providers, options, valid) == theirs(providers, options, valid)
    with pytest.warns(UserWarning):
        assert ours(["a", "b", "a"], [{"x": 1}, {}, {"y": 2}], valid) == (["a", "b"], [{"x": "1"}, {}])
    for providers, options in ((3, None), ([3], None), (["a"], 3), (["a"], ["not dict"]), (["a", "b"], [{1: 2}]),
                               ([("a", {1: 2})], [{3: 4}])):
        with pytest.raises(ValueError):
            theirs(providers, options, valid)
        with pytest.raises(ValueError):
            ours(providers, options, valid)


def test_run_async_calls_back_from_another_thread(rt):
    sess = session(rt, mul_model())
    done = threading.Event()
    seen = {}

    def callback(results, user_data, err):
        seen.update(results=results, user_data=user_data, err=err, thread=threading.get_ident())
        done.set()

    sess.run_async(["Y"], {"X": X32}, callback, "mine")
    assert done.wait(10)
    assert seen["err"] == "" and seen["user_data"] == "mine"
    assert seen["thread"] != threading.get_ident()
    np.testing.assert_array_equal(seen["results"][0], X32 * X32)


def test_run_async_reports_errors_to_the_callback(rt):
    sess = session(rt, mul_model())
    done = threading.Event()
    seen = {}

    def callback(results, user_data, err):
        seen["err"] = err
        done.set()

    sess.run_async(["Y"], {"X": np.ones((2, 2), np.float32)}, callback, None)
    assert done.wait(10)
    assert seen["err"] != ""


def test_session_from_path_and_metadata(rt, tmp_path):
    model = mul_model()
    model.producer_name = "maker"
    model.doc_string = "described"
    model.graph.doc_string = "graph described"
    model.model_version = 7
    model.domain = "d"
    onnx.helper.set_model_props(model, {"k": "v"})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    meta = rt.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta()  # a PathLike
    assert (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.graph_description,
            meta.version, meta.custom_metadata_map) == ("maker", "g", "d", "described", "graph described", 7,
                                                        {"k": "v"})


# ---- I/O binding ------------------------------------------------------------


def test_iobinding_bind_cpu_input_and_output_by_name(rt):
    sess = session(rt, mul_model())
    binding = sess.io_binding()
    binding.bind_cpu_input("X", X32)
    binding.bind_output("Y")
    sess.run_with_iobinding(binding)
    outs = binding.get_outputs()
    assert len(outs) == 1 and outs[0].shape() == [3, 2]
    np.testing.assert_array_equal(outs[0].numpy(), X32 * X32)
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], X32 * X32)


def test_iobinding_output_into_a_callers_buffer(rt):
    sess = session(rt, mul_model())
    binding = sess.io_binding()
    x = X32.copy()
    binding.bind_input("X", "cpu", 0, np.float32, [3, 2], x.ctypes.data)
    y = np.zeros((3, 2), np.float32)
    binding.bind_output("Y", "cpu", 0, np.float32, [3, 2], y.ctypes.data)
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(y, X32 * X32)  # written in place
    x[:] = 1.0  # the bound input buffer is read at the next run
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(y, np.ones((3, 2), np.float32) * np.array([[1, 2], [3, 4], [5, 6]], np.float32))


def test_iobinding_ortvalues(rt):
    sess = session(rt, mul_model())
    binding = sess.io_binding()
    binding.bind_ortvalue_input("X", rt.OrtValue.ortvalue_from_numpy(X32))
    y = rt.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32)
    binding.bind_ortvalue_output("Y", y)
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(y.numpy(), X32 * X32)
    assert binding.get_outputs()[0].data_ptr() == y.data_ptr()


def test_iobinding_rebinding_and_clearing(rt):
    sess = session(rt, mul_model())
    binding = sess.io_binding()
    binding.bind_cpu_input("X", X32)
    binding.bind_output("Y")
    sess.run_with_iobinding(binding)
    binding.clear_binding_inputs()
    binding.bind_cpu_input("X", 2 * X32)
    binding.clear_binding_outputs()
    binding.bind_output("Y")
    binding.synchronize_inputs()
    sess.run_with_iobinding(binding)
    binding.synchronize_outputs()
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], 2 * X32 * X32)


@pytest.mark.parametrize("bad", [object(), {"a": 1}, [[1, "a", 3]], "text"])
def test_unconvertible_inputs_raise_a_runtime_error_naming_the_input(rt, bad):
    # ONNX Runtime raises RuntimeError or its InvalidArgument; nee raises InvalidArgument
    # (a RuntimeError) naming the input.
    sess = session(rt, add_model())
    with pytest.raises((RuntimeError, rt.capi.onnxruntime_pybind11_state.InvalidArgument)) as err:
        sess.run(None, {"X": bad})
    if rt is nee:
        assert "'X'" in str(err.value)
