"""OrtValue, SparseTensor and the device/memory descriptions of ONNX Runtime's API.

nee runs on the CPU only, so an OrtValue is a numpy array (shared, not
copied, as ONNX Runtime shares a CPU array), a sequence or map, or a
SparseTensor; devices and allocators describe the CPU and accept what ONNX
Runtime accepts for it, refusing other devices by name."""
from __future__ import annotations

import enum
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ._convert import _NUMPY_OF_CODE, _code_of_dtype, _numpy_dtype_of
from ._errors import InvalidArgument
from ._options import OrtEnum

_ONNX_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                    8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
                    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
                    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1"}


def _element_code(arr: np.ndarray) -> int:
    if arr.dtype.kind in ("U", "S", "O"):
        return 8
    return _code_of_dtype(arr.dtype) or 0


def _type_string(value: Any) -> str:
    """ONNX Runtime's type string of a value: tensor(float), seq(tensor(int64)), map(string,float)."""
    if isinstance(value, np.ndarray):
        return f"tensor({_ONNX_TYPE_NAMES.get(_element_code(value), 'undefined')})"
    if isinstance(value, SparseTensor):
        return value.data_type()
    if isinstance(value, list):
        return f"seq({_type_string(value[0])})" if value else "seq(tensor(undefined))"
    if isinstance(value, dict):
        key, val = next(iter(value.items()), ("", 0.0))
        key_type = "string" if isinstance(key, str) else "int64"
        val_type = _ONNX_TYPE_NAMES.get(_element_code(np.asarray(val)), "float")
        return f"map({key_type},tensor({val_type}))"
    return "undefined"


def _check_cpu(device_type: Any) -> None:
    """Refuses any device but the CPU: a name ("cpu"), or an OrtDevice (the C-level signatures)."""
    if isinstance(device_type, OrtDevice):
        if device_type.device_type() != 0:
            raise InvalidArgument(f"device type {device_type.device_type()}: nee runs on the CPU only")
        return
    name = device_type if isinstance(device_type, str) else getattr(device_type, "__name__", str(device_type))
    if str(name).lower() != "cpu":
        raise InvalidArgument(f"device '{name}': nee runs on the CPU only (device_type must be 'cpu')")


def _dtype_of_element_type(element_type: Any) -> np.dtype:
    """A numpy dtype from a numpy type or an ONNX element type number."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        code = int(element_type)
        if code == 8:
            return np.dtype(object)
        if code not in _NUMPY_OF_CODE and code not in _ONNX_TYPE_NAMES:
            raise InvalidArgument(f"element_type {code} is not an ONNX tensor element type")
        return np.dtype(_numpy_dtype_of(code))
    try:
        dtype = np.dtype(element_type)
    except TypeError:
        raise InvalidArgument(f"element_type {element_type!r} is not a numpy type or ONNX element type") from None
    return np.dtype(object) if dtype.kind in ("U", "S") else dtype


class OrtDevice:
    """A device description. nee has one device, the CPU; both of ONNX Runtime's
    constructors (the Python OrtDevice(c_device) and the C one
    OrtDevice(type, mem_type, device_id[, vendor_id])) are accepted."""

    _TYPES = {"cpu": 0, "cuda": 1, "gpu": 1, "fpga": 2, "npu": 3, "dml": 4, "cann": 5, "webgpu": 6}

    def __init__(self, device_type: Any = 0, mem_type: int = 0, device_id: int = 0, vendor_id: int = 0) -> None:
        if isinstance(device_type, OrtDevice):  # ONNX Runtime's Python wrapper around a C device
            device_type, mem_type, device_id, vendor_id = (device_type._type, device_type._mem_type,
                                                           device_type._id, device_type._vendor_id)
        self._type = int(device_type)
        self._mem_type = int(mem_type)
        self._id = int(device_id)
        self._vendor_id = int(vendor_id)

    @staticmethod
    def make(ort_device_name: str, device_id: int, vendor_id: int = -1) -> "OrtDevice":
        key = str(ort_device_name).lower()
        if key not in OrtDevice._TYPES:
            raise InvalidArgument(f"unsupported device type '{ort_device_name}'")
        if vendor_id < 0:  # ONNX Runtime fills in the vendor of a known device type
            vendor_id = OrtDeviceVendorId.NVIDIA if key in ("cuda", "gpu") else OrtDeviceVendorId.NONE
        return OrtDevice(OrtDevice._TYPES[key], 0, device_id, vendor_id)

    # The C class's constants.
    @staticmethod
    def cpu() -> int:
        return 0

    @staticmethod
    def cuda() -> int:
        return 1

    @staticmethod
    def fpga() -> int:
        return 2

    @staticmethod
    def npu() -> int:
        return 3

    @staticmethod
    def dml() -> int:
        return 4

    @staticmethod
    def default_memory() -> int:
        return 0

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_mem_type(self) -> int:
        return self._mem_type

    def device_vendor_id(self) -> int:
        return self._vendor_id

    def _get_c_device(self) -> "OrtDevice":
        return self


class OrtAllocatorType(OrtEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemType(OrtEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtDeviceVendorId(enum.IntEnum):
    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class OrtDeviceMemoryType(OrtEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtMemoryInfoDeviceType(OrtEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtSparseFormat(OrtEnum):
    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


class OrtMemoryInfo:
    """Describes where memory lives (name "Cpu" on nee)."""

    def __init__(self, name: str, alloc_type: Any, device_id: int, mem_type: Any) -> None:
        self._name = str(name)
        self._alloc_type = OrtAllocatorType(int(alloc_type))
        self._device_id = int(device_id)
        self._mem_type = OrtMemType(int(mem_type))

    @staticmethod
    def create_v2(name: str, device_type: int, vendor_id: int, device_id: int, mem_type: Any,
                  alignment: int = 0, allocator_type: Any = OrtAllocatorType.ORT_DEVICE_ALLOCATOR) -> "OrtMemoryInfo":
        return OrtMemoryInfo(name, allocator_type, device_id, mem_type)

    name = property(lambda self: self._name)
    allocator_type = property(lambda self: self._alloc_type)
    device_id = property(lambda self: self._device_id)
    mem_type = property(lambda self: self._mem_type)
    device_mem_type = property(lambda self: 0)
    device_vendor_id = property(lambda self: 0)


class OrtArenaCfg:
    """Arena settings: OrtArenaCfg(max_mem, arena_extend_strategy, initial_chunk_size_bytes,
    max_dead_bytes_per_chunk) or OrtArenaCfg({key: value}). nee plans its own
    arenas per model, so these are kept and read back only."""

    _KEYS = ("max_mem", "arena_extend_strategy", "initial_chunk_size_bytes", "max_dead_bytes_per_chunk",
             "initial_growth_chunk_size_bytes", "max_power_of_two_extend_bytes")

    def __init__(self, *args: Any) -> None:
        values: Dict[str, int] = {k: -1 for k in self._KEYS}
        values["max_mem"] = 0
        if len(args) == 1 and isinstance(args[0], dict):
            for key, value in args[0].items():
                if key not in self._KEYS:
                    raise InvalidArgument(f"OrtArenaCfg: unknown key '{key}' (known: {', '.join(self._KEYS)})")
                values[key] = int(value)
        elif len(args) == 4:
            values.update(zip(self._KEYS[:4], (int(a) for a in args)))
        elif args:
            raise TypeError("OrtArenaCfg takes (max_mem, arena_extend_strategy, initial_chunk_size_bytes, "
                            "max_dead_bytes_per_chunk) or a dict")
        self._values = values


def _arena_setting(key: str) -> property:
    def get(self: OrtArenaCfg) -> int:
        return self._values[key]

    def set_(self: OrtArenaCfg, value: int) -> None:
        self._values[key] = int(value)
    return property(get, set_)


for _key in OrtArenaCfg._KEYS:
    setattr(OrtArenaCfg, _key, _arena_setting(_key))
del _key


class SparseTensor:
    """A sparse tensor in COO, CSR or block-sparse form, on the CPU. nee can
    build and inspect one as ONNX Runtime does; no nee kernel takes one as input."""

    def __init__(self, fmt: OrtSparseFormat, dense_shape: Sequence[int], values: np.ndarray,
                 indices: List[np.ndarray]) -> None:
        self._format = fmt
        self._dense_shape = [int(d) for d in dense_shape]
        self._values = _read_only(values)
        self._indices = [_read_only(i) for i in indices]

    @staticmethod
    def sparse_coo_from_numpy(dense_shape: Sequence[int], values: np.ndarray, coo_indices: np.ndarray,
                              ort_device: Any = None) -> "SparseTensor":
        _check_device(ort_device)
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_COO, dense_shape, np.asarray(values),
                            [_int64_indices(coo_indices, "coo_indices")])

    @staticmethod
    def sparse_csr_from_numpy(dense_shape: Sequence[int], values: np.ndarray, inner_indices: np.ndarray,
                              outer_indices: np.ndarray, ort_device: Any = None) -> "SparseTensor":
        _check_device(ort_device)
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_CSRC, dense_shape, np.asarray(values),
                            [_int64_indices(inner_indices, "inner_indices"),
                             _int64_indices(outer_indices, "outer_indices")])

    def values(self) -> np.ndarray:
        return self._values

    def as_coo_view(self) -> "_IndexView":
        self._require(OrtSparseFormat.ORT_SPARSE_COO)
        return _IndexView(self._indices)

    def as_csrc_view(self) -> "_IndexView":
        self._require(OrtSparseFormat.ORT_SPARSE_CSRC)
        return _IndexView(self._indices)

    def as_blocksparse_view(self) -> "_IndexView":
        self._require(OrtSparseFormat.ORT_SPARSE_BLOCK_SPARSE)
        return _IndexView(self._indices)

    def _require(self, fmt: OrtSparseFormat) -> None:
        if self._format != fmt:
            raise InvalidArgument(f"this sparse tensor is {self._format.name}, not {fmt.name}")

    def format(self) -> OrtSparseFormat:
        return self._format

    def dense_shape(self) -> List[int]:
        return list(self._dense_shape)

    def data_type(self) -> str:
        return f"sparse_tensor({_ONNX_TYPE_NAMES.get(_element_code(self._values), 'undefined')})"

    def device_name(self) -> str:
        return "cpu"

    def to_cuda(self, ort_device: Any = None) -> "SparseTensor":
        raise InvalidArgument("nee runs on the CPU only: a sparse tensor cannot be copied to CUDA")

    def _get_c_tensor(self) -> "SparseTensor":
        return self


class _IndexView:
    """The index arrays of a sparse tensor: indices() (COO, block sparse) or inner()/outer() (CSR)."""

    def __init__(self, indices: List[np.ndarray]) -> None:
        self._indices = indices

    def indices(self) -> np.ndarray:
        return self._indices[0]

    def inner(self) -> np.ndarray:
        return self._indices[0]

    def outer(self) -> np.ndarray:
        return self._indices[1]


def _read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view: ONNX Runtime's sparse tensor hands out views it owns."""
    view = arr.view()
    view.flags.writeable = False
    return view


def _int64_indices(indices: Any, what: str) -> np.ndarray:
    arr = np.asarray(indices)
    if arr.dtype != np.int64:
        raise InvalidArgument(f"{what} must be int64, got {arr.dtype}")
    return arr


def _check_device(device: Any) -> None:
    if device is not None and isinstance(device, OrtDevice) and device.device_type() != 0:
        raise InvalidArgument("nee runs on the CPU only: the sparse tensor's device must be the CPU")


class OrtValue:
    """A value nee can take as input or give as output: a tensor (a numpy array
    whose memory the OrtValue shares), a sequence, a map, or a SparseTensor."""

    def __init__(self, value: Any, numpy_obj: Optional[np.ndarray] = None) -> None:
        if isinstance(value, OrtValue):  # ONNX Runtime's wrapper-of-C-value constructor
            value = value._value
        self._value = value

    # Construction

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, /, device_type: Any = "cpu", device_id: int = 0,
                            vendor_id: int = -1) -> "OrtValue":
        _check_cpu(device_type)
        arr = numpy_obj if isinstance(numpy_obj, np.ndarray) else np.asarray(numpy_obj)
        if arr.dtype.kind in ("U", "S"):
            arr = arr.astype(object)
        elif not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return OrtValue(arr)

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: np.ndarray, /, onnx_element_type: int) -> "OrtValue":
        """The array's bytes taken as `onnx_element_type` (e.g. uint16 bits as bfloat16)."""
        arr = np.ascontiguousarray(data)
        dtype = _dtype_of_element_type(onnx_element_type)
        if dtype.itemsize != arr.dtype.itemsize:
            raise InvalidArgument(f"element type {onnx_element_type} has {dtype.itemsize}-byte elements, "
                                  f"the array {arr.dtype.itemsize}-byte ones")
        return OrtValue(arr.view(dtype))

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any, device_type: str = "cpu",
                                     device_id: int = 0, vendor_id: int = -1,
                                     memory_info: Any = None) -> "OrtValue":
        _check_cpu(device_type)
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims):
            raise InvalidArgument(f"shape {dims}: dimensions must not be negative")
        dtype = _dtype_of_element_type(element_type)
        return OrtValue(np.full(dims, "", dtype=object) if dtype == object else np.empty(dims, dtype=dtype))

    @staticmethod
    def ort_value_from_sparse_tensor(sparse_tensor: SparseTensor) -> "OrtValue":
        return OrtValue(sparse_tensor)

    @staticmethod
    def from_dlpack(data: Any, /, is_bool_tensor: bool = False) -> "OrtValue":
        """An OrtValue over a DLPack producer's memory (or a DLPack capsule), without a
        copy; `is_bool_tensor` (the C-level signature's) reads uint8 elements as bool."""
        source = data if hasattr(data, "__dlpack__") else _Capsule(data)
        arr = np.from_dlpack(source)
        if is_bool_tensor and arr.dtype == np.uint8:
            arr = arr.view(np.bool_)
        return OrtValue(arr)

    # Inspection

    def _tensor(self) -> np.ndarray:
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgument(f"this OrtValue holds {_type_string(self._value)}, not a tensor")
        return self._value

    def numpy(self) -> Any:
        """The tensor as a numpy array sharing this OrtValue's memory (a list or dict for sequences and maps)."""
        if isinstance(self._value, SparseTensor):
            raise InvalidArgument("numpy() of a sparse tensor: use as_sparse_tensor()")
        return self._value

    def shape(self) -> List[int]:
        if isinstance(self._value, SparseTensor):
            return self._value.dense_shape()
        return list(self._tensor().shape)

    def data_type(self) -> str:
        return _type_string(self._value)

    def element_type(self) -> int:
        if isinstance(self._value, SparseTensor):
            return _element_code(self._value.values())
        return _element_code(self._tensor())

    def device_name(self) -> str:
        return "cpu"

    def has_value(self) -> bool:
        return self._value is not None

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray)

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        return isinstance(self._value, SparseTensor)

    def as_sparse_tensor(self) -> SparseTensor:
        if not isinstance(self._value, SparseTensor):
            raise InvalidArgument("this OrtValue does not hold a sparse tensor")
        return self._value

    def data_ptr(self) -> int:
        return int(self._tensor().ctypes.data)

    def tensor_size_in_bytes(self) -> int:
        return int(self._tensor().nbytes)

    def update_inplace(self, data: np.ndarray) -> None:
        """Copies `data` into this tensor's memory (same element count and type)."""
        target = self._tensor()
        source = np.asarray(data)
        if source.size != target.size or source.dtype != target.dtype:
            raise InvalidArgument(f"update_inplace: got {source.size} {source.dtype} elements for a tensor of "
                                  f"{target.size} {target.dtype}")
        np.copyto(target, source.reshape(target.shape))

    # DLPack out (numpy's own protocol, so torch.from_dlpack(ortvalue) works without a copy)

    def to_dlpack(self) -> Any:
        return self._tensor().__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._tensor().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._tensor().__dlpack_device__()

    # What ONNX Runtime's own helpers reach for

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self._tensor()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def _nee_array(self) -> Any:
        return self._value

    def _get_c_value(self) -> "OrtValue":
        return self

    @property
    def _ortvalue(self) -> "OrtValue":
        return self

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()})"


class _Capsule:
    """Lets np.from_dlpack read a bare DLPack capsule (ONNX Runtime's from_dlpack accepts one)."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> Any:
        return (1, 0)  # kDLCPU


__all__ = ["OrtValue", "OrtDevice", "OrtMemoryInfo", "OrtArenaCfg", "OrtAllocatorType", "OrtMemType",
           "OrtDeviceVendorId", "OrtDeviceMemoryType", "OrtMemoryInfoDeviceType", "SparseTensor", "OrtSparseFormat"]
