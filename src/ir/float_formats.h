// Bit-exact conversions between float and the narrow floating formats ONNX
// uses (float16, bfloat16, the float8 family, float4e2m1, float8e8m0), and
// packing of sub-byte integers. Float -> narrow rounds to nearest even; the
// float8 saturation rules follow the ONNX Cast specification.
#pragma once
#include <cstdint>

#include "ir/data_type.h"

namespace nee {

float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);

// `type` is one of the kFloat8* types.
float Float8ToFloat(uint8_t bits, DataType type);
uint8_t FloatToFloat8(float value, DataType type, bool saturate);

float Float4E2M1ToFloat(uint8_t nibble);
uint8_t FloatToFloat4E2M1(float value);

// Sub-byte element i of a packed buffer (low nibble first, as ONNX packs).
uint8_t GetNibble(const uint8_t* data, int64_t i);
void SetNibble(uint8_t* data, int64_t i, uint8_t nibble);
int8_t Int4FromNibble(uint8_t nibble);  // sign-extends

}  // namespace nee
