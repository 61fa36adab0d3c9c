"""nee, the Neural Execution Engine: run ONNX models.

The surface follows ONNX Runtime's so that a script switches by changing its
import::

    import nee as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})
"""
from __future__ import annotations

import enum
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _nee

__version__ = _nee.version()


class NeeError(RuntimeError):
    """Base class of every error nee raises; the message names the node, input or field."""


class InvalidGraph(NeeError):
    """The model is malformed or inconsistent (ONNX Runtime: InvalidGraph)."""


class InvalidArgument(NeeError, ValueError):
    """An input, option or path given by the caller is wrong."""


class NotImplemented(NeeError):  # noqa: A001 - ONNX Runtime's name
    """Valid, but not supported by nee yet."""


class OutOfMemory(NeeError, MemoryError):
    """An allocation failed or exceeded a limit."""


class RuntimeException(NeeError):
    """A failure while running."""


class NoSuchFile(NeeError, OSError):
    """A file could not be opened, mapped or written."""


class RunCancelled(NeeError):
    """A run stopped early: RunOptions.terminate was set, or it exceeded its time limit."""


# ONNX Runtime's generic name for failures.
Fail = NeeError
InvalidModel = InvalidGraph

_nee.register_errors(InvalidGraph, InvalidArgument, NotImplemented, OutOfMemory, RuntimeException, NoSuchFile,
                     RunCancelled)


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """Options for InferenceSession (the ONNX Runtime subset nee honours)."""

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.log_severity_level: int = 2
        # Profiling: every node of every run is timed; end_profiling() writes a
        # Chrome trace to "<profile_file_prefix>_<date>_<time>.json".
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "onnxruntime_profile_"
        # nee extensions: a default time limit for every run (0: none) and the
        # most bytes of tensors one run may hold (-1: physical memory, 0: no limit).
        self.run_timeout_ms: int = 0
        self.run_memory_limit_bytes: int = -1
        # nee extension: run every node with its reference kernel (the oracle
        # configuration the test suite checks the optimized kernels against).
        self.reference_kernels_only: bool = False
        # nee extensions, limits on what an untrusted model may make a session do
        # (docs/SECURITY.md); 0 turns one off. An exceeded limit is an error naming it.
        self.max_graph_nodes: int = 1_000_000  # subgraphs and expanded functions count
        self.max_subgraph_depth: int = 32
        self.max_tensor_bytes: int = 16 << 30  # any one tensor in the model file
        self.max_external_data_bytes: int = 64 << 30  # all external data together
        self.session_memory_limit_bytes: int = -1  # all concurrent runs; -1: physical memory


# SessionOptions attribute -> nee_limit_t (include/nee/nee.h), in that order.
_LIMITS = ("max_graph_nodes", "max_subgraph_depth", "max_tensor_bytes", "max_external_data_bytes",
           "session_memory_limit_bytes")


def _limits_of(options: SessionOptions) -> List[Tuple[int, int]]:
    """The limits set on `options` (an ORT SessionOptions-like object may have none)."""
    return [(i, int(getattr(options, name))) for i, name in enumerate(_LIMITS) if hasattr(options, name)]


class RunOptions:
    """Per-run options. Setting `terminate` (from any thread) stops runs using
    these options before their next node with RunCancelled, as in ONNX Runtime."""

    def __init__(self) -> None:
        self.log_severity_level: int = 2
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self._handle = _nee.RunOptions()
        self._terminate = False
        self._timeout_ms = 0

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value: bool) -> None:
        self._terminate = bool(value)
        self._handle.set_terminate(self._terminate)

    @property
    def timeout_ms(self) -> int:
        """nee extension: this run's time limit in milliseconds (0: the session's)."""
        return self._timeout_ms

    @timeout_ms.setter
    def timeout_ms(self, value: int) -> None:
        if int(value) < 0:
            raise InvalidArgument("timeout_ms must not be negative")
        self._timeout_ms = int(value)
        self._handle.set_timeout_ms(self._timeout_ms)


class NodeArg:
    """Name, type and shape of a model input or output."""

    def __init__(self, name: str, type: str, shape: Optional[List[Any]]) -> None:
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class ModelMetadata:
    def __init__(self, session: "_nee.Session") -> None:
        self.producer_name = session.metadata("producer_name")
        self.graph_name = session.metadata("graph_name")
        self.domain = session.metadata("domain")
        self.description = session.metadata("doc_string")
        self.graph_description = session.metadata("graph_doc_string")
        self.version = int(session.metadata("model_version"))
        self.custom_metadata_map = {k: session.metadata("custom:" + k) for k in session.custom_metadata_keys()}


# nee dtype codes (ONNX TensorProto numbering) <-> numpy dtypes.
_NUMPY_OF_CODE = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64, 14: np.complex64,
    15: np.complex128,
}
_CODE_OF_NUMPY = {np.dtype(v): k for k, v in _NUMPY_OF_CODE.items()}
_ML_DTYPES = {16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
              20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu",
              25: "uint2", 26: "int2"}
_ml_dtypes_loaded = False
_ml_dtypes_lock = threading.Lock()


def _load_ml_dtypes() -> None:
    """Adds the narrow types (bfloat16, float8, int4, ...) to the tables above.

    ml_dtypes (optional) takes far longer to import than the rest of nee, so it
    is imported only when a narrow type is actually met: an input array of a
    dtype numpy lacks, an output of a narrow element type, or a type lookup."""
    global _ml_dtypes_loaded
    with _ml_dtypes_lock:  # concurrent runs: none may see the tables half filled
        if _ml_dtypes_loaded:
            return
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover - narrow outputs then come back as raw uint8
            ml_dtypes = None
        for code, name in _ML_DTYPES.items():
            if ml_dtypes is not None and hasattr(ml_dtypes, name):
                dt = np.dtype(getattr(ml_dtypes, name))
                _NUMPY_OF_CODE[code] = dt
                _CODE_OF_NUMPY[dt] = code
        _ml_dtypes_loaded = True


def _numpy_dtype_of(code: int) -> Any:
    """The numpy dtype of a nee dtype code (uint8 for narrow types when ml_dtypes is missing)."""
    dt = _NUMPY_OF_CODE.get(code)
    if dt is None and code in _ML_DTYPES:
        _load_ml_dtypes()
        dt = _NUMPY_OF_CODE.get(code)
    return np.uint8 if dt is None else dt


def _code_of_dtype(dtype: np.dtype) -> Optional[int]:
    """The nee dtype code of a numpy dtype; None if nee has no such type."""
    code = _CODE_OF_NUMPY.get(dtype)
    if code is None and not _ml_dtypes_loaded:
        _load_ml_dtypes()
        code = _CODE_OF_NUMPY.get(dtype)
    return code


# Element types numpy holds exactly as nee does: passed to nee straight from the array's buffer.
_FAST_CODES = {np.dtype(t): _CODE_OF_NUMPY[np.dtype(t)] for t in (
    np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.bool_)}
_SUB_BYTE = {21, 22, 23}  # 4-bit, two per byte
_TWO_BIT = {25, 26}  # four per byte


def _to_value(obj: Any, type_hint: str = "") -> "_nee.Value":
    """Converts a numpy array, scalar, list (sequence), dict (map) or None to a nee value."""
    if type(obj) is np.ndarray and obj.ndim > 0 and obj.flags.c_contiguous:  # the common case, first
        code = _FAST_CODES.get(obj.dtype)
        if code is not None:
            if obj.flags.aligned:  # nee reads the array's own buffer (no copy), as ONNX Runtime does
                return _nee.tensor_view_of_array(code, obj, obj)
            return _nee.tensor_from_array(code, obj)
    if obj is None:
        return _nee.none()
    if isinstance(obj, list) and (type_hint.startswith("seq") or type_hint.startswith("optional(seq")
                                  or not type_hint):
        items = [_to_value(x) for x in obj]
        elem = 0
        if obj and isinstance(obj[0], np.ndarray):
            elem = _code_of_dtype(obj[0].dtype) or 0
        return _nee.sequence(items, elem)
    arr = np.asarray(obj)
    if arr.dtype.kind in ("U", "S", "O"):
        flat = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in arr.reshape(-1).tolist()]
        return _nee.string_tensor(list(arr.shape), flat)
    code = _code_of_dtype(arr.dtype)
    if code is None:
        raise InvalidArgument(f"unsupported numpy dtype {arr.dtype}")
    if code in _SUB_BYTE or code in _TWO_BIT:
        packed = _pack_bits(arr, 4 if code in _SUB_BYTE else 2)
        return _nee.tensor_from_buffer(code, list(arr.shape), packed)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
    if arr.ndim > 0 and arr.dtype in _FAST_CODES:
        return _nee.tensor_from_array(code, arr)
    return _nee.tensor_from_buffer(code, list(arr.shape), arr.tobytes())


def _pack_bits(arr: np.ndarray, bits: int) -> bytes:
    """Packs 4- or 2-bit elements, lowest bits first, as ONNX stores them."""
    per_byte = 8 // bits
    raw = arr.reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    pad = (-raw.size) % per_byte
    raw = np.concatenate([raw, np.zeros(pad, np.uint8)]).reshape(-1, per_byte)
    out = np.zeros(raw.shape[0], np.uint8)
    for i in range(per_byte):
        out |= raw[:, i] << (bits * i)
    return out.tobytes()


def _unpack_bits(data: bytes, count: int, dtype: np.dtype, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    b = np.frombuffer(bytes(data), np.uint8)
    parts = np.empty((b.size, per_byte), np.uint8)
    for i in range(per_byte):
        parts[:, i] = (b >> (bits * i)) & ((1 << bits) - 1)
    flat = parts.reshape(-1)[:count]
    if dtype.kind == "V" or dtype.itemsize == 1:
        # ml_dtypes int4/int2 keep the sign in the element's own bits: sign-extend.
        if str(dtype) in ("int4", "int2"):
            flat = ((flat.astype(np.int8) << (8 - bits)) >> (8 - bits)).astype(np.int8)
        return flat.view(dtype)
    return flat.astype(dtype)


def _from_unpacked(u: Any) -> Any:
    if type(u) is np.ndarray:  # a tensor the extension already handed over as an array
        return u
    kind = u[0]
    if kind == "tensor":
        _, code, shape, data = u
        if code == 8:
            arr = np.array([b.decode("utf-8", errors="surrogateescape") for b in data], dtype=object)
            return arr.reshape(shape)
        dtype = np.dtype(_numpy_dtype_of(code))
        count = int(np.prod(shape)) if shape else 1
        if code in _SUB_BYTE or code in _TWO_BIT:
            return _unpack_bits(data, count, dtype, 4 if code in _SUB_BYTE else 2).reshape(shape)
        return np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
    if kind == "sequence":
        return [_from_unpacked(x) for x in u[2]]
    if kind == "map":
        keys = _from_unpacked(u[1]).reshape(-1).tolist()
        values = _from_unpacked(u[2]).reshape(-1).tolist()
        return dict(zip(keys, values))
    return None


class InferenceSession:
    """Loads, checks, optimizes and plans a model once; `run` many times (thread-safe)."""

    def __init__(self, path_or_bytes: Any, sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None, provider_options: Any = None, **kwargs: Any) -> None:
        options = sess_options or SessionOptions()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model: Any = bytes(path_or_bytes)
            self._model_path = None
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fspath(path_or_bytes)
            self._model_path = model
        else:
            raise TypeError("InferenceSession expects a file path or the model's bytes")
        if providers:
            for p in providers:
                name = p[0] if isinstance(p, tuple) else p
                if name != "CPUExecutionProvider":
                    raise InvalidArgument(f"unknown execution provider '{name}' (nee has: CPUExecutionProvider)")
        self._sess_options = options
        self._session = _nee.Session.create(model, int(options.intra_op_num_threads),
                                            int(options.graph_optimization_level),
                                            int(getattr(options, "run_timeout_ms", 0)),
                                            int(getattr(options, "run_memory_limit_bytes", -1)),
                                            bool(getattr(options, "reference_kernels_only", False)),
                                            bool(options.enable_profiling), str(options.profile_file_prefix),
                                            _limits_of(options))
        self._inputs = [NodeArg(n, t, s) for (n, t, _, s) in self._session.inputs()]
        self._outputs = [NodeArg(n, t, s) for (n, t, _, s) in self._session.outputs()]
        self._input_types = {a.name: a.type for a in self._inputs}

    def get_inputs(self) -> List[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        return []

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata(self._session)

    def get_providers(self) -> List[str]:
        return ["CPUExecutionProvider"]

    def end_profiling(self) -> str:
        """Writes the profile of the runs so far (a Chrome trace) and returns its
        path; "" when profiling is off. Profiling stops, as in ONNX Runtime."""
        return self._session.end_profiling()

    def profile_summary(self) -> str:
        """nee extension: a table of the profiled time per op type."""
        return self._session.profile_summary()

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = None) -> List[Any]:
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed must be a dict of input name -> value")
        hints = self._input_types
        names = list(input_feed.keys())
        values = [_to_value(input_feed[n], hints.get(n, "")) for n in names]
        if run_options is not None and not isinstance(run_options, RunOptions):
            raise InvalidArgument("run_options must be a nee.RunOptions")
        handle = run_options._handle if run_options is not None else None
        results = self._session.run(list(output_names or []), names, values, handle)
        return [_from_unpacked(r) for r in results]


def get_available_providers() -> List[str]:
    return ["CPUExecutionProvider"]


def get_device() -> str:
    return "CPU"


__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "NodeArg", "ModelMetadata",
    "NeeError", "Fail", "InvalidGraph", "InvalidModel", "InvalidArgument", "NotImplemented", "OutOfMemory",
    "RuntimeException", "NoSuchFile", "RunCancelled", "get_available_providers", "get_device",
]
