"""Custom operators written in Python with numpy: SessionOptions.register_custom_op.

Each op goes to the engine through the custom-op C ABI (include/nee/custom_op.h)
as an in-process definition, registered for the sessions made with those
options only. The extension's bridge (python/src/nee_python.cc) takes the GIL
before calling into Python, so the op runs from whichever thread runs the
session; it calls the two methods below, which hold the Python-side logic."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._convert import _SUB_BYTE, _TWO_BIT, _code_of_dtype, _numpy_dtype_of
from ._errors import InvalidArgument

# A dim as Python sees it: a size, a symbol's name, or None (unknown).
Dim = Union[int, str, None]


def _dtype_code(t: Any) -> int:
    """A nee (ONNX TensorProto) element type code from a numpy dtype, a name such
    as "float32", or the code itself (e.g. onnx.TensorProto.FLOAT)."""
    if isinstance(t, int) and not isinstance(t, bool):
        return t
    try:
        dtype = np.dtype(t)
    except TypeError:
        raise InvalidArgument(f"output_types: {t!r} is not a numpy dtype or an ONNX element type code") from None
    code = _code_of_dtype(dtype)
    if code is None:
        raise InvalidArgument(f"output_types: nee has no element type for numpy's {dtype}")
    return code


def _arity(name: str, value: Any) -> Tuple[int, int]:
    """(min, max) from n or (min, max); max None or -1: no bound (variadic)."""
    if isinstance(value, int) and not isinstance(value, bool):
        lo, hi = value, value
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
        hi = -1 if hi is None else hi
    else:
        raise InvalidArgument(f"{name} must be a count or a (min, max) pair, not {value!r}")
    if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0 or (hi != -1 and hi < lo):
        raise InvalidArgument(f"{name}: bad arity {value!r}")
    return lo, hi


class PythonOp:
    """One op: the function, its arity and how its output types are found."""

    __slots__ = ("domain", "op_type", "fn", "shape_fn", "output_codes", "inputs", "outputs", "since_version")

    def __init__(self, domain: str, op_type: str, fn: Callable[..., Any], output_types: Optional[Sequence[Any]],
                 shape_fn: Optional[Callable[..., Any]], num_inputs: Any, num_outputs: Any, since_version: int) -> None:
        if not isinstance(domain, str) or not domain:
            raise InvalidArgument("register_custom_op: domain must be a non-empty str")
        if not isinstance(op_type, str) or not op_type:
            raise InvalidArgument("register_custom_op: op_type must be a non-empty str")
        if not callable(fn):
            raise TypeError(f"register_custom_op: fn must be callable, not {type(fn).__name__}")
        if shape_fn is not None and not callable(shape_fn):
            raise TypeError(f"register_custom_op: shape_fn must be callable, not {type(shape_fn).__name__}")
        if isinstance(since_version, bool) or not isinstance(since_version, int) or since_version < 1:
            raise InvalidArgument(f"register_custom_op: since_version must be an int >= 1, not {since_version!r}")
        self.domain, self.op_type, self.fn, self.shape_fn = domain, op_type, fn, shape_fn
        self.inputs = _arity("num_inputs", num_inputs)
        self.outputs = _arity("num_outputs", num_outputs)
        if self.outputs[1] == 0:
            raise InvalidArgument("num_outputs: an op has at least one output")
        if output_types is None:
            if self.inputs[0] == 0:
                raise InvalidArgument("register_custom_op: output_types is needed for an op that may have no input")
            self.output_codes = None  # each output has input 0's element type
        else:
            if isinstance(output_types, (str, type, np.dtype)) or not isinstance(output_types, Sequence):
                output_types = [output_types]
            self.output_codes = [_dtype_code(t) for t in output_types]
            if len(self.output_codes) < (self.outputs[1] if self.outputs[1] != -1 else self.outputs[0]):
                raise InvalidArgument(f"output_types: {len(self.output_codes)} types for up to "
                                      f"{self.outputs[1]} outputs")
        self.since_version = since_version

    def spec(self) -> Tuple[Any, ...]:
        """What the extension registers through nee_session_options_add_custom_op."""
        return (self.domain, self.op_type, self.since_version, self.inputs[0], self.inputs[1], self.outputs[0],
                self.outputs[1], self)

    def _codes(self, input0_code: int, n: int) -> List[int]:
        if self.output_codes is None:
            return [input0_code] * n
        if n > len(self.output_codes):  # variadic outputs: the last type repeats
            return self.output_codes + [self.output_codes[-1]] * (n - len(self.output_codes))
        return self.output_codes[:n]

    # ---- Called by the extension's bridge, with the GIL held.

    def infer(self, input_types: List[Optional[Tuple[int, Optional[List[Dim]]]]], attributes: Dict[str, Any],
              num_outputs: int) -> List[Tuple[int, Optional[List[Dim]]]]:
        """Output (code, shape) pairs from input (code, shape) pairs (None for an
        omitted input; shape None when the rank is unknown; dims int, str or None)."""
        codes = self._codes(input_types[0][0] if input_types and input_types[0] else 0, num_outputs)
        shapes: List[Optional[List[Dim]]] = [None] * num_outputs
        if self.shape_fn is not None:
            given = [None if t is None else (None if t[1] is None else tuple(t[1])) for t in input_types]
            result = self.shape_fn(*given, **attributes)
            if num_outputs == 1 and (result is None or (isinstance(result, (tuple, list)) and
                                                         all(d is None or isinstance(d, (int, str)) for d in result))):
                result = [result]
            result = list(result)
            if len(result) < num_outputs:
                raise ValueError(f"shape_fn returned {len(result)} shapes for {num_outputs} outputs")
            for k in range(num_outputs):
                shape = result[k]
                if shape is not None:
                    shape = [None if d is None else (d if isinstance(d, str) else int(d)) for d in shape]
                shapes[k] = shape
        return [(codes[k], shapes[k]) for k in range(num_outputs)]

    def compute(self, inputs: List[Optional[Tuple[int, List[int], bytearray]]], attributes: Dict[str, Any],
                num_outputs: int) -> List[Tuple[int, np.ndarray]]:
        """Calls fn(*arrays, **attributes); returns (code, contiguous array) per output."""
        arrays: List[Optional[np.ndarray]] = []
        for i, item in enumerate(inputs):
            if item is None:
                arrays.append(None)
                continue
            code, shape, data = item
            if code in _SUB_BYTE or code in _TWO_BIT:
                raise TypeError(f"input {i}: Python custom ops do not take packed 2- or 4-bit tensors")
            arrays.append(np.frombuffer(data, dtype=_numpy_dtype_of(code)).reshape(shape))
        result = self.fn(*arrays, **attributes)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) < num_outputs:
            raise ValueError(f"{self.op_type} returned {len(results)} outputs, the node has {num_outputs}")
        codes = self._codes(inputs[0][0] if inputs and inputs[0] else 0, num_outputs)
        out = []
        for k in range(num_outputs):
            array = np.asarray(results[k], order="C")  # (ascontiguousarray would make a scalar 1-d)
            code = _code_of_dtype(array.dtype)
            if code != codes[k]:
                want = np.dtype(_numpy_dtype_of(codes[k]))
                raise TypeError(f"output {k}: {self.op_type} returned {array.dtype}, the op declares {want} "
                                f"({'output_types' if self.output_codes is not None else 'the type of input 0'})")
            out.append((code, array))
        return out


__all__ = ["PythonOp"]
