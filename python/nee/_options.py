"""SessionOptions, RunOptions and the option enums, as ONNX Runtime spells them.

Both option classes have fixed attribute sets (__slots__): assigning a name
ONNX Runtime does not have raises AttributeError there, and so it does here,
instead of silently ignoring a misspelt option."""
from __future__ import annotations

import enum
from typing import Any, Dict, List, Tuple

from . import _nee
from ._errors import Fail, InvalidArgument, NotImplemented as _NotImplemented


class OrtEnum(enum.IntEnum):
    """ONNX Runtime's enums are pybind11 enums: an int in comparisons, but str() and format() give
    "Class.MEMBER" (Python 3.11's IntEnum gives the number), as scripts logging their options see."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)  # ONNX Runtime refuses a spec


class GraphOptimizationLevel(OrtEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(OrtEnum):
    """nee runs nodes in order (ORT_SEQUENTIAL); ORT_PARALLEL is accepted and runs the same way."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(OrtEnum):
    """nee always runs the graph's topological order; the other orders are accepted."""
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return int(value)


def _as_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, int)):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


def _as_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


class SessionOptions:
    """Options for InferenceSession. Every ONNX Runtime attribute exists; those
    that change nothing on nee's CPU engine (memory arena, execution mode and
    order, inter-op threads) are kept and read back as set."""

    __slots__ = ("_intra_op_num_threads", "_inter_op_num_threads", "_graph_optimization_level",
                 "_execution_mode", "_execution_order", "_log_severity_level", "_log_verbosity_level", "_logid",
                 "_enable_profiling", "_profile_file_prefix", "_optimized_model_filepath", "_enable_cpu_mem_arena",
                 "_enable_mem_pattern", "_enable_mem_reuse", "_use_deterministic_compute",
                 "_use_per_session_threads", "_run_timeout_ms", "_run_memory_limit_bytes",
                 "_reference_kernels_only", "_config", "_free_dims_by_name", "_free_dims_by_denotation",
                 "_initializers", "_external_initializers", "_custom_op_libraries", "_custom_ops", "_max_graph_nodes",
                 "_max_subgraph_depth", "_max_tensor_bytes", "_max_external_data_bytes",
                 "_session_memory_limit_bytes", "_sandbox", "_sandbox_address_space_bytes", "_sandbox_wall_ms",
                 "__weakref__")

    def __init__(self) -> None:
        self._intra_op_num_threads = 0
        self._inter_op_num_threads = 0
        self._graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self._execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self._execution_order = ExecutionOrder.DEFAULT
        self._log_severity_level = -1
        self._log_verbosity_level = 0
        self._logid = ""
        # Profiling: every node of every run is timed; end_profiling() writes a
        # Chrome trace to "<profile_file_prefix>_<date>_<time>.json".
        self._enable_profiling = False
        self._profile_file_prefix = "onnxruntime_profile_"
        self._optimized_model_filepath = ""
        self._enable_cpu_mem_arena = True
        self._enable_mem_pattern = True
        self._enable_mem_reuse = True
        self._use_deterministic_compute = False  # nee's kernels are deterministic whatever this says
        self._use_per_session_threads = True
        # nee extensions: a default time limit for every run (0: none), the most
        # bytes of tensors one run may hold (-1: physical memory, 0: no limit),
        # and running every node with its reference kernel (the tests' oracle).
        self._run_timeout_ms = 0
        self._run_memory_limit_bytes = -1
        self._reference_kernels_only = False
        self._config: Dict[str, str] = {}
        self._free_dims_by_name: List[Tuple[str, int]] = []
        self._free_dims_by_denotation: List[Tuple[str, int]] = []
        self._initializers: Dict[str, Any] = {}
        self._external_initializers: Dict[str, Any] = {}
        self._custom_op_libraries: List[str] = []
        self._custom_ops: List[Any] = []  # _custom_ops.PythonOp
        # nee extensions, limits on what an untrusted model may make a session do
        # (docs/SECURITY.md); 0 turns one off. An exceeded limit is an error naming it.
        self._max_graph_nodes = 1_000_000  # subgraphs and expanded functions count
        self._max_subgraph_depth = 32
        self._max_tensor_bytes = 16 << 30  # any one tensor in the model file
        self._max_external_data_bytes = 64 << 30  # all external data together
        self._session_memory_limit_bytes = -1  # all concurrent runs; -1: physical memory
        # nee extension: load and run the model in a confined child process
        # (nee_session_options_set_sandbox; also session config entry
        # "session.nee.sandbox" = "1"), with the child's address-space limit
        # beyond what it inherits (0: derived) and the time creation and each run
        # may take before the child is killed (0: derived); docs/SECURITY.md.
        self._sandbox = False
        self._sandbox_address_space_bytes = 0
        self._sandbox_wall_ms = 0

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Sets a session configuration entry (ONNX Runtime's keys). nee honours
        session.load_model_format ("ONNX"; "ORT" is refused at session creation)
        and session.intra_op.allow_spinning ("0": idle pool threads sleep at once
        instead of polling for the next loop), nee's session.nee.sandbox ("1":
        as the sandbox attribute), and stores every other key so
        get_session_config_entry reads it back."""
        self._config[_as_str("key", key)] = _as_str("value", value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise Fail(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fixes every model input dim named `dim_name` (a dim_param) to `dim_value`."""
        self._free_dims_by_name.append((_as_str("dim_name", dim_name), self._dim_value(dim_value)))

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Fixes every model input dim whose denotation is `dim_denotation` (e.g. DATA_BATCH)."""
        self._free_dims_by_denotation.append((_as_str("dim_denotation", dim_denotation),
                                              self._dim_value(dim_value)))

    @staticmethod
    def _dim_value(value: Any) -> int:
        value = _as_int("dim_value", value)
        if value < 0:
            raise InvalidArgument(f"a free dimension override must not be negative (got {value})")
        return value

    def add_initializer(self, name: str, ortvalue: Any) -> None:
        """Replaces the model's initializer `name` with this OrtValue's tensor."""
        self._initializers[_as_str("name", name)] = _tensor_of(ortvalue, name)

    def add_external_initializers(self, names: List[str], ortvalues: List[Any]) -> None:
        """Supplies the tensors of initializers the model stores as external data, by
        name: they are used instead of the external file, which need not exist."""
        if len(names) != len(ortvalues):
            raise InvalidArgument(f"add_external_initializers: {len(names)} names but {len(ortvalues)} values")
        for name, value in zip(names, ortvalues):
            self._external_initializers[_as_str("name", name)] = _tensor_of(value, name)

    def register_custom_ops_library(self, library_path: str) -> None:
        """Loads a nee custom-op library (include/nee/custom_op.h) into each session
        made with these options: its ops are that session's. A path that cannot
        be loaded, or a library that is not one of nee's (ONNX Runtime's custom-op
        libraries are not), fails session creation with InvalidArgument naming it."""
        path = library_path.__fspath__() if hasattr(library_path, "__fspath__") else library_path
        self._custom_op_libraries.append(_as_str("library_path", path))

    def register_custom_op(self, domain: str, op_type: str, fn: Any, *, output_types: Any = None,
                           shape_fn: Any = None, num_inputs: Any = 1, num_outputs: Any = 1,
                           since_version: int = 1) -> None:
        """nee extension: an operator implemented in Python with numpy, for the
        sessions made with these options (the model imports `domain`).

        fn(*inputs, **attributes) gets one numpy array per node input (None for
        an omitted optional one; a fresh copy it may keep or modify) and the
        node's int, float, string and list attributes as keyword arguments, and
        returns an array, or a tuple of arrays with one per output. Each output
        must have its declared element type: output_types (numpy dtypes, names
        or ONNX element type codes, one per output; the last repeats for
        variadic outputs), or input 0's type when None.
        shape_fn(*input_shapes, **attributes), optional, returns each output's
        shape (a tuple of ints, symbol names (str) or None for unknown; None for
        an unknown rank) from the input shapes given the same way; without it
        outputs have an unknown shape until the op runs.
        num_inputs / num_outputs: a count, or (min, max) with max None for no bound.
        nee takes the GIL to call them, from the thread running the session. An
        exception fn raises fails that run with RuntimeException naming the
        node, domain and op (the session stays usable); one from shape_fn fails
        session creation (InvalidGraph) or, for new input shapes, the run."""
        from ._custom_ops import PythonOp  # numpy, imported by nee anyway
        self._custom_ops.append(PythonOp(domain, op_type, fn, output_types, shape_fn, num_inputs, num_outputs,
                                         since_version))

    def add_provider(self, provider_name: str, provider_options: Dict[str, str]) -> None:
        """Kept for API parity; nee's only provider is the CPU one, always present."""

    def has_providers(self) -> bool:
        return False


def allow_spinning_of(options: Any) -> bool:
    """session.intra_op.allow_spinning as ONNX Runtime reads it: on unless set to something other than "1"."""
    return options._config.get("session.intra_op.allow_spinning", "1") == "1"


def sandbox_of(options: Any) -> Tuple[bool, int, int]:
    """(on, address-space bytes, wall ms): the sandbox attribute or session.nee.sandbox = "1"."""
    config = getattr(options, "_config", {})
    on = bool(getattr(options, "sandbox", False)) or config.get("session.nee.sandbox", "0") == "1"
    return (on, int(getattr(options, "sandbox_address_space_bytes", 0)), int(getattr(options, "sandbox_wall_ms", 0)))


def _tensor_of(value: Any, name: str) -> Any:
    array_of = getattr(value, "_nee_array", None)
    if array_of is None:
        raise TypeError(f"initializer '{name}': expected an OrtValue, got {type(value).__name__}")
    return array_of()


def _simple_property(attr: str, check: Any) -> property:
    slot = "_" + attr

    def get(self: Any) -> Any:
        return getattr(self, slot)

    def set_(self: Any, value: Any) -> None:
        setattr(self, slot, check(attr, value))
    return property(get, set_)


def _enum_property(attr: str, enum_type: Any) -> property:
    def check(name: str, value: Any) -> Any:
        try:
            return enum_type(_as_int(name, value))
        except ValueError:
            raise InvalidArgument(f"{name}: {value} is not one of {[m.value for m in enum_type]}") from None
    return _simple_property(attr, check)


for _name, _check in (("intra_op_num_threads", _as_int), ("inter_op_num_threads", _as_int),
                      ("log_severity_level", _as_int), ("log_verbosity_level", _as_int), ("logid", _as_str),
                      ("enable_profiling", _as_bool), ("profile_file_prefix", _as_str),
                      ("optimized_model_filepath", lambda n, v: _as_str(n, str(v) if hasattr(v, "__fspath__") else v)),
                      ("enable_cpu_mem_arena", _as_bool), ("enable_mem_pattern", _as_bool),
                      ("enable_mem_reuse", _as_bool), ("use_deterministic_compute", _as_bool),
                      ("use_per_session_threads", _as_bool), ("run_timeout_ms", _as_int),
                      ("run_memory_limit_bytes", _as_int), ("reference_kernels_only", _as_bool),
                      ("max_graph_nodes", _as_int), ("max_subgraph_depth", _as_int), ("max_tensor_bytes", _as_int),
                      ("max_external_data_bytes", _as_int), ("session_memory_limit_bytes", _as_int),
                      ("sandbox", _as_bool), ("sandbox_address_space_bytes", _as_int), ("sandbox_wall_ms", _as_int)):
    setattr(SessionOptions, _name, _simple_property(_name, _check))
SessionOptions.graph_optimization_level = _enum_property("graph_optimization_level", GraphOptimizationLevel)

# SessionOptions attribute -> nee_limit_t (include/nee/nee.h), in that order.
LIMIT_ATTRIBUTES = ("max_graph_nodes", "max_subgraph_depth", "max_tensor_bytes", "max_external_data_bytes",
                    "session_memory_limit_bytes")


def limits_of(options: Any) -> List[Tuple[int, int]]:
    """The limits set on `options` as (nee_limit_t, value) (an ORT-like object may have none)."""
    return [(i, int(getattr(options, name))) for i, name in enumerate(LIMIT_ATTRIBUTES) if hasattr(options, name)]
SessionOptions.execution_mode = _enum_property("execution_mode", ExecutionMode)
SessionOptions.execution_order = _enum_property("execution_order", ExecutionOrder)


class RunOptions:
    """Per-run options. Setting `terminate` (from any thread) stops runs using
    these options before their next node with RunCancelled, as in ONNX Runtime."""

    __slots__ = ("_log_severity_level", "_log_verbosity_level", "_logid", "_only_execute_path_to_fetches",
                 "_handle", "_terminate", "_timeout_ms", "_config", "__weakref__")

    def __init__(self) -> None:
        self._log_severity_level = -1
        self._log_verbosity_level = 0
        self._logid = ""
        self._only_execute_path_to_fetches = False
        self._handle = _nee.RunOptions()
        self._terminate = False
        self._timeout_ms = 0
        self._config: Dict[str, str] = {}

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value: bool) -> None:
        self._terminate = _as_bool("terminate", value)
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

    @property
    def only_execute_path_to_fetches(self) -> bool:
        """True: run only the nodes the requested outputs depend on (False: every node)."""
        return self._only_execute_path_to_fetches

    @only_execute_path_to_fetches.setter
    def only_execute_path_to_fetches(self, value: bool) -> None:
        self._only_execute_path_to_fetches = _as_bool("only_execute_path_to_fetches", value)
        self._handle.set_only_execute_path_to_fetches(self._only_execute_path_to_fetches)

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Sets a run configuration entry; stored and readable (nee acts on none yet)."""
        self._config[_as_str("key", key)] = _as_str("value", value)

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise Fail(f"RunOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_active_adapter(self, adapter: Any) -> None:
        raise _NotImplemented("nee does not support LoRA adapters")


for _name, _check in (("log_severity_level", _as_int), ("log_verbosity_level", _as_int), ("logid", _as_str)):
    setattr(RunOptions, _name, _simple_property(_name, _check))
del _name, _check

__all__ = ["GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "SessionOptions", "RunOptions"]
