"""Every public name of onnxruntime a CPU runtime can honour exists in nee, and the
module-level functions, enums and exception classes behave as ONNX Runtime's
(each check runs against onnxruntime and against nee)."""
import importlib
import inspect

import numpy as np
import onnxruntime
import pytest

import nee
from ort_api_util import rt  # noqa: F401 - the runtime fixture

# Public onnxruntime names nee deliberately leaves out, and why.
LEFT_OUT = {
    "AdapterFormat": "LoRA adapters are not supported",
    "LoraAdapter": "LoRA adapters are not supported",
    "ModelCompiler": "compiling EP context models needs a compiling execution provider",
    "OrtCompileApiFlags": "compiling EP context models needs a compiling execution provider",
    "OrtEpContextData": "compiling EP context models needs a compiling execution provider",
    "OrtEpContextDataBuffer": "compiling EP context models needs a compiling execution provider",
    "ModelPackage": "ONNX Runtime's model package format",
    "ModelPackageComponentContext": "ONNX Runtime's model package format",
    "ModelPackageContext": "ONNX Runtime's model package format",
    "ModelPackageOptions": "ONNX Runtime's model package format",
    "ModelPackageWriteMode": "ONNX Runtime's model package format",
    "OrtEpAssignedNode": "plugin execution providers",
    "OrtEpAssignedSubgraph": "plugin execution providers",
    "OrtEpDevice": "plugin execution providers",
    "OrtHardwareDevice": "plugin execution providers",
    "OrtHardwareDeviceType": "plugin execution providers",
    "OrtExecutionProviderDevicePolicy": "plugin execution providers",
    "OrtExternalInitializerInfo": "plugin execution providers",
    "OrtSyncStream": "device streams (nee has no device)",
    "copy_tensors": "device-to-device copies (nee has no device)",
    "get_ep_devices": "plugin execution providers",
    "register_execution_provider_library": "plugin execution providers",
    "unregister_execution_provider_library": "plugin execution providers",
    "contextlib": "a module onnxruntime happens to import",
}


def public_names(module):
    return {n for n in dir(module) if not n.startswith("_")}


def test_every_public_onnxruntime_name_exists_in_nee():
    missing = sorted(public_names(onnxruntime) - set(LEFT_OUT) - public_names(nee))
    assert missing == []


def test_left_out_names_are_really_onnxruntime_names():
    # Keeps the list honest when onnxruntime changes.
    assert set(LEFT_OUT) <= public_names(onnxruntime)


def test_public_session_and_binding_methods_exist():
    for cls in ("InferenceSession", "IOBinding", "SessionOptions", "RunOptions", "OrtValue", "SparseTensor",
                "OrtDevice", "OrtMemoryInfo", "OrtArenaCfg"):
        ours, theirs = getattr(nee, cls), getattr(onnxruntime, cls)
        left_out = {"get_provider_graph_assignment_info", "get_tuning_results", "set_tuning_results",
                    "set_ep_dynamic_options", "release_captured_graph", "create_ortvalue_from_shape_and_type",
                    "add_provider_for_devices", "set_provider_selection_policy",
                    "set_provider_selection_policy_delegate", "add_external_initializers_from_files_in_memory",
                    "set_ep_context_data_read_func", "clear_ep_context_data_read_func",
                    "set_load_cancellation_flag", "run_with_ortvaluevector"}
        missing = sorted(public_names(theirs) - left_out - public_names(ours))
        assert missing == [], cls


@pytest.mark.parametrize("name", ["ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel", "OrtSparseFormat",
                                  "OrtAllocatorType", "OrtMemType", "OrtDeviceVendorId"])
def test_enums_have_onnxruntimes_members_and_values(name):
    theirs = {k: int(v) for k, v in getattr(onnxruntime, name).__members__.items()}
    ours = {k: int(v) for k, v in getattr(nee, name).__members__.items()}
    assert ours == theirs


def test_providers_and_device(rt):
    assert rt.get_all_providers()[-1] == "CPUExecutionProvider"
    assert "CPUExecutionProvider" in rt.get_available_providers()
    assert "CPU" in rt.get_device()
    assert isinstance(rt.get_version_string(), str) and rt.get_version_string() == rt.__version__
    assert "Build Info" in rt.get_build_info()


def test_all_providers_are_onnxruntimes():
    assert nee.get_all_providers() == onnxruntime.get_all_providers()


def test_logging_and_telemetry(rt):
    rt.disable_telemetry_events()
    rt.enable_telemetry_events()
    for level in range(5):
        rt.set_default_logger_severity(level)
    rt.set_default_logger_severity(2)
    rt.set_default_logger_verbosity(0)
    for bad in (5, -1):
        with pytest.raises(RuntimeError):
            rt.set_default_logger_severity(bad)
    with pytest.raises(RuntimeError):
        rt.set_default_logger_callback("not a callable")
    rt.set_default_logger_callback(None)


def test_shared_allocator_registration(rt):
    info = rt.OrtMemoryInfo("Cpu", rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, rt.OrtMemType.DEFAULT)
    assert rt.create_and_register_allocator(info, rt.OrtArenaCfg(0, -1, -1, -1)) is None
    assert rt.create_and_register_allocator(info, None) is None


CAPI_IMPORTS = [
    ("capi._pybind_state", ["OrtValue", "SessionOptions", "RunOptions", "get_available_providers",
                            "SessionIOBinding", "Fail", "InvalidArgument", "OrtDevice", "OrtMemoryInfo",
                            "get_default_session_options", "ModelMetadata", "NodeArg"]),
    ("capi.onnxruntime_pybind11_state", ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
                                         "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented",
                                         "InvalidGraph", "EPFail", "OrtValueVector", "RunOptions"]),
    ("capi.onnxruntime_inference_collection", ["InferenceSession", "IOBinding", "OrtValue", "OrtDevice",
                                               "SparseTensor", "check_and_normalize_provider_args"]),
    ("capi.onnxruntime_validation", ["check_distro_info", "get_package_name_and_version_info",
                                      "check_training_module"]),
]


@pytest.mark.parametrize("module,names", CAPI_IMPORTS)
def test_capi_modules_export_what_scripts_import(rt, module, names):
    mod = importlib.import_module(f"{rt.__name__}.{module}")
    for name in names:
        assert hasattr(mod, name), f"{rt.__name__}.{module}.{name}"


EXCEPTIONS = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
              "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail"]


@pytest.mark.parametrize("name", EXCEPTIONS)
def test_exception_classes_are_the_same_objects_everywhere(name):
    from nee.capi import _pybind_state, onnxruntime_pybind11_state
    cls = getattr(nee, name)
    assert inspect.isclass(cls) and issubclass(cls, Exception)
    assert getattr(onnxruntime_pybind11_state, name) is cls
    assert getattr(_pybind_state, name) is cls
    assert issubclass(cls, nee.Fail)  # `except Fail` catches everything nee raises


def test_exceptions_carry_nees_message(tmp_path):
    from nee.capi.onnxruntime_pybind11_state import NoSuchFile
    with pytest.raises(NoSuchFile, match="nowhere.onnx"):
        nee.InferenceSession(str(tmp_path / "nowhere.onnx"))


def test_same_exception_class_for_the_same_mistakes(rt, tmp_path):
    from ort_api_util import mul_model, session
    sess = session(rt, mul_model())
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument):
        sess.run(None, {"X": np.ones((3, 2), np.float64)})  # wrong element type
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument):
        sess.run(None, {"X": np.ones((2, 2), np.float32)})  # wrong shape
    with pytest.raises(rt.capi.onnxruntime_pybind11_state.NoSuchFile):
        rt.InferenceSession(str(tmp_path / "missing.onnx"))
