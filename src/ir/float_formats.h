// Bit-exact conversions between float and the narrow floating formats ONNX
// uses (float16, bfloat16, the float8 family, float4e2m1, float8e8m0), and
// packing of sub-byte integers. Narrowing rounds to nearest even (except
// float8e8m0, whose rounding mode is chosen by the caller, as in ONNX Cast);
// the float8 saturation rules follow the ONNX Cast specification.
//
// NaN encodings follow numpy / ml_dtypes, so results can be compared
// bitwise with them: float -> float16 keeps the NaN payload (numpy), every
// other narrowing produces the format's canonical NaN with the input's sign,
// and widening a float8 NaN gives the canonical float NaN with its sign.
#pragma once
#include <cstdint>

#include "ir/data_type.h"

namespace nee {

float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);

// Correctly rounded narrowing from double (no double rounding through float).
uint16_t DoubleToHalf(double value);
uint16_t DoubleToBFloat16(double value);

// `type` is one of the kFloat8* types (kFloat8E8M0 included; for it
// FloatToFloat8 rounds up, the ONNX default).
//
// Saturating (the ONNX default): +-Inf and values whose rounded magnitude
// exceeds the format's largest finite value become +-max. Not saturating:
// they become Inf for float8e5m2 and NaN for the others. NaN stays NaN; -0
// becomes +0 in the FNUZ formats, which have no negative zero.
float Float8ToFloat(uint8_t bits, DataType type);
uint8_t FloatToFloat8(float value, DataType type, bool saturate);
uint8_t DoubleToFloat8(double value, DataType type, bool saturate);

// float8e8m0 (an exponent only: 2^(bits-127), 0xFF is NaN, no sign, no zero).
// Rounding follows ONNX Cast 24+ `round_mode`: kUp rounds the magnitude up to
// the next power of two, kDown truncates, kNearest rounds up when the
// mantissa is at least one half (ties away, as onnx.numpy_helper does).
// The sign of the input is ignored (negative inputs are unspecified by ONNX).
// NaN -> NaN. Inf and overflow -> 0xFE when saturating, NaN otherwise.
enum class E8M0Rounding { kUp, kDown, kNearest };
float Float8E8M0ToFloat(uint8_t bits);
uint8_t FloatToFloat8E8M0(float value, bool saturate, E8M0Rounding mode);
uint8_t DoubleToFloat8E8M0(double value, bool saturate, E8M0Rounding mode);

// float4e2m1: values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no Inf, no NaN. Out of
// range and Inf saturate to +-6; NaN becomes a zero of the opposite sign
// (what ml_dtypes.float4_e2m1fn produces, so ONNX test data matches).
float Float4E2M1ToFloat(uint8_t nibble);
uint8_t FloatToFloat4E2M1(float value);
uint8_t DoubleToFloat4E2M1(double value);

// Sub-byte element i of a packed buffer (low nibble first, as ONNX packs).
uint8_t GetNibble(const uint8_t* data, int64_t i);
void SetNibble(uint8_t* data, int64_t i, uint8_t nibble);
int8_t Int4FromNibble(uint8_t nibble);  // sign-extends

// 2-bit elements (int2/uint2): four per byte, element 0 in the low bits.
uint8_t GetCrumb(const uint8_t* data, int64_t i);
void SetCrumb(uint8_t* data, int64_t i, uint8_t crumb);
int8_t Int2FromCrumb(uint8_t crumb);  // sign-extends

}  // namespace nee
