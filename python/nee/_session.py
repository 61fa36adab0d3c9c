"""InferenceSession, its introspection classes and the provider rules.

The session mirrors ONNX Runtime's: run, run_with_ort_values, run_async,
I/O binding, profiling, providers (nee has one: the CPU; any other name
warns and falls back to it, as ONNX Runtime does when a provider is missing)."""
from __future__ import annotations

import os
import re
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _nee
from ._convert import _FAST_CODES, _from_unpacked, _to_value
from ._errors import Fail, InvalidArgument, NotImplemented as _NotImplemented, UnsupportedOperator
from ._options import RunOptions, SessionOptions, allow_spinning_of, limits_of, sandbox_of
from ._ortvalue import OrtMemoryInfo, OrtAllocatorType, OrtMemType, OrtValue

CPU_PROVIDER = "CPUExecutionProvider"
_UNKNOWN_OPERATOR = re.compile(r"is not supported by nee|is not registered: ")
# ONNX Runtime's list of every provider a build may have, in its priority order (the CPU last).
ALL_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
    "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider",
    "CANNExecutionProvider", "AzureExecutionProvider", CPU_PROVIDER,
]


class NodeArg:
    """Name, type and shape of a model input or output."""

    def __init__(self, name: str, type: str, shape: Optional[List[Any]]) -> None:
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


def _node_args(infos: List[Tuple[str, str, int, Any]]) -> List[NodeArg]:
    """NodeArgs of (name, type, element type, dims or None) entries; an unknown shape is [], as ONNX Runtime shows it."""
    return [NodeArg(name, type_, [] if dims is None else dims) for (name, type_, _, dims) in infos]


_NO_MODEL_VERSION = 2**63 - 1


class ModelMetadata:
    def __init__(self, session: "_nee.Session") -> None:
        self.producer_name = session.metadata("producer_name")
        self.graph_name = session.metadata("graph_name")
        self.domain = session.metadata("domain")
        self.description = session.metadata("doc_string")
        self.graph_description = session.metadata("graph_doc_string")
        # ONNX Runtime reports a model without model_version as INT64_MAX (its kNoVersion); nee's reader
        # keeps no field presence, and its writer leaves a 0 out, so 0 reads as absent.
        self.version = int(session.metadata("model_version")) or _NO_MODEL_VERSION
        self.custom_metadata_map = {k: session.metadata("custom:" + k) for k in session.custom_metadata_keys()}


def check_and_normalize_provider_args(providers: Any, provider_options: Any,
                                      available_provider_names: Sequence[str]) -> Tuple[List[str], List[Dict]]:
    """Validates `providers` ([name | (name, options)]) and `provider_options`
    ([dict]) as ONNX Runtime does: the names in order, duplicates dropped with a
    warning, every option key and value made a str. Raises ValueError."""
    if providers is None:
        return [], []
    if not isinstance(providers, (list, tuple)):
        raise ValueError("providers should be a sequence of names or (name, options dict) tuples")
    if provider_options is not None:
        if not isinstance(provider_options, (list, tuple)):
            raise ValueError("provider_options should be a sequence of dicts")
        if len(provider_options) != len(providers):
            raise ValueError("providers and provider_options should have the same length")
    names: List[str] = []
    options: List[Dict[str, str]] = []
    for i, entry in enumerate(providers):
        name, opts = _provider_entry(entry, None if provider_options is None else provider_options[i])
        if name in names:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            continue
        names.append(name)
        options.append({str(k): str(v) for k, v in opts.items()})
    return names, options


def _provider_entry(entry: Any, given_options: Any) -> Tuple[str, Dict]:
    if isinstance(entry, str):
        opts = {} if given_options is None else given_options
    elif (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
          and isinstance(entry[1], dict)):
        if given_options is not None:
            raise ValueError("provider options given both in providers and in provider_options")
        entry, opts = entry
    else:
        raise ValueError(f"invalid providers entry {entry!r}: a name or a (name, options dict) tuple")
    if not isinstance(opts, dict):
        raise ValueError(f"provider options of '{entry}' should be a dict")
    return entry, opts


def _choose_providers(providers: Any, provider_options: Any, strict: bool) -> List[str]:
    """nee's providers for a session: always the CPU. Another name warns (or, in
    set_providers, `strict`, raises) as ONNX Runtime does for one it lacks."""
    names, _ = check_and_normalize_provider_args(providers, provider_options, ALL_PROVIDERS)
    for name in names:
        if name == CPU_PROVIDER:
            continue
        if strict and name not in ALL_PROVIDERS:
            raise Fail(f"Unknown Provider Type: {name}")
        warnings.warn(f"Specified provider '{name}' is not in available provider names."
                      f"Available providers: '{CPU_PROVIDER}'")
    return [CPU_PROVIDER]


def _refuse_unsupported(options: SessionOptions) -> None:
    fmt = options._config.get("session.load_model_format", "ONNX").upper()
    if fmt != "ONNX":
        raise _NotImplemented(f"session.load_model_format '{fmt}': nee loads ONNX models only")


class InferenceSession:
    """Loads, checks, optimizes and plans a model once; `run` many times (thread-safe)."""

    def __init__(self, path_or_bytes: Any, sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None, provider_options: Any = None, **kwargs: Any) -> None:
        options = sess_options if sess_options is not None else SessionOptions()
        if not isinstance(options, SessionOptions):
            raise TypeError(f"sess_options must be a SessionOptions, not {type(options).__name__}")
        self._model_bytes: Optional[bytes] = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model: Any = bytes(path_or_bytes)
            self._model_path = None
            self._model_bytes = model
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fspath(path_or_bytes)
            self._model_path = model
        else:
            raise TypeError("InferenceSession expects a file path or the model's bytes")
        self._providers = _choose_providers(providers, provider_options, strict=False)
        self._fallback = True
        _refuse_unsupported(options)
        self._sess_options = options
        self._profiling_start_ns = time.time_ns() if options.enable_profiling else 0
        self._session = self._create(model, options)
        if os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") == "1":
            self._apply_model_config(model)
        self._inputs = _node_args(self._session.inputs())
        self._outputs = _node_args(self._session.outputs())
        self._overridable = _node_args(self._session.overridable_initializers())
        # Declared types of what a run may feed: the inputs and the overridable initializers.
        self._input_types = {n: (t, code) for (n, t, code, _) in
                             self._session.inputs() + self._session.overridable_initializers()}
        if options.optimized_model_filepath:
            self._write_optimized_model(options)

    @staticmethod
    def _create(model: Any, options: SessionOptions) -> "_nee.Session":
        free_dims = ([(n, v, False) for n, v in options._free_dims_by_name]
                     + [(d, v, True) for d, v in options._free_dims_by_denotation])
        initializers = [(name, _to_value(value)) for name, value in options._initializers.items()]
        external = [(name, _to_value(value)) for name, value in options._external_initializers.items()]
        try:
            return _nee.Session.create(model, int(options.intra_op_num_threads),
                                       int(options.graph_optimization_level), int(options.run_timeout_ms),
                                       int(options.run_memory_limit_bytes), bool(options.reference_kernels_only),
                                       bool(options.enable_profiling), str(options.profile_file_prefix), free_dims,
                                       initializers, external, limits_of(options), allow_spinning_of(options),
                                       list(getattr(options, "_custom_op_libraries", [])),
                                       [op.spec() for op in getattr(options, "_custom_ops", [])],
                                       *sandbox_of(options))
        except _NotImplemented as err:
            if _UNKNOWN_OPERATOR.search(str(err)):  # the registry's two messages (src/ops/op_registry.cc)
                raise UnsupportedOperator(str(err)) from None
            raise

    def _apply_model_config(self, model: Any) -> None:
        """ONNX Runtime's ORT_LOAD_CONFIG_FROM_MODEL=1: session options stored in the
        model's "ort_config" metadata ({"session_options": {...}}) take precedence;
        the session is made again with them."""
        keys = self._session.custom_metadata_keys()
        if "ort_config" not in keys:
            return
        import copy  # here, not at import time: few models carry ort_config
        import json

        try:
            config = json.loads(self._session.metadata("custom:ort_config")).get("session_options", {})
        except (ValueError, AttributeError) as err:
            raise InvalidArgument(f"the model's ort_config metadata is not a JSON object: {err}") from None
        options = copy.copy(self._sess_options)
        for key, value in config.items():
            current = getattr(options, key, None)  # an unknown key raises AttributeError below, as a typo should
            setattr(options, key, bool(value) if isinstance(current, bool) else value)
        self._sess_options = options
        if options.enable_profiling and not self._profiling_start_ns:
            self._profiling_start_ns = time.time_ns()
        self._session = self._create(model, options)

    def _write_optimized_model(self, options: SessionOptions) -> None:
        """Writes the model as nee optimized it to options.optimized_model_filepath (ONNX format)."""
        level = int(options.graph_optimization_level)
        if self._model_path is not None:
            _nee.optimize_file(self._model_path, options.optimized_model_filepath, level)
            return
        import tempfile  # here, not at import time (shutil, bz2, lzma come with it)

        with tempfile.TemporaryDirectory() as tmp:  # a model from bytes: optimized from a copy on disk
            source = os.path.join(tmp, "model.onnx")
            with open(source, "wb") as f:
                f.write(self._model_bytes or b"")
            _nee.optimize_file(source, options.optimized_model_filepath, level)

    # Introspection

    def get_inputs(self) -> List[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Initializers that are also graph inputs (IR 4 and later): feeding one by
        name to run replaces its value for that run."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata(self._session)

    def get_providers(self) -> List[str]:
        return list(self._providers)

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {CPU_PROVIDER: {}}

    def set_providers(self, providers: Optional[Sequence[Any]] = None, provider_options: Any = None) -> None:
        """Re-selects providers; on nee that is always the CPU. An unknown name raises, as in ONNX Runtime."""
        self._providers = _choose_providers(providers or [CPU_PROVIDER], provider_options, strict=True)

    def disable_fallback(self) -> None:
        self._fallback = False

    def enable_fallback(self) -> None:
        self._fallback = True

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def get_input_memory_infos(self) -> List[OrtMemoryInfo]:
        return [_cpu_memory_info() for _ in self._inputs]

    def get_output_memory_infos(self) -> List[OrtMemoryInfo]:
        return [_cpu_memory_info() for _ in self._outputs]

    def get_input_epdevices(self) -> List[None]:
        return [None for _ in self._inputs]

    # Profiling

    def end_profiling(self) -> str:
        """Writes the profile of the runs so far (a Chrome trace) and returns its
        path; "" when profiling is off. Profiling stops, as in ONNX Runtime."""
        return self._session.end_profiling()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started (time.time_ns() at session creation); 0 when profiling is off."""
        return self._profiling_start_ns

    def profile_summary(self) -> str:
        """nee extension: a table of the profiled time per op type."""
        return self._session.profile_summary()

    # Running

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = None) -> List[Any]:
        return [_from_unpacked(r) for r in self._run_raw(output_names, input_feed, run_options)]

    def _run_raw(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
                 run_options: Optional[RunOptions]) -> List[Any]:
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed must be a dict of input name -> value")
        self._check_required_inputs(input_feed)
        names = list(input_feed.keys())
        values = [self._input_value(n, input_feed[n]) for n in names]
        if run_options is not None and not isinstance(run_options, RunOptions):
            raise InvalidArgument("run_options must be a nee.RunOptions")
        handle = run_options._handle if run_options is not None else None
        return self._session.run(list(output_names or []), names, values, handle)

    def _input_value(self, name: str, value: Any) -> "_nee.Value":
        # The common case first, without the layers below (a run per 32 ms
        # audio chunk feeds three arrays): nee reads the array's own buffer.
        # A 0-d array (a scalar input) is viewed as well.
        if type(value) is np.ndarray:
            fast = _FAST_CODES.get(value.dtype)
            if fast is not None and value.flags.c_contiguous and value.flags.aligned:
                return _nee.tensor_view_of_array(fast, value, value)
        type_string, code = self._input_types.get(name, ("", 0))
        try:
            return _to_value(value, type_string, code)
        except InvalidArgument as err:
            raise InvalidArgument(f"input '{name}': {err}") from None
        except (TypeError, ValueError, OverflowError) as err:  # what numpy says of an object it cannot convert
            raise InvalidArgument(f"input '{name}': cannot make {type_string or 'a value'} of a "
                                  f"{type(value).__name__}: {err}") from None

    def _check_required_inputs(self, input_feed: Dict[str, Any]) -> None:
        missing = [a.name for a in self._inputs if a.name not in input_feed and not a.type.startswith("optional")]
        if missing:
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(input_feed.keys())}): every input without a default is required")

    def run_with_ort_values(self, output_names: Optional[Sequence[str]], input_dict_ort_values: Dict[str, Any],
                            run_options: Optional[RunOptions] = None) -> List[OrtValue]:
        """Like run, with OrtValues in and out."""
        return [OrtValue(r) for r in self.run(output_names, input_dict_ort_values, run_options)]

    def run_async(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
                  callback: Callable[[List[Any], Any, str], None], user_data: Any,
                  run_options: Optional[RunOptions] = None) -> None:
        """Runs on a new thread and calls callback(outputs, user_data, error_message) from it;
        error_message is "" on success (then outputs are the arrays run returns)."""
        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as err:  # reported to the callback, as ONNX Runtime does
                callback([], user_data, str(err))
                return
            callback(outputs, user_data, "")
        threading.Thread(target=work, name="nee-run-async", daemon=True).start()

    def io_binding(self) -> "IOBinding":
        from ._iobinding import IOBinding
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: Any, run_options: Optional[RunOptions] = None) -> None:
        iobinding._run(run_options)

    @property
    def _sess(self) -> "_CSession":
        """What ONNX Runtime scripts reach as session._sess (its C session)."""
        return _CSession(self)


class OrtValueVector(list):
    """A list of OrtValues (ONNX Runtime's C-level result vector)."""


class _CSession:
    def __init__(self, session: InferenceSession) -> None:
        self._session = session

    def run_with_ort_values(self, feeds: Dict[str, Any], output_names: Sequence[str],
                            run_options: Optional[RunOptions] = None) -> OrtValueVector:
        return OrtValueVector(self._session.run_with_ort_values(output_names, feeds, run_options))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def _cpu_memory_info() -> OrtMemoryInfo:
    return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)


__all__ = ["InferenceSession", "NodeArg", "ModelMetadata", "OrtValueVector", "check_and_normalize_provider_args",
           "ALL_PROVIDERS", "CPU_PROVIDER"]
