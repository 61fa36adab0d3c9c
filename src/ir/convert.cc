#include "ir/convert.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace nee {

namespace {

// ---- How each element type is read and written -----------------------------

enum class Kind { kFloat, kSigned, kUnsigned, kBool, kString, kUnsupported };

Kind KindOf(DataType t) {
  switch (t) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16:
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
      return Kind::kFloat;
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kInt4: case DataType::kInt2:
      return Kind::kSigned;
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
    case DataType::kUint4: case DataType::kUint2:
      return Kind::kUnsigned;
    case DataType::kBool: return Kind::kBool;
    case DataType::kString: return Kind::kString;
    default: return Kind::kUnsupported;
  }
}

// Element i of a floating-point tensor, exactly (every format fits a double).
double ReadFloat(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat: return t.data<float>()[i];
    case DataType::kDouble: return t.data<double>()[i];
    case DataType::kFloat16: return HalfToFloat(t.data<uint16_t>()[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(t.data<uint16_t>()[i]);
    case DataType::kFloat4E2M1: return Float4E2M1ToFloat(GetNibble(t.data<uint8_t>(), i));
    default: return Float8ToFloat(t.data<uint8_t>()[i], t.dtype());  // float8 family, e8m0
  }
}

int64_t ReadSigned(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt8: return t.data<int8_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    case DataType::kInt64: return t.data<int64_t>()[i];
    case DataType::kInt4: return Int4FromNibble(GetNibble(t.data<uint8_t>(), i));
    default: return Int2FromCrumb(GetCrumb(t.data<uint8_t>(), i));  // int2
  }
}

uint64_t ReadUnsigned(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUint8: return t.data<uint8_t>()[i];
    case DataType::kUint16: return t.data<uint16_t>()[i];
    case DataType::kUint32: return t.data<uint32_t>()[i];
    case DataType::kUint64: return t.data<uint64_t>()[i];
    case DataType::kUint4: return GetNibble(t.data<uint8_t>(), i);
    case DataType::kBool: return t.data<bool>()[i] ? 1 : 0;
    default: return GetCrumb(t.data<uint8_t>(), i);  // uint2
  }
}

// Stores the low bits of a two's complement value into an integer or bool
// element ("discard higher bits and reinterpret").
void WriteIntegerBits(Tensor& t, int64_t i, uint64_t bits) {
  switch (t.dtype()) {
    case DataType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(bits); break;
    case DataType::kUint8: t.data<uint8_t>()[i] = static_cast<uint8_t>(bits); break;
    case DataType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(bits); break;
    case DataType::kUint16: t.data<uint16_t>()[i] = static_cast<uint16_t>(bits); break;
    case DataType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(bits); break;
    case DataType::kUint32: t.data<uint32_t>()[i] = static_cast<uint32_t>(bits); break;
    case DataType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(bits); break;
    case DataType::kUint64: t.data<uint64_t>()[i] = bits; break;
    case DataType::kInt4: case DataType::kUint4:
      SetNibble(t.data<uint8_t>(), i, static_cast<uint8_t>(bits & 0xF));
      break;
    case DataType::kInt2: case DataType::kUint2:
      SetCrumb(t.data<uint8_t>(), i, static_cast<uint8_t>(bits & 0x3));
      break;
    default: break;
  }
}

// ---- float -> integer, as numpy's astype does on x86-64 --------------------

// cvttsd2si with a 32-bit result: truncation, and INT32_MIN for NaN and for
// anything that does not fit.
int32_t TruncToInt32(double v) {
  const double t = std::trunc(v);
  if (!(t >= -2147483648.0 && t <= 2147483647.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(t);
}

// cvttsd2si with a 64-bit result.
int64_t TruncToInt64(double v) {
  const double t = std::trunc(v);
  if (!(t >= -0x1p63 && t < 0x1p63)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

// The integer bits numpy stores when casting float `v` to `type`.
uint64_t FloatToIntegerBits(double v, DataType type) {
  switch (type) {
    case DataType::kInt64:
      return static_cast<uint64_t>(TruncToInt64(v));
    case DataType::kUint64:
      // Values from 2^63 up are converted after subtracting 2^63.
      if (v >= 0x1p63) return static_cast<uint64_t>(TruncToInt64(v - 0x1p63)) ^ (uint64_t{1} << 63);
      return static_cast<uint64_t>(TruncToInt64(v));
    case DataType::kUint32:
      if (v >= 0x1p31) return static_cast<uint32_t>(TruncToInt32(v - 0x1p31)) ^ 0x80000000u;
      return static_cast<uint32_t>(TruncToInt32(v));
    default:
      // int32 and everything narrower: the int32 result's low bits.
      return static_cast<uint64_t>(static_cast<int64_t>(TruncToInt32(v)));
  }
}

// ---- integer -> float: one correct rounding --------------------------------

// A double that rounds to the same value as `m` in any format with at most
// 51 significand bits: exact below 2^53, otherwise the bits beyond the
// double's precision are folded into a sticky lowest bit (round to odd).
double RoundToOddDouble(uint64_t m) {
  if (m < (uint64_t{1} << 53)) return static_cast<double>(m);
  const int shift = 64 - std::countl_zero(m) - 53;
  uint64_t kept = m >> shift;
  if (m & ((uint64_t{1} << shift) - 1)) kept |= 1;
  return std::ldexp(static_cast<double>(kept), shift);
}

// ---- Writing a floating-point value into any non-string element -------------

void WriteFloatValue(Tensor& t, int64_t i, double v, const ConvertOptions& o) {
  switch (t.dtype()) {
    case DataType::kFloat: t.data<float>()[i] = static_cast<float>(v); break;
    case DataType::kDouble: t.data<double>()[i] = v; break;
    case DataType::kFloat16: t.data<uint16_t>()[i] = DoubleToHalf(v); break;
    case DataType::kBFloat16: t.data<uint16_t>()[i] = DoubleToBFloat16(v); break;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ:
      t.data<uint8_t>()[i] = DoubleToFloat8(v, t.dtype(), o.saturate);
      break;
    case DataType::kFloat8E8M0:
      t.data<uint8_t>()[i] = DoubleToFloat8E8M0(v, o.saturate, o.e8m0_rounding);
      break;
    case DataType::kFloat4E2M1:
      SetNibble(t.data<uint8_t>(), i, DoubleToFloat4E2M1(v));
      break;
    case DataType::kBool: t.data<bool>()[i] = v != 0; break;  // NaN is true
    default: WriteIntegerBits(t, i, FloatToIntegerBits(v, t.dtype())); break;
  }
}

void WriteSigned(Tensor& t, int64_t i, int64_t v, const ConvertOptions& o) {
  switch (KindOf(t.dtype())) {
    case Kind::kSigned: case Kind::kUnsigned: WriteIntegerBits(t, i, static_cast<uint64_t>(v)); return;
    case Kind::kBool: t.data<bool>()[i] = v != 0; return;
    default: break;
  }
  if (t.dtype() == DataType::kDouble) {
    t.data<double>()[i] = static_cast<double>(v);  // correctly rounded
    return;
  }
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const double d = RoundToOddDouble(magnitude);
  WriteFloatValue(t, i, v < 0 ? -d : d, o);
}

void WriteUnsigned(Tensor& t, int64_t i, uint64_t v, const ConvertOptions& o) {
  switch (KindOf(t.dtype())) {
    case Kind::kSigned: case Kind::kUnsigned: WriteIntegerBits(t, i, v); return;
    case Kind::kBool: t.data<bool>()[i] = v != 0; return;
    default: break;
  }
  if (t.dtype() == DataType::kDouble) {
    t.data<double>()[i] = static_cast<double>(v);
    return;
  }
  WriteFloatValue(t, i, RoundToOddDouble(v), o);
}

// ---- Direct loops between the plain C++ element types ------------------------

// One element with the rules above, for types where they coincide with C++
// conversions except float -> integer (undefined in C++ out of range).
template <typename S, typename D>
D CastPlain(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return static_cast<D>(FloatToIntegerBits(static_cast<double>(v), DataTypeOf<D>::value));
  } else {
    // int -> int wraps (C++20), int/float -> float rounds to nearest even once
    // (x86-64 conversions, including uint64), bool gives 0/1.
    return static_cast<D>(v);
  }
}

template <typename S, typename D>
void PlainLoop(const Tensor& src, Tensor& dst, int64_t begin, int64_t end) {
  const S* in = src.data<S>();
  D* out = dst.data<D>();
  for (int64_t i = begin; i < end; ++i) out[i] = CastPlain<S, D>(in[i]);
}

bool IsPlain(DataType t) {
  switch (t) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kInt8: case DataType::kInt16:
    case DataType::kInt32: case DataType::kInt64: case DataType::kUint8: case DataType::kUint16:
    case DataType::kUint32: case DataType::kUint64: case DataType::kBool:
      return true;
    default:
      return false;
  }
}

template <typename S>
void PlainLoopTo(const Tensor& src, Tensor& dst, int64_t begin, int64_t end) {
  switch (dst.dtype()) {
    case DataType::kFloat: PlainLoop<S, float>(src, dst, begin, end); break;
    case DataType::kDouble: PlainLoop<S, double>(src, dst, begin, end); break;
    case DataType::kInt8: PlainLoop<S, int8_t>(src, dst, begin, end); break;
    case DataType::kInt16: PlainLoop<S, int16_t>(src, dst, begin, end); break;
    case DataType::kInt32: PlainLoop<S, int32_t>(src, dst, begin, end); break;
    case DataType::kInt64: PlainLoop<S, int64_t>(src, dst, begin, end); break;
    case DataType::kUint8: PlainLoop<S, uint8_t>(src, dst, begin, end); break;
    case DataType::kUint16: PlainLoop<S, uint16_t>(src, dst, begin, end); break;
    case DataType::kUint32: PlainLoop<S, uint32_t>(src, dst, begin, end); break;
    case DataType::kUint64: PlainLoop<S, uint64_t>(src, dst, begin, end); break;
    case DataType::kBool: PlainLoop<S, bool>(src, dst, begin, end); break;
    default: break;
  }
}

// Both types must satisfy IsPlain.
void PlainConvert(const Tensor& src, Tensor& dst, int64_t begin, int64_t end) {
  switch (src.dtype()) {
    case DataType::kFloat: PlainLoopTo<float>(src, dst, begin, end); break;
    case DataType::kDouble: PlainLoopTo<double>(src, dst, begin, end); break;
    case DataType::kInt8: PlainLoopTo<int8_t>(src, dst, begin, end); break;
    case DataType::kInt16: PlainLoopTo<int16_t>(src, dst, begin, end); break;
    case DataType::kInt32: PlainLoopTo<int32_t>(src, dst, begin, end); break;
    case DataType::kInt64: PlainLoopTo<int64_t>(src, dst, begin, end); break;
    case DataType::kUint8: PlainLoopTo<uint8_t>(src, dst, begin, end); break;
    case DataType::kUint16: PlainLoopTo<uint16_t>(src, dst, begin, end); break;
    case DataType::kUint32: PlainLoopTo<uint32_t>(src, dst, begin, end); break;
    case DataType::kUint64: PlainLoopTo<uint64_t>(src, dst, begin, end); break;
    case DataType::kBool: PlainLoopTo<bool>(src, dst, begin, end); break;
    default: break;
  }
}

// ---- Numbers to strings, as numpy prints them --------------------------------

// Shortest decimal digits that read back as the same value of `type`, and
// the decimal exponent of the first digit: value = 0.d1d2d3... * 10^(exp+1).
void ShortestDigits(double value, DataType type, std::string* digits, int* exponent) {
  char buf[64];
  std::to_chars_result r;
  if (type == DataType::kDouble) {
    r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  } else if (type == DataType::kFloat16) {
    // No to_chars for float16: the fewest digits (at most 5) that round back.
    // The closest decimal of each length is tried first; where the float16
    // neighbours are unevenly spaced (powers of two) the next decimal up or
    // down may round back when the closest does not, as numpy's Dragon4 finds.
    const uint16_t target = DoubleToHalf(value);
    auto round_trips = [&](double candidate) { return DoubleToHalf(candidate) == target; };
    for (int precision = 0; precision < 17; ++precision) {
      r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific, precision);
      double closest = 0;
      std::from_chars(buf, r.ptr, closest);
      if (round_trips(closest)) break;
      const double step = std::pow(10.0, std::floor(std::log10(closest)) - precision);  // one unit in the last digit
      double best = 0;
      bool found = false;
      for (double candidate : {closest + step, closest - step}) {
        if (round_trips(candidate) && (!found || std::fabs(candidate - value) < std::fabs(best - value))) {
          best = candidate;
          found = true;
        }
      }
      if (found) {
        r = std::to_chars(buf, buf + sizeof(buf), best, std::chars_format::scientific, precision);
        break;
      }
    }
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(value), std::chars_format::scientific);
  }
  // buf holds "d.ddde+XX" or "de-XX".
  std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
  const size_t e = s.find('e');
  digits->clear();
  for (char c : s.substr(0, e))
    if (c != '.') digits->push_back(c);
  while (digits->size() > 1 && digits->back() == '0') digits->pop_back();
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+' ? 1 : 0), s.data() + s.size(), *exponent);
}

// ---- Strings to numbers --------------------------------------------------------

std::string_view Trim(std::string_view s) {
  const char* blanks = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(blanks);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

// The text with a leading '+' removed (from_chars accepts only '-').
std::string_view StripPlus(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') return s.substr(1);
  return s;
}

template <typename T>
bool ParseWhole(std::string_view s, T* value) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *value);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// A floating-point literal, "NaN"/"INF"/"Infinity" in any case included.
// Out-of-range literals give +-Inf or +-0 as strtod would.
template <typename T>
bool ParseFloating(std::string_view s, T* value) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *value, std::chars_format::general);
  if (r.ptr != s.data() + s.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves the value unset: decide between overflow and underflow.
    const bool negative = s[0] == '-';
    const size_t e = s.find_first_of("eE");
    int exp10 = 0;
    if (e != std::string_view::npos) std::from_chars(s.data() + e + 1 + (s[e + 1] == '+'), s.data() + s.size(), exp10);
    const T magnitude = exp10 > 0 ? std::numeric_limits<T>::infinity() : T(0);
    *value = negative ? -magnitude : magnitude;
    return true;
  }
  return r.ec == std::errc();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The stored bits of `v` converted to non-string type `to` (one element).
uint64_t EncodedBits(double v, DataType to, const ConvertOptions& o) {
  uint64_t storage = 0;
  Tensor one = Tensor::View(to, {1}, &storage, nullptr);
  WriteFloatValue(one, 0, v, o);
  return storage;
}

// A decimal literal as significant digits (no leading or trailing zeros) and
// the power of ten of the position before the first digit: 0.DIGITS * 10^exp.
struct Decimal {
  bool negative = false;
  std::string digits;  // empty for zero
  int64_t exp = 0;
};

// Parses [-]ddd[.ddd][e[+-]ddd]; false for anything else (inf, nan, hex).
bool ParseDecimal(std::string_view s, Decimal* out) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) out->negative = s[i++] == '-';
  int64_t point = -1, count = 0;
  std::string raw;
  for (; i < s.size(); ++i) {
    if (s[i] == '.' && point < 0) {
      point = count;
    } else if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      raw.push_back(s[i]);
      ++count;
    } else {
      break;
    }
  }
  if (raw.empty()) return false;
  int64_t exp10 = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool neg = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (i == s.size()) return false;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i)
      if (exp10 < 100000000) exp10 = exp10 * 10 + (s[i] - '0');
    if (neg) exp10 = -exp10;
  }
  if (i != s.size()) return false;
  const int64_t int_digits = point < 0 ? count : point;
  const size_t first = raw.find_first_not_of('0');
  if (first == std::string::npos) {
    out->digits.clear();
    out->exp = 0;
    return true;
  }
  const size_t last = raw.find_last_not_of('0');
  out->digits = raw.substr(first, last - first + 1);
  out->exp = int_digits - static_cast<int64_t>(first) + exp10;
  return true;
}

// Sign of (a - b).
int CompareDecimals(const Decimal& a, const Decimal& b) {
  const int sa = a.digits.empty() ? 0 : (a.negative ? -1 : 1);
  const int sb = b.digits.empty() ? 0 : (b.negative ? -1 : 1);
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  int magnitude = 0;
  if (a.exp != b.exp) {
    magnitude = a.exp < b.exp ? -1 : 1;
  } else {
    const size_t n = std::max(a.digits.size(), b.digits.size());
    for (size_t k = 0; k < n && magnitude == 0; ++k) {
      const char da = k < a.digits.size() ? a.digits[k] : '0';
      const char db = k < b.digits.size() ? b.digits[k] : '0';
      if (da != db) magnitude = da < db ? -1 : 1;
    }
  }
  return sa * magnitude;
}

// Converts the value of a decimal literal to `to` through its nearest double
// `d`, rounded once: where the conversion jumps at d itself (d is a rounding
// midpoint of the target format, an integer for truncation, a power of two
// for float8e8m0), the exact decimal decides which side the value lies on.
double ResolveDoubleRounding(std::string_view text, double d, DataType to, const ConvertOptions& o) {
  if (!std::isfinite(d)) return d;
  const double below = std::nextafter(d, -INFINITY), above = std::nextafter(d, INFINITY);
  if (EncodedBits(below, to, o) == EncodedBits(above, to, o)) return d;
  Decimal exact, nearest;
  if (!ParseDecimal(text, &exact)) return d;
  char buf[1100];  // every double's exact decimal expansion fits in 767 significant digits
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific, 800);
  if (r.ec != std::errc() || !ParseDecimal(std::string_view(buf, static_cast<size_t>(r.ptr - buf)), &nearest))
    return d;
  const int side = CompareDecimals(exact, nearest);
  return side == 0 ? d : side > 0 ? above : below;
}

Status BadString(const std::string& s, int64_t i, DataType to) {
  return InvalidArgument("cannot convert string \"" + s.substr(0, 64) + "\" (element " + std::to_string(i) +
                         ") to " + DataTypeName(to) + ": not a number");
}

Status WriteFromString(Tensor& t, int64_t i, const std::string& text, const ConvertOptions& o) {
  const std::string_view s = StripPlus(Trim(text));
  const DataType to = t.dtype();
  switch (to) {
    case DataType::kString:
      t.data<std::string>()[i] = text;
      return Status::Ok();
    case DataType::kFloat: {
      float f;  // parsed straight to float: one rounding
      if (!ParseFloating(s, &f)) return BadString(text, i, to);
      t.data<float>()[i] = f;
      return Status::Ok();
    }
    case DataType::kBool:
      if (EqualsIgnoreCase(s, "true")) {
        t.data<bool>()[i] = true;
        return Status::Ok();
      }
      if (EqualsIgnoreCase(s, "false")) {
        t.data<bool>()[i] = false;
        return Status::Ok();
      }
      break;
    default:
      break;
  }
  const Kind kind = KindOf(to);
  if (kind == Kind::kSigned || kind == Kind::kUnsigned) {
    // Integer literals exactly, without going through a double.
    int64_t sv;
    if (ParseWhole(s, &sv)) {
      WriteSigned(t, i, sv, o);
      return Status::Ok();
    }
    uint64_t uv;
    if (ParseWhole(s, &uv)) {
      WriteUnsigned(t, i, uv, o);
      return Status::Ok();
    }
  }
  double d;
  if (!ParseFloating(s, &d)) return BadString(text, i, to);
  if (to != DataType::kDouble) d = ResolveDoubleRounding(s, d, to, o);
  WriteFloatValue(t, i, d, o);
  return Status::Ok();
}

std::string IntegerString(Kind kind, const Tensor& t, int64_t i) {
  if (kind == Kind::kSigned) return std::to_string(ReadSigned(t, i));
  if (kind == Kind::kBool) return t.data<bool>()[i] ? "True" : "False";
  return std::to_string(ReadUnsigned(t, i));
}

}  // namespace

// ---- Public entry points -------------------------------------------------------

std::string FormatFloatLikeNumpy(double value, DataType type) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  const std::string sign = std::signbit(value) ? "-" : "";
  if (value == 0) return sign + "0.0";
  // numpy prints positionally from 1e-4 up to a cutoff that depends on the
  // type (1e3 for float16, 1e16 for float64, 1e6 for float32 in astype(str)).
  const double cutoff = type == DataType::kDouble ? 1e16 : type == DataType::kFloat16 ? 1e3 : 1e6;
  std::string digits;
  int exp10 = 0;
  ShortestDigits(std::fabs(value), type, &digits, &exp10);
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e-4 && magnitude < cutoff) {
    std::string out = sign;
    const int n = static_cast<int>(digits.size());
    if (exp10 < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (exp10 + 1 >= n) {
      out += digits + std::string(static_cast<size_t>(exp10 + 1 - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." + digits.substr(static_cast<size_t>(exp10 + 1));
    }
    return out;
  }
  // Scientific: "d.ddde+XX" with at least two exponent digits.
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int abs_exp = exp10 < 0 ? -exp10 : exp10;
  out += exp10 < 0 ? "e-" : "e+";
  if (abs_exp < 10) out += "0";
  out += std::to_string(abs_exp);
  return out;
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (KindOf(t.dtype())) {
    case Kind::kFloat: return ReadFloat(t, i);
    case Kind::kSigned: return static_cast<double>(ReadSigned(t, i));
    case Kind::kUnsigned: case Kind::kBool: return static_cast<double>(ReadUnsigned(t, i));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void StoreDoubleElement(Tensor& t, int64_t i, double v, const ConvertOptions& options) {
  const Kind kind = KindOf(t.dtype());
  if (kind == Kind::kString || kind == Kind::kUnsupported) return;
  WriteFloatValue(t, i, v, options);
}

bool ParseE8M0Rounding(const std::string& name, E8M0Rounding* mode) {
  if (name == "up") *mode = E8M0Rounding::kUp;
  else if (name == "down") *mode = E8M0Rounding::kDown;
  else if (name == "nearest") *mode = E8M0Rounding::kNearest;
  else return false;
  return true;
}

bool CanConvert(DataType from, DataType to) {
  return KindOf(from) != Kind::kUnsupported && KindOf(to) != Kind::kUnsupported;
}

Status ConvertElements(const Tensor& src, Tensor& dst, int64_t begin, int64_t end,
                       const ConvertOptions& o) {
  const DataType from = src.dtype(), to = dst.dtype();
  if (!CanConvert(from, to))
    return NotImplemented(std::string("conversion from ") + DataTypeName(from) + " to " + DataTypeName(to) +
                          " is not supported");
  if (src.num_elements() != dst.num_elements())
    return InvalidArgument("conversion needs equal element counts, got " + src.Describe() + " and " +
                           dst.Describe());
  if (begin < 0 || end > src.num_elements() || begin > end)
    return InvalidArgument("element range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") is outside " + src.Describe());

  if (begin == end) return Status::Ok();

  // Common pairs with a direct loop.
  if (from == to && from != DataType::kString && !IsSubByte(from)) {
    const size_t bytes = static_cast<size_t>(ElementBits(from) / 8);
    std::memcpy(static_cast<uint8_t*>(dst.raw_data()) + begin * bytes,
                static_cast<const uint8_t*>(src.raw_data()) + begin * bytes,
                static_cast<size_t>(end - begin) * bytes);
    return Status::Ok();
  }
  if (IsPlain(from) && IsPlain(to)) {
    PlainConvert(src, dst, begin, end);
    return Status::Ok();
  }
  if (from == DataType::kFloat && to == DataType::kFloat16) {
    for (int64_t i = begin; i < end; ++i) dst.data<uint16_t>()[i] = FloatToHalf(src.data<float>()[i]);
    return Status::Ok();
  }
  if (from == DataType::kFloat && to == DataType::kBFloat16) {
    for (int64_t i = begin; i < end; ++i) dst.data<uint16_t>()[i] = FloatToBFloat16(src.data<float>()[i]);
    return Status::Ok();
  }
  if (from == DataType::kFloat && ElementBits(to) == 8 && KindOf(to) == Kind::kFloat) {
    const float* in = src.data<float>();
    uint8_t* out = dst.data<uint8_t>();
    if (to == DataType::kFloat8E8M0) {
      for (int64_t i = begin; i < end; ++i) out[i] = FloatToFloat8E8M0(in[i], o.saturate, o.e8m0_rounding);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = FloatToFloat8(in[i], to, o.saturate);
    }
    return Status::Ok();
  }
  if (to == DataType::kFloat && ElementBits(from) == 8 && KindOf(from) == Kind::kFloat) {
    // float8 family: decode through a table of all 256 codes.
    float table[256];
    for (int code = 0; code < 256; ++code) table[code] = Float8ToFloat(static_cast<uint8_t>(code), from);
    for (int64_t i = begin; i < end; ++i) dst.data<float>()[i] = table[src.data<uint8_t>()[i]];
    return Status::Ok();
  }
  if (to == DataType::kFloat && from == DataType::kFloat16) {
    for (int64_t i = begin; i < end; ++i) dst.data<float>()[i] = HalfToFloat(src.data<uint16_t>()[i]);
    return Status::Ok();
  }
  if (to == DataType::kFloat && from == DataType::kBFloat16) {
    for (int64_t i = begin; i < end; ++i) dst.data<float>()[i] = BFloat16ToFloat(src.data<uint16_t>()[i]);
    return Status::Ok();
  }

  switch (KindOf(from)) {
    case Kind::kFloat:
      if (to == DataType::kString) {
        // Types numpy cannot print are printed as the float32 they widen to.
        const DataType style =
            (from == DataType::kDouble || from == DataType::kFloat16) ? from : DataType::kFloat;
        for (int64_t i = begin; i < end; ++i)
          dst.data<std::string>()[i] = FormatFloatLikeNumpy(ReadFloat(src, i), style);
      } else {
        for (int64_t i = begin; i < end; ++i) WriteFloatValue(dst, i, ReadFloat(src, i), o);
      }
      return Status::Ok();
    case Kind::kSigned:
      if (to == DataType::kString) {
        for (int64_t i = begin; i < end; ++i) dst.data<std::string>()[i] = IntegerString(Kind::kSigned, src, i);
      } else {
        for (int64_t i = begin; i < end; ++i) WriteSigned(dst, i, ReadSigned(src, i), o);
      }
      return Status::Ok();
    case Kind::kUnsigned:
    case Kind::kBool:
      if (to == DataType::kString) {
        for (int64_t i = begin; i < end; ++i) dst.data<std::string>()[i] = IntegerString(KindOf(from), src, i);
      } else {
        for (int64_t i = begin; i < end; ++i) WriteUnsigned(dst, i, ReadUnsigned(src, i), o);
      }
      return Status::Ok();
    case Kind::kString:
      for (int64_t i = begin; i < end; ++i) NEE_RETURN_IF_ERROR(WriteFromString(dst, i, src.data<std::string>()[i], o));
      return Status::Ok();
    case Kind::kUnsupported:
      break;
  }
  return NotImplemented(std::string("conversion from ") + DataTypeName(from) + " is not supported");
}

Status ConvertTensor(const Tensor& src, Tensor& dst, const ConvertOptions& options) {
  return ConvertElements(src, dst, 0, src.num_elements(), options);
}

Status ConvertTensor(const Tensor& src, Tensor& dst, bool saturate) {
  ConvertOptions options;
  options.saturate = saturate;
  return ConvertTensor(src, dst, options);
}

}  // namespace nee
