"""Module-level functions of ONNX Runtime's API: providers, device, version and
build information, logging, telemetry and shared allocators.

nee is a CPU runtime without telemetry; these do what ONNX Runtime does in a
CPU-only build where that is nothing (telemetry, shared allocators)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from . import _nee
from ._errors import Fail, InvalidArgument
from ._session import ALL_PROVIDERS, CPU_PROVIDER

_logging: Dict[str, Any] = {"severity": 2, "verbosity": 0, "callback": None}


def get_all_providers() -> List[str]:
    """Every provider name ONNX Runtime knows, highest priority first (the CPU last)."""
    return list(ALL_PROVIDERS)


def get_available_providers() -> List[str]:
    return [CPU_PROVIDER]


def get_device() -> str:
    return "CPU"


def get_version_string() -> str:
    return _nee.version()


def get_build_info() -> str:
    return f"nee Build Info: version={_nee.version()}, providers={CPU_PROVIDER}"


def set_default_logger_severity(log_severity_level: int) -> None:
    """0 verbose ... 4 fatal, as ONNX Runtime; nee logs nothing below an error it raises."""
    _logging["severity"] = _log_level(log_severity_level, "log_severity_level")


def set_default_logger_verbosity(log_verbosity_level: int) -> None:
    if not isinstance(log_verbosity_level, int):
        raise TypeError("log_verbosity_level must be an int")
    _logging["verbosity"] = int(log_verbosity_level)


def set_default_logger_callback(callback: Optional[Callable[..., None]], severity: int = 2) -> None:
    """Accepted as ONNX Runtime accepts it; nee reports problems as exceptions, not log records."""
    if callback is not None and not callable(callback):
        raise Fail("set_default_logger_callback: the callback must be callable or None")
    _logging["severity"] = _log_level(severity, "severity")
    _logging["callback"] = callback


def _log_level(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int")
    if not 0 <= value <= 4:
        raise Fail(f"{what} must be between 0 (verbose) and 4 (fatal), got {value}")
    return int(value)


def enable_telemetry_events() -> None:
    """nee collects no telemetry (as ONNX Runtime outside Windows)."""


def disable_telemetry_events() -> None:
    """nee collects no telemetry (as ONNX Runtime outside Windows)."""


def create_and_register_allocator(mem_info: Any, arena_cfg: Any = None) -> None:
    """Shared allocators are an ONNX Runtime environment feature; nee sessions plan
    their own arenas, so registering one is accepted and changes nothing."""
    if mem_info is None:
        raise InvalidArgument("create_and_register_allocator: mem_info is required")


def create_and_register_allocator_v2(provider_type: str, mem_info: Any, provider_options: Dict[str, str],
                                     arena_cfg: Any = None) -> None:
    if provider_type != CPU_PROVIDER:
        raise InvalidArgument(f"create_and_register_allocator_v2: provider '{provider_type}' is not available "
                              f"(nee has {CPU_PROVIDER})")
    create_and_register_allocator(mem_info, arena_cfg)


def set_seed(seed: int) -> None:
    """Seeds the random ops' generator where a model does not give a seed (nee: Python's, for parity)."""
    import random  # here, not at import time

    random.seed(int(seed))


def set_global_thread_pool_sizes(intra_op_num_threads: int = 0, inter_op_num_threads: int = 0) -> None:
    """nee sessions always own their thread pools (intra_op_num_threads per session)."""


def has_collective_ops() -> bool:
    return False


def preload_dlls(cuda: bool = True, cudnn: bool = True, msvc: bool = True, directory: Optional[str] = None) -> None:
    """Nothing to preload: nee is one native extension."""


def print_debug_info() -> None:
    print(get_build_info())
    print("available providers:", get_available_providers())


__all__ = ["get_all_providers", "get_available_providers", "get_device", "get_version_string", "get_build_info",
           "set_default_logger_severity", "set_default_logger_verbosity", "set_default_logger_callback",
           "enable_telemetry_events", "disable_telemetry_events", "create_and_register_allocator",
           "create_and_register_allocator_v2", "set_seed", "set_global_thread_pool_sizes", "has_collective_ops",
           "preload_dlls", "print_debug_info"]
