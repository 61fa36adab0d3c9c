#include "ir/float_formats.h"

#include <cmath>
#include <cstring>

namespace nee {

namespace {
uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: value = mant * 2^-24.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): scale so the integer part is the mantissa.
    float a = BitsFloat(abs);
    float scaled = a * 16777216.0f;  // 2^24
    float r = std::nearbyint(scaled);  // default rounding mode: nearest even
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112<<23) and round to nearest even
  return sign | static_cast<uint16_t>(abs >> 13);
}

float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint8_t GetNibble(const uint8_t* data, int64_t i) {
  uint8_t byte = data[i >> 1];
  return (i & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0f);
}

void SetNibble(uint8_t* data, int64_t i, uint8_t nibble) {
  uint8_t& byte = data[i >> 1];
  if (i & 1) byte = static_cast<uint8_t>((byte & 0x0f) | (nibble << 4));
  else byte = static_cast<uint8_t>((byte & 0xf0) | (nibble & 0x0f));
}

int8_t Int4FromNibble(uint8_t nibble) {
  return static_cast<int8_t>((nibble & 0x8) ? static_cast<int>(nibble) - 16 : nibble);
}

// Float8 and float4: placeholders until the narrow-format work lands
// (see tests/unit/ir/float_formats_test.cc); they return NaN/0 so that any
// use shows up as a failing conformance case rather than silent garbage.
float Float8ToFloat(uint8_t, DataType) { return std::nanf(""); }
uint8_t FloatToFloat8(float, DataType, bool) { return 0x7f; }
float Float4E2M1ToFloat(uint8_t) { return std::nanf(""); }
uint8_t FloatToFloat4E2M1(float) { return 0x7; }

}  // namespace nee
