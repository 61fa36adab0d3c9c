"""IOBinding: inputs and outputs bound ahead of a run, as ONNX Runtime's.

Inputs are bound without a copy (numpy arrays, OrtValues, or raw CPU pointers).
An output bound by name gets the array nee allocates; an output bound to a
caller's buffer (a pointer or an OrtValue) receives the result in that buffer,
whose shape and element type must match the output's."""
from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ._errors import InvalidArgument
from ._ortvalue import OrtValue, _check_cpu, _dtype_of_element_type


def _array_at(buffer_ptr: int, element_type: Any, shape: Sequence[int], what: str) -> np.ndarray:
    """A numpy array over `buffer_ptr` (CPU memory the caller owns and keeps alive)."""
    if element_type is None or shape is None:
        raise InvalidArgument(f"{what}: element_type and shape are required with buffer_ptr")
    dtype = _dtype_of_element_type(element_type)
    if dtype == object:
        raise InvalidArgument(f"{what}: string tensors cannot be bound by pointer")
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise InvalidArgument(f"{what}: shape {dims} has a negative dimension")
    if not buffer_ptr:
        raise InvalidArgument(f"{what}: buffer_ptr is null")
    count = int(np.prod(dims)) if dims else 1
    raw = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(dims)


class IOBinding:
    """Binds a session's inputs and outputs for run_with_iobinding."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._inputs: Dict[str, Any] = {}
        self._outputs: Dict[str, Optional[OrtValue]] = {}  # name -> caller's buffer, or None
        self._results: List[OrtValue] = []

    # Inputs

    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name: str, device_type: Any, device_id: int, element_type: Any, shape: Sequence[int],
                   buffer_ptr: int) -> None:
        _check_cpu(device_type)
        self._inputs[name] = _array_at(buffer_ptr, element_type, shape, f"input '{name}'")

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise TypeError(f"input '{name}': expected an OrtValue, got {type(ortvalue).__name__}")
        self._inputs[name] = ortvalue

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def synchronize_inputs(self) -> None:
        """CPU memory needs no synchronization."""

    # Outputs

    def bind_output(self, name: str, device_type: Any = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Optional[Sequence[int]] = None, buffer_ptr: Optional[int] = None) -> None:
        _check_cpu(device_type)
        if buffer_ptr is None:
            self._outputs[name] = None
        else:
            self._outputs[name] = OrtValue(_array_at(buffer_ptr, element_type, shape, f"output '{name}'"))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise TypeError(f"output '{name}': expected an OrtValue, got {type(ortvalue).__name__}")
        self._outputs[name] = ortvalue

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def synchronize_outputs(self) -> None:
        """CPU memory needs no synchronization."""

    def get_outputs(self) -> List[OrtValue]:
        """The bound outputs of the last run, in binding order."""
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> List[OrtValue]:
        return self.get_outputs()

    def copy_outputs_to_cpu(self) -> List[Any]:
        """Copies of the last run's outputs as numpy arrays (lists, dicts for sequences, maps)."""
        return [_copy(v.numpy()) for v in self._results]

    def get_outputs_names(self) -> List[str]:
        return list(self._outputs)

    # Running (InferenceSession.run_with_iobinding)

    def _run(self, run_options: Any) -> None:
        if not self._outputs:
            raise InvalidArgument("run_with_iobinding: no output is bound (bind_output or bind_ortvalue_output)")
        names = list(self._outputs)
        results = self._session.run(names, dict(self._inputs), run_options)
        self._results = [self._deliver(name, result) for name, result in zip(names, results)]

    def _deliver(self, name: str, result: Any) -> OrtValue:
        target = self._outputs[name]
        if target is None:
            return OrtValue(result)
        buffer = target.numpy()
        if not isinstance(result, np.ndarray) or not isinstance(buffer, np.ndarray):
            raise InvalidArgument(f"output '{name}': only tensors can be written into a bound buffer")
        if result.shape != buffer.shape or result.dtype != buffer.dtype:
            raise InvalidArgument(f"output '{name}' is {result.dtype}{list(result.shape)} but the bound buffer "
                                  f"is {buffer.dtype}{list(buffer.shape)}")
        np.copyto(buffer, result)
        return target


def _copy(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


__all__ = ["IOBinding"]
