"""nee, the Neural Execution Engine: run ONNX models.

The surface follows ONNX Runtime's so that a script switches by changing its
import::

    import nee as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})

`nee.capi` mirrors the `onnxruntime.capi` modules scripts import from
(`_pybind_state`, `onnxruntime_pybind11_state`, `onnxruntime_validation`,
`onnxruntime_inference_collection`).

Modules: _errors (exception classes), _convert (Python objects <-> nee values),
_options (SessionOptions, RunOptions, enums), _ortvalue (OrtValue, SparseTensor,
devices), _session (InferenceSession), _iobinding (IOBinding), _runtime
(module-level functions), _custom_ops (operators written in Python:
SessionOptions.register_custom_op), _precision (nee.precision and its plot)."""
from __future__ import annotations

from . import _nee
from ._errors import (EngineError, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidModel, InvalidProtobuf,
                      ModelLoaded, NeeError, NoModel, NoSuchFile, NotImplemented, OutOfMemory, RunCancelled,
                      RuntimeException, UnsupportedOperator)
from ._iobinding import IOBinding
from ._options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from ._ortvalue import (OrtAllocatorType, OrtArenaCfg, OrtDevice, OrtDeviceMemoryType, OrtDeviceVendorId,
                        OrtMemoryInfo, OrtMemoryInfoDeviceType, OrtMemType, OrtSparseFormat, OrtValue, SparseTensor)
from ._runtime import (create_and_register_allocator, create_and_register_allocator_v2, disable_telemetry_events,
                       enable_telemetry_events, get_all_providers, get_available_providers, get_build_info,
                       get_device, get_version_string, has_collective_ops, preload_dlls, print_debug_info,
                       set_default_logger_callback, set_default_logger_severity, set_default_logger_verbosity,
                       set_global_thread_pool_sizes, set_seed)
from ._session import InferenceSession, ModelMetadata, NodeArg

__version__ = _nee.version()
version = __version__
package_name = "nee"
cuda_version = ""  # as ONNX Runtime's CPU package
import_capi_exception = None  # ONNX Runtime keeps the error of a failed native import here
SessionIOBinding = IOBinding  # ONNX Runtime's C-level name for the binding



def convert_opset(in_path: str, out_path: str, opset: int) -> str:
    """Converts the model at in_path to default-domain opset `opset` (nee's own converter, as
    `nee convert`), writes it to out_path with a lineage record and returns a one-line summary.
    Raises InvalidArgument naming the node, op and versions when a node cannot be converted."""
    return _nee.convert_opset(str(in_path), str(out_path), int(opset))


def quantize(in_path: str, out_path: str, mode: str = "dynamic", exclude=(), per_channel: bool = False,
             reduce_range: bool = False, calibration=None, calibrator: str = "minmax",
             percentile: float = 99.999, symmetric_activations: bool = False, block_size=None) -> str:
    """Writes a lower-precision copy of the model at in_path to out_path, as `nee quantize`
    (docs/quantization.md): mode "dynamic" quantizes MatMul/Gemm weights to int8 (symmetric; per
    output column with per_channel; 7-bit with reduce_range) with activations quantized at run time,
    "fp16" ("bf16") computes in float16 (bfloat16) keeping float32 inputs and outputs. Nodes named in `exclude` are left
    as they are. The output is standard ONNX (ONNX Runtime runs it) with a lineage record. Returns
    the summary (nodes rewritten, weight bytes before and after). Raises InvalidArgument for a bad
    mode or an excluded name that is no node, NoSuchFile/InvalidProtobuf for an unreadable model.
    Mode "static" writes Conv/MatMul/Gemm in QDQ form from activation ranges calibrated on the
    folder `calibration` (one subfolder per sample holding NAME.npy, NAME.pb, input_<i>.pb or
    input_<i>.npy per graph input) with `calibrator` "minmax", "percentile" (`percentile`;
    of |x| with symmetric_activations) or "entropy" (KL-divergence threshold, TensorRT's method).
    Mode "int4" rewrites MatMuls by constant weights into com.microsoft MatMulNBits with 4-bit weights,
    a scale and zero point per `block_size` (default 32; a power of two >= 16) weights along K.
    """
    if isinstance(exclude, str):
        exclude = (exclude,)
    if mode == "int4":
        if per_channel or reduce_range or calibration is not None or symmetric_activations:
            raise InvalidArgument("per_channel, reduce_range, calibration and symmetric_activations do not apply "
                                  "to mode 'int4'")
        return _nee.quantize_int4(str(in_path), str(out_path), 32 if block_size is None else int(block_size),
                                  [str(n) for n in exclude])
    if block_size is not None:
        raise InvalidArgument("block_size applies to mode 'int4' only")
    if mode == "static":
        if calibration is None:
            raise InvalidArgument("mode 'static' needs calibration=DIR")
        flags = (1 if per_channel else 0) | (2 if reduce_range else 0) | (4 if symmetric_activations else 0)
        return _nee.quantize_static(str(in_path), str(out_path), str(calibration), str(calibrator),
                                    float(percentile), [str(n) for n in exclude], flags)
    if calibration is not None or symmetric_activations:
        raise InvalidArgument("calibration and symmetric_activations apply to mode 'static' only")
    flags = (1 if per_channel else 0) | (2 if reduce_range else 0)
    return _nee.quantize(str(in_path), str(out_path), str(mode), [str(n) for n in exclude], flags)


from ._precision import precision  # noqa: E402

from . import capi  # noqa: E402 - after the names capi re-exports
from .capi import onnxruntime_validation  # noqa: E402

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
    "NodeArg", "ModelMetadata", "IOBinding", "SessionIOBinding", "OrtValue", "OrtDevice", "OrtMemoryInfo",
    "OrtArenaCfg", "OrtAllocatorType", "OrtMemType", "OrtDeviceVendorId", "OrtDeviceMemoryType",
    "OrtMemoryInfoDeviceType", "SparseTensor", "OrtSparseFormat",
    "NeeError", "Fail", "InvalidGraph", "InvalidModel", "InvalidArgument", "NotImplemented", "OutOfMemory",
    "RuntimeException", "NoSuchFile", "RunCancelled", "NoModel", "EngineError", "InvalidProtobuf", "ModelLoaded",
    "EPFail", "UnsupportedOperator",
    "get_all_providers", "get_available_providers", "get_device", "get_version_string", "get_build_info",
    "set_default_logger_severity", "set_default_logger_verbosity", "set_default_logger_callback",
    "enable_telemetry_events", "disable_telemetry_events", "create_and_register_allocator",
    "create_and_register_allocator_v2", "set_seed", "set_global_thread_pool_sizes", "has_collective_ops",
    "preload_dlls", "print_debug_info", "capi", "onnxruntime_validation", "__version__", "version", "package_name",
    "cuda_version", "convert_opset", "quantize", "precision",
]
