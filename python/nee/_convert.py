"""Python objects <-> nee values: the dtype tables (narrow types through the
optional ml_dtypes), numpy arrays in without a copy, outputs back as arrays,
and the conversions ONNX Runtime applies to what a caller feeds (lists to the
input's declared element type, DLPack producers, read-only and strided arrays)."""
from __future__ import annotations

import threading
from typing import Any, Optional

import numpy as np

from . import _nee
from ._errors import InvalidArgument

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


def _to_value(obj: Any, type_hint: str = "", elem_code: int = 0) -> "_nee.Value":
    """Converts what a caller feeds to a nee value: a numpy array, an OrtValue, a
    DLPack producer (torch, ...), a list or scalar (made an array of the input's
    declared element type `elem_code`, as ONNX Runtime does), a list of arrays
    (a sequence input), a dict (map) or None."""
    if type(obj) is np.ndarray and obj.ndim > 0 and obj.flags.c_contiguous:  # the common case, first
        code = _FAST_CODES.get(obj.dtype)
        if code is not None:
            if obj.flags.aligned:  # nee reads the array's own buffer (no copy), as ONNX Runtime does
                return _nee.tensor_view_of_array(code, obj, obj)
            return _nee.tensor_from_array(code, obj)
    if obj is None:
        return _nee.none()
    array_of = getattr(obj, "_nee_array", None)  # an OrtValue
    if array_of is not None:
        return _to_value(array_of(), type_hint, elem_code)
    if isinstance(obj, (list, tuple)) and (type_hint.startswith("seq") or type_hint.startswith("optional(seq")
                                           or (not type_hint and _holds_arrays(obj))):
        return _sequence_value(list(obj))
    return _array_value(_as_array(obj, type_hint, elem_code))


def _holds_arrays(items: Any) -> bool:
    return bool(items) and all(isinstance(x, np.ndarray) for x in items)


def _sequence_value(items: list) -> "_nee.Value":
    values = [_to_value(x) for x in items]
    elem = 0
    if items and isinstance(items[0], np.ndarray):
        elem = _code_of_dtype(items[0].dtype) or 0
    return _nee.sequence(values, elem)


def _as_array(obj: Any, type_hint: str, elem_code: int) -> np.ndarray:
    """An ndarray for a tensor input: lists and scalars take the declared element type."""
    if isinstance(obj, np.ndarray):
        return obj
    if not isinstance(obj, (np.generic, list, tuple, int, float, bool, str, bytes)) and hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(obj)  # torch and other DLPack producers: no copy on the CPU
        except (TypeError, BufferError, RuntimeError):
            pass  # e.g. a device tensor: np.asarray below copies or explains
    if isinstance(obj, (list, tuple, int, float, bool)) and type_hint.startswith("tensor("):
        if elem_code == 8:
            return np.asarray(obj, dtype=object)
        dtype = _NUMPY_OF_CODE.get(elem_code)
        if dtype is not None:
            try:
                return np.asarray(obj, dtype=dtype)
            except (TypeError, ValueError, OverflowError) as err:
                raise InvalidArgument(f"cannot convert the given {type(obj).__name__} to {type_hint}: {err}") from None
    return np.asarray(obj)


def _array_value(arr: np.ndarray) -> "_nee.Value":
    code = None if arr.dtype.kind in ("U", "S", "O") else _code_of_dtype(arr.dtype)
    if code is None and arr.dtype.kind in ("U", "S", "O", "V"):  # ml_dtypes' narrow types are "V" too
        flat = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in arr.reshape(-1).tolist()]
        return _nee.string_tensor(list(arr.shape), flat)
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
