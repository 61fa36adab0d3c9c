#include "ir/data_type.h"

namespace nee {

namespace {
struct TypeRow {
  DataType type;
  int bits;
  const char* onnx_name;
  const char* numpy_name;
};
// One row per element type, in enum order.
constexpr TypeRow kTypes[] = {
    {DataType::kUndefined, 0, "undefined", "undefined"},
    {DataType::kFloat, 32, "float", "float32"},
    {DataType::kUint8, 8, "uint8", "uint8"},
    {DataType::kInt8, 8, "int8", "int8"},
    {DataType::kUint16, 16, "uint16", "uint16"},
    {DataType::kInt16, 16, "int16", "int16"},
    {DataType::kInt32, 32, "int32", "int32"},
    {DataType::kInt64, 64, "int64", "int64"},
    {DataType::kString, static_cast<int>(sizeof(std::string) * 8), "string", "object"},
    {DataType::kBool, 8, "bool", "bool"},
    {DataType::kFloat16, 16, "float16", "float16"},
    {DataType::kDouble, 64, "double", "float64"},
    {DataType::kUint32, 32, "uint32", "uint32"},
    {DataType::kUint64, 64, "uint64", "uint64"},
    {DataType::kComplex64, 64, "complex64", "complex64"},
    {DataType::kComplex128, 128, "complex128", "complex128"},
    {DataType::kBFloat16, 16, "bfloat16", "bfloat16"},
    {DataType::kFloat8E4M3FN, 8, "float8e4m3fn", "float8_e4m3fn"},
    {DataType::kFloat8E4M3FNUZ, 8, "float8e4m3fnuz", "float8_e4m3fnuz"},
    {DataType::kFloat8E5M2, 8, "float8e5m2", "float8_e5m2"},
    {DataType::kFloat8E5M2FNUZ, 8, "float8e5m2fnuz", "float8_e5m2fnuz"},
    {DataType::kUint4, 4, "uint4", "uint4"},
    {DataType::kInt4, 4, "int4", "int4"},
    {DataType::kFloat4E2M1, 4, "float4e2m1", "float4_e2m1fn"},
    {DataType::kFloat8E8M0, 8, "float8e8m0", "float8_e8m0fnu"},
    {DataType::kUint2, 2, "uint2", "uint2"},
    {DataType::kInt2, 2, "int2", "int2"},
};
static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == kMaxDataType + 1);

const TypeRow& Row(DataType type) {
  int32_t v = static_cast<int32_t>(type);
  return IsValidDataType(v) ? kTypes[v] : kTypes[0];
}
}  // namespace

bool IsValidDataType(int32_t value) { return value > 0 && value <= kMaxDataType; }
int ElementBits(DataType type) { return Row(type).bits; }
const char* DataTypeName(DataType type) { return Row(type).onnx_name; }
const char* DataTypeNumpyName(DataType type) { return Row(type).numpy_name; }

size_t StorageBytes(DataType type, int64_t count) {
  if (count <= 0) return 0;
  uint64_t bits = static_cast<uint64_t>(ElementBits(type)) * static_cast<uint64_t>(count);
  return static_cast<size_t>((bits + 7) / 8);
}

bool IsFloatingPoint(DataType t) {
  switch (t) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16:
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

bool IsSignedInteger(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
         t == DataType::kInt64 || t == DataType::kInt4 || t == DataType::kInt2;
}

bool IsUnsignedInteger(DataType t) {
  return t == DataType::kUint8 || t == DataType::kUint16 || t == DataType::kUint32 ||
         t == DataType::kUint64 || t == DataType::kUint4 || t == DataType::kUint2;
}

bool IsSubByte(DataType t) { return ElementBits(t) < 8; }

}  // namespace nee
