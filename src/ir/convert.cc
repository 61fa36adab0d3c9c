#include "ir/convert.h"

#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

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
    const uint16_t target = DoubleToHalf(value);
    for (int precision = 0; precision < 17; ++precision) {
      r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific, precision);
      double back = 0;
      std::from_chars(buf, r.ptr, back);
      if (DoubleToHalf(back) == target) break;
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
  ShortestDigits(value, type, &digits, &exp10);
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

  // Common pairs with a direct loop.
  if (from == to && from != DataType::kString && !IsSubByte(from)) {
    const size_t bytes = static_cast<size_t>(ElementBits(from) / 8);
    std::memcpy(static_cast<uint8_t*>(dst.raw_data()) + begin * bytes,
                static_cast<const uint8_t*>(src.raw_data()) + begin * bytes,
                static_cast<size_t>(end - begin) * bytes);
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
  if (to == DataType::kFloat && (from == DataType::kFloat16 || from == DataType::kBFloat16)) {
    const bool half = from == DataType::kFloat16;
    for (int64_t i = begin; i < end; ++i) {
      const uint16_t b = src.data<uint16_t>()[i];
      dst.data<float>()[i] = half ? HalfToFloat(b) : BFloat16ToFloat(b);
    }
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
