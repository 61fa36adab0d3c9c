#include "ir/float_formats.h"

#include <algorithm>
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
uint64_t DoubleBits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// ---- A generic description of a small binary floating-point format --------

enum class Specials {
  kIeee,  // exponent all ones: Inf (mantissa 0) or NaN (float16, bfloat16, e5m2)
  kFn,    // only S.1111.111 is NaN, no Inf (e4m3fn)
  kFnuz,  // only 1.0000.000 (negative zero's code) is NaN; no -0, no Inf
  kNone,  // every code is a finite number (float4e2m1)
};

struct Format {
  int mant_bits;
  int exp_bits;
  int bias;
  Specials specials;
  uint32_t max_code;  // magnitude code of the largest finite value

  uint32_t sign_bit() const { return 1u << (exp_bits + mant_bits); }
  uint32_t exp_mask() const { return (1u << exp_bits) - 1; }
  uint32_t inf_code() const { return exp_mask() << mant_bits; }
};

constexpr Format kHalfFormat{10, 5, 15, Specials::kIeee, 0x7BFF};
constexpr Format kBFloat16Format{7, 8, 127, Specials::kIeee, 0x7F7F};
constexpr Format kE4M3FN{3, 4, 7, Specials::kFn, 0x7E};
constexpr Format kE4M3FNUZ{3, 4, 8, Specials::kFnuz, 0x7F};
constexpr Format kE5M2{2, 5, 15, Specials::kIeee, 0x7B};
constexpr Format kE5M2FNUZ{2, 5, 16, Specials::kFnuz, 0x7F};
constexpr Format kE2M1{1, 2, 1, Specials::kNone, 0x7};

const Format* Float8Format(DataType type) {
  switch (type) {
    case DataType::kFloat8E4M3FN: return &kE4M3FN;
    case DataType::kFloat8E4M3FNUZ: return &kE4M3FNUZ;
    case DataType::kFloat8E5M2: return &kE5M2;
    case DataType::kFloat8E5M2FNUZ: return &kE5M2FNUZ;
    default: return nullptr;
  }
}

// Rounds a finite magnitude a >= 0 to the format, to nearest even. Returns
// the magnitude code (exponent and mantissa fields); a code above max_code
// means the rounded value is beyond the largest finite value.
uint32_t RoundMagnitude(double a, const Format& f) {
  const uint64_t bits = DoubleBits(a);
  const int biased = static_cast<int>(bits >> 52);
  // Zero and double subnormals (below 2^-1022) round to zero in every format.
  if (biased == 0) return 0;
  const int exponent = biased - 1023;  // a = 1.xxx * 2^exponent
  const int min_exp = 1 - f.bias;      // exponent of the smallest normal
  // Far beyond every finite value: report overflow before the shifts below.
  if (exponent > static_cast<int>(f.exp_mask()) - f.bias + 1) return f.max_code + 1;
  // a in units of the target's last place (fixed below the normal range):
  // the 53-bit significand shifted right by `shift`, rounded to nearest even.
  const uint64_t significand = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int quantum_exp = std::max(exponent, min_exp) - f.mant_bits;
  const int shift = 52 + quantum_exp - exponent;  // >= 52 - mant_bits > 0
  if (shift > 60) return 0;                         // below a quarter of the smallest subnormal
  const uint64_t whole = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  uint32_t r = static_cast<uint32_t>(whole);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  if (exponent < min_exp) return r;  // subnormal; r == 2^m carries into the smallest normal
  // Normal: biased exponent field above the mantissa; a carry out of the
  // mantissa (r == 2^(m+1)) moves into the exponent field by itself.
  return (static_cast<uint32_t>(exponent - min_exp + 1) << f.mant_bits) + r - (1u << f.mant_bits);
}

uint32_t CanonicalNan(const Format& f, bool negative) {
  const uint32_t sign = negative ? f.sign_bit() : 0;
  switch (f.specials) {
    case Specials::kIeee: return sign | f.inf_code() | (1u << (f.mant_bits - 1));  // quiet NaN
    case Specials::kFn: return sign | f.inf_code() | ((1u << f.mant_bits) - 1);
    case Specials::kFnuz: return f.sign_bit();
    case Specials::kNone: return negative ? 0 : f.sign_bit();  // ml_dtypes: NaN -> zero of flipped sign
  }
  return 0;
}

uint32_t EncodeNarrow(double v, const Format& f, bool saturate) {
  const bool negative = std::signbit(v);
  if (std::isnan(v)) return CanonicalNan(f, negative);
  uint32_t magnitude = std::isinf(v) ? f.max_code + 1 : RoundMagnitude(std::fabs(v), f);
  if (magnitude > f.max_code) {
    if (saturate || f.specials == Specials::kNone) {
      magnitude = f.max_code;
    } else if (f.specials == Specials::kIeee) {
      magnitude = f.inf_code();
    } else {
      return CanonicalNan(f, negative);
    }
  }
  if (f.specials == Specials::kFnuz && magnitude == 0) return 0;  // no negative zero
  return (negative ? f.sign_bit() : 0) | magnitude;
}

float DecodeNarrow(uint32_t code, const Format& f) {
  const bool negative = (code & f.sign_bit()) != 0;
  const uint32_t exp = (code >> f.mant_bits) & f.exp_mask();
  const uint32_t mant = code & ((1u << f.mant_bits) - 1);
  const float nan = BitsFloat((negative ? 0x80000000u : 0u) | 0x7fc00000u);
  switch (f.specials) {
    case Specials::kIeee:
      if (exp == f.exp_mask()) return mant ? nan : (negative ? -INFINITY : INFINITY);
      break;
    case Specials::kFn:
      if (exp == f.exp_mask() && mant == (1u << f.mant_bits) - 1) return nan;
      break;
    case Specials::kFnuz:
      if (code == f.sign_bit()) return nan;  // negative NaN, as ml_dtypes decodes it
      break;
    case Specials::kNone:
      break;
  }
  const float value = exp == 0
      ? std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mant_bits)
      : std::ldexp(static_cast<float>(mant | (1u << f.mant_bits)),
                   static_cast<int>(exp) - f.bias - f.mant_bits);
  return negative ? -value : value;
}

// float8e8m0 from the fields of a float32 (exponent field, 23-bit mantissa)
// plus a sticky bit for nonzero bits below the float's mantissa (set when
// the source was a double). Mirrors onnx.numpy_helper.to_float8e8m0, except
// that Inf saturates to the largest value as the Cast specification's table
// says (the numpy helper maps Inf to NaN even when saturating).
uint8_t E8M0FromFloatFields(uint32_t exponent, uint32_t mantissa, bool sticky, bool saturate,
                            E8M0Rounding mode) {
  if (exponent == 0xFF) {
    if (mantissa != 0) return 0xFF;  // NaN
    return saturate ? 0xFE : 0xFF;   // Inf
  }
  bool round_up = false;
  switch (mode) {
    case E8M0Rounding::kUp:
      round_up = mantissa != 0 || sticky;
      break;
    case E8M0Rounding::kDown:
      break;
    case E8M0Rounding::kNearest: {
      const bool guard = (mantissa & 0x400000u) != 0;
      const bool round = (mantissa & 0x200000u) != 0;
      const bool rest = (mantissa & 0x1FFFFFu) != 0 || sticky;
      const bool lsb = exponent > 0;
      round_up = guard && (round || rest || lsb);
      break;
    }
  }
  if (round_up && exponent == 0xFE && saturate) round_up = false;
  return static_cast<uint8_t>(exponent + (round_up ? 1 : 0));  // 0xFE + 1 is NaN
}

}  // namespace

// ---- float16 ---------------------------------------------------------------

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // Inf, NaN keeps its payload
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24 (exact in float).
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    // NaN: keep the top payload bits as numpy does, never turning it into Inf.
    uint16_t payload = static_cast<uint16_t>((abs & 0x7fffffu) >> 13);
    return sign | 0x7c00u | (payload ? payload : 1u);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // at or above 65520: rounds to Inf
  if (abs < 0x38800000u) {
    // Below 2^-14 the result is subnormal or zero: round the value in units of 2^-24.
    return sign | static_cast<uint16_t>(RoundMagnitude(BitsFloat(abs), kHalfFormat));
  }
  // Normal: rebias the exponent (-112 << 23) and round the dropped 13 bits to nearest even.
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;
  return sign | static_cast<uint16_t>(abs >> 13);
}

uint16_t DoubleToHalf(double d) {
  if (std::isnan(d)) {
    uint64_t u = DoubleBits(d);
    uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000u);
    uint16_t payload = static_cast<uint16_t>((u & 0xfffffffffffffull) >> 42);
    return sign | 0x7c00u | (payload ? payload : 1u);
  }
  return static_cast<uint16_t>(EncodeNarrow(d, kHalfFormat, /*saturate=*/false));
}

// ---- bfloat16 --------------------------------------------------------------

float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
  // Round to nearest even on the 16 dropped bits; a carry may reach Inf, as it should.
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint16_t DoubleToBFloat16(double d) {
  return static_cast<uint16_t>(EncodeNarrow(d, kBFloat16Format, /*saturate=*/false));
}

// ---- float8 ----------------------------------------------------------------

float Float8ToFloat(uint8_t bits, DataType type) {
  if (type == DataType::kFloat8E8M0) return Float8E8M0ToFloat(bits);
  const Format* f = Float8Format(type);
  return f ? DecodeNarrow(bits, *f) : std::nanf("");
}

uint8_t DoubleToFloat8(double value, DataType type, bool saturate) {
  if (type == DataType::kFloat8E8M0) return DoubleToFloat8E8M0(value, saturate, E8M0Rounding::kUp);
  const Format* f = Float8Format(type);
  return f ? static_cast<uint8_t>(EncodeNarrow(value, *f, saturate)) : 0;
}

uint8_t FloatToFloat8(float value, DataType type, bool saturate) {
  return DoubleToFloat8(static_cast<double>(value), type, saturate);  // exact widening
}

// ---- float8e8m0 ------------------------------------------------------------

float Float8E8M0ToFloat(uint8_t bits) {
  if (bits == 0xFF) return BitsFloat(0x7fc00000u);
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);  // 2^-127 is a float subnormal: exact
}

uint8_t FloatToFloat8E8M0(float value, bool saturate, E8M0Rounding mode) {
  const uint32_t u = FloatBits(value);
  return E8M0FromFloatFields((u >> 23) & 0xFF, u & 0x7FFFFFu, /*sticky=*/false, saturate, mode);
}

uint8_t DoubleToFloat8E8M0(double value, bool saturate, E8M0Rounding mode) {
  if (std::isnan(value)) return 0xFF;
  const double a = std::fabs(value);
  if (a >= 0x1p128) return E8M0FromFloatFields(0xFF, 0, false, saturate, mode);  // like Inf
  // Truncate to float (toward zero) and remember whether bits were dropped,
  // so the float-based rounding rule sees the double's exact value.
  float t = static_cast<float>(a);
  if (static_cast<double>(t) > a) t = std::nextafter(t, 0.0f);
  const bool sticky = static_cast<double>(t) != a;
  const uint32_t u = FloatBits(t);
  return E8M0FromFloatFields((u >> 23) & 0xFF, u & 0x7FFFFFu, sticky, saturate, mode);
}

// ---- float4e2m1 ------------------------------------------------------------

float Float4E2M1ToFloat(uint8_t nibble) { return DecodeNarrow(nibble & 0x0Fu, kE2M1); }

uint8_t DoubleToFloat4E2M1(double value) {
  return static_cast<uint8_t>(EncodeNarrow(value, kE2M1, /*saturate=*/true));
}

uint8_t FloatToFloat4E2M1(float value) { return DoubleToFloat4E2M1(static_cast<double>(value)); }

// ---- sub-byte packing --------------------------------------------------------

uint8_t GetNibble(const uint8_t* data, int64_t i) {
  uint8_t byte = data[i >> 1];
  return (i & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0f);
}

void SetNibble(uint8_t* data, int64_t i, uint8_t nibble) {
  uint8_t& byte = data[i >> 1];
  if (i & 1) byte = static_cast<uint8_t>((byte & 0x0f) | ((nibble & 0x0f) << 4));
  else byte = static_cast<uint8_t>((byte & 0xf0) | (nibble & 0x0f));
}

int8_t Int4FromNibble(uint8_t nibble) {
  nibble &= 0x0f;
  return static_cast<int8_t>((nibble & 0x8) ? static_cast<int>(nibble) - 16 : nibble);
}

uint8_t GetCrumb(const uint8_t* data, int64_t i) {
  return static_cast<uint8_t>((data[i >> 2] >> (2 * (i & 3))) & 0x3u);
}

void SetCrumb(uint8_t* data, int64_t i, uint8_t crumb) {
  const int shift = static_cast<int>(2 * (i & 3));
  uint8_t& byte = data[i >> 2];
  byte = static_cast<uint8_t>((byte & ~(0x3u << shift)) | ((crumb & 0x3u) << shift));
}

int8_t Int2FromCrumb(uint8_t crumb) {
  crumb &= 0x3;
  return static_cast<int8_t>((crumb & 0x2) ? static_cast<int>(crumb) - 4 : crumb);
}

}  // namespace nee
