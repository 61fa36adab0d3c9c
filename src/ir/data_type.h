// Element types: the numbering is ONNX's TensorProto.DataType so a type read
// from a file needs no translation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nee {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

constexpr int32_t kMaxDataType = 26;

bool IsValidDataType(int32_t value);
// Size in bits of one element (4 for int4/uint4/float4e2m1, 2 for int2/uint2).
// Strings report sizeof(std::string) * 8: they are stored as std::string.
int ElementBits(DataType type);
// Bytes needed for `count` elements (sub-byte types are packed, rounded up).
size_t StorageBytes(DataType type, int64_t count);
// ONNX spelling: "float", "int64", "float8e4m3fn", ... (used in "tensor(float)").
const char* DataTypeName(DataType type);
// numpy-style name for messages and the Python layer ("float32", "int64").
const char* DataTypeNumpyName(DataType type);

bool IsFloatingPoint(DataType type);  // float, double, float16, bfloat16, float8*, float4
bool IsSignedInteger(DataType type);
bool IsUnsignedInteger(DataType type);
bool IsSubByte(DataType type);
// int8 or uint8: the element types of the quantized ops' byte tensors.
inline bool Is8Bit(DataType type) { return type == DataType::kInt8 || type == DataType::kUint8; }

// Maps a C++ type to its DataType (for typed kernels).
template <typename T>
struct DataTypeOf;
#define NEE_DATATYPE_OF(T, E) \
  template <>                 \
  struct DataTypeOf<T> {      \
    static constexpr DataType value = DataType::E; \
  };
NEE_DATATYPE_OF(float, kFloat)
NEE_DATATYPE_OF(double, kDouble)
NEE_DATATYPE_OF(int8_t, kInt8)
NEE_DATATYPE_OF(int16_t, kInt16)
NEE_DATATYPE_OF(int32_t, kInt32)
NEE_DATATYPE_OF(int64_t, kInt64)
NEE_DATATYPE_OF(uint8_t, kUint8)
NEE_DATATYPE_OF(uint16_t, kUint16)
NEE_DATATYPE_OF(uint32_t, kUint32)
NEE_DATATYPE_OF(uint64_t, kUint64)
NEE_DATATYPE_OF(bool, kBool)
NEE_DATATYPE_OF(std::string, kString)
#undef NEE_DATATYPE_OF

}  // namespace nee
