// Bit-exact checks of the narrow float formats against tables produced by
// numpy, ml_dtypes and onnx.numpy_helper (tests/unit/ir/make_float_tables.py,
// which documents the layout of every file in tests/unit/ir/data/).
#include "ir/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../paths_util.h"

namespace nee {
namespace {

std::vector<uint8_t> ReadData(const std::string& name) {
  std::string path = std::string(NEE_TEST_DATA_DIR) + "/unit/ir/data/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

template <typename T>
T Load(const std::vector<uint8_t>& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));  // the tables are little-endian, as is every target
  return v;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const DataType kFloat8Types[] = {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ,
                                 DataType::kFloat8E5M2, DataType::kFloat8E5M2FNUZ};

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

// ---- Decoding: every code --------------------------------------------------

TEST(FloatFormatsTest, DecodeEveryFloat8AndFloat4Code) {
  std::vector<uint8_t> t = ReadData("decode_narrow.bin");
  ASSERT_EQ(t.size(), (5 * 256 + 16) * 4u);
  for (int k = 0; k < 4; ++k) {
    for (int code = 0; code < 256; ++code) {
      uint32_t expected = Load<uint32_t>(t, (k * 256 + code) * 4);
      uint32_t actual = Bits(Float8ToFloat(static_cast<uint8_t>(code), kFloat8Types[k]));
      EXPECT_EQ(actual, expected) << DataTypeName(kFloat8Types[k]) << " code " << Hex(code);
    }
  }
  for (int code = 0; code < 256; ++code) {
    uint32_t expected = Load<uint32_t>(t, (4 * 256 + code) * 4);
    EXPECT_EQ(Bits(Float8E8M0ToFloat(static_cast<uint8_t>(code))), expected) << "e8m0 code " << code;
    EXPECT_EQ(Bits(Float8ToFloat(static_cast<uint8_t>(code), DataType::kFloat8E8M0)), expected);
  }
  for (int code = 0; code < 16; ++code) {
    uint32_t expected = Load<uint32_t>(t, (5 * 256 + code) * 4);
    EXPECT_EQ(Bits(Float4E2M1ToFloat(static_cast<uint8_t>(code))), expected) << "float4 code " << code;
  }
}

TEST(FloatFormatsTest, DecodeEveryHalfAndBFloat16Code) {
  std::vector<uint8_t> half = ReadData("half_to_float.bin");
  std::vector<uint8_t> bf = ReadData("bf16_to_float.bin");
  ASSERT_EQ(half.size(), 65536 * 4u);
  ASSERT_EQ(bf.size(), 65536 * 4u);
  int half_mismatches = 0, bf_mismatches = 0;
  for (uint32_t code = 0; code < 65536; ++code) {
    uint16_t c = static_cast<uint16_t>(code);
    if (Bits(HalfToFloat(c)) != Load<uint32_t>(half, code * 4) && ++half_mismatches < 10)
      ADD_FAILURE() << "half " << Hex(code) << ": " << Hex(Bits(HalfToFloat(c)));
    if (Bits(BFloat16ToFloat(c)) != Load<uint32_t>(bf, code * 4) && ++bf_mismatches < 10)
      ADD_FAILURE() << "bfloat16 " << Hex(code);
  }
  EXPECT_EQ(half_mismatches, 0);
  EXPECT_EQ(bf_mismatches, 0);
}

// ---- Encoding: every float16 code to every narrow format ---------------------

TEST(FloatFormatsTest, EveryHalfCodeToNarrowFormats) {
  std::vector<uint8_t> t = ReadData("half_to_narrow.bin");
  ASSERT_EQ(t.size(), 65536u * (9 + 2));
  int mismatches = 0;
  auto check = [&](uint32_t actual, uint32_t expected, const std::string& what, uint32_t code) {
    if (actual != expected && ++mismatches < 20)
      ADD_FAILURE() << what << " from half " << Hex(code) << ": got " << Hex(actual) << ", want "
                    << Hex(expected);
  };
  for (uint32_t code = 0; code < 65536; ++code) {
    const float x = HalfToFloat(static_cast<uint16_t>(code));
    for (int k = 0; k < 4; ++k) {
      for (int s = 0; s < 2; ++s) {
        const bool saturate = s == 0;
        uint8_t expected = t[(k * 2 + s) * 65536 + code];
        check(FloatToFloat8(x, kFloat8Types[k], saturate), expected,
              std::string(DataTypeName(kFloat8Types[k])) + (saturate ? " sat" : " nosat"), code);
        check(DoubleToFloat8(x, kFloat8Types[k], saturate), expected, "double path", code);
      }
    }
    check(FloatToFloat4E2M1(x), t[8 * 65536 + code], "float4e2m1", code);
    check(DoubleToFloat4E2M1(x), t[8 * 65536 + code], "float4e2m1 double path", code);
    uint16_t bf = Load<uint16_t>(t, 9 * 65536 + code * 2);
    check(FloatToBFloat16(x), bf, "bfloat16", code);
    // Half -> float -> half is the identity (NaN payloads included).
    check(FloatToHalf(x), code, "half round trip", code);
    // Widening a signaling NaN to double quiets it, so the double path keeps
    // the payload but sets the quiet bit.
    const uint32_t quieted = std::isnan(x) ? (code | 0x200u) : code;
    check(DoubleToHalf(x), quieted, "half round trip (double)", code);
  }
  EXPECT_EQ(mismatches, 0);
}

// ---- Encoding: ties, subnormals, overflow, NaN payloads, random floats ------

TEST(FloatFormatsTest, FloatsToNarrowFormats) {
  std::vector<uint8_t> t = ReadData("floats_to_narrow.bin");
  ASSERT_GE(t.size(), 4u);
  const size_t n = Load<uint32_t>(t, 0);
  ASSERT_EQ(t.size(), 4 + n * (4 + 2 + 2 + 8 + 1 + 6));
  ASSERT_GT(n, 10000u);
  const size_t in_at = 4, half_at = in_at + 4 * n, bf_at = half_at + 2 * n, f8_at = bf_at + 2 * n;
  const size_t f4_at = f8_at + 8 * n, e8m0_at = f4_at + n;
  const E8M0Rounding modes[] = {E8M0Rounding::kUp, E8M0Rounding::kDown, E8M0Rounding::kNearest};
  int mismatches = 0;
  auto check = [&](uint32_t actual, uint32_t expected, const std::string& what, float x) {
    if (actual != expected && ++mismatches < 20)
      ADD_FAILURE() << what << " from " << x << " (" << Hex(Bits(x)) << "): got " << Hex(actual)
                    << ", want " << Hex(expected);
  };
  for (size_t i = 0; i < n; ++i) {
    const float x = FromBits(Load<uint32_t>(t, in_at + 4 * i));
    check(FloatToHalf(x), Load<uint16_t>(t, half_at + 2 * i), "float16", x);
    check(FloatToBFloat16(x), Load<uint16_t>(t, bf_at + 2 * i), "bfloat16", x);
    // The double entry points must agree with the float ones on float inputs.
    // (Not for NaN: widening a signaling NaN to double already changes its payload.)
    if (!std::isnan(x)) check(DoubleToHalf(x), Load<uint16_t>(t, half_at + 2 * i), "float16 (double)", x);
    check(DoubleToBFloat16(x), Load<uint16_t>(t, bf_at + 2 * i), "bfloat16 (double)", x);
    for (int k = 0; k < 4; ++k) {
      for (int s = 0; s < 2; ++s) {
        const bool saturate = s == 0;
        check(FloatToFloat8(x, kFloat8Types[k], saturate), t[f8_at + (k * 2 + s) * n + i],
              std::string(DataTypeName(kFloat8Types[k])) + (saturate ? " sat" : " nosat"), x);
      }
    }
    check(FloatToFloat4E2M1(x), t[f4_at + i], "float4e2m1", x);
    for (int m = 0; m < 3; ++m) {
      for (int s = 0; s < 2; ++s) {
        const bool saturate = s == 0;
        uint8_t expected = t[e8m0_at + (m * 2 + s) * n + i];
        // The ONNX Cast table maps Inf to E8M0_MAX when saturating;
        // onnx.numpy_helper.to_float8e8m0 returns NaN there. nee follows the table.
        if (std::isinf(x) && saturate) expected = 0xFE;
        const std::string what = "e8m0 mode " + std::to_string(m) + (saturate ? " sat" : " nosat");
        check(FloatToFloat8E8M0(x, saturate, modes[m]), expected, what, x);
        check(DoubleToFloat8E8M0(x, saturate, modes[m]), expected, what + " (double)", x);
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The fast float paths and the generic correctly rounded double paths agree
// on a strided sweep over all 2^32 float bit patterns.
TEST(FloatFormatsTest, FastFloatPathsMatchGenericDoublePaths) {
  int mismatches = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 9973) {
    const float x = FromBits(static_cast<uint32_t>(u));
    if (std::isnan(x)) continue;  // widening a signaling NaN to double changes its payload
    if (FloatToHalf(x) != DoubleToHalf(x) && ++mismatches < 10) ADD_FAILURE() << "half " << Hex(u);
    if (FloatToBFloat16(x) != DoubleToBFloat16(x) && ++mismatches < 10) ADD_FAILURE() << "bfloat16 " << Hex(u);
  }
  EXPECT_EQ(mismatches, 0);
}

// ---- Doubles: rounded once, not through float --------------------------------

TEST(FloatFormatsTest, DoublesAreRoundedOnce) {
  // 1 + 2^-8 + 2^-40 lies just above the bfloat16 tie between 1 and 1 + 2^-7,
  // so it rounds up; through float (which drops 2^-40) it would round to 1.
  // (ml_dtypes' float64 -> bfloat16 cast goes through float32 and gives 1.)
  EXPECT_EQ(DoubleToBFloat16(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);
  EXPECT_EQ(DoubleToBFloat16(1.0 + 0x1p-8), 0x3F80);  // exact tie: to even
  // float8e4m3fn: 1 + 2^-4 is the tie between 1 (0x38) and 1.125 (0x39).
  EXPECT_EQ(DoubleToFloat8(1.0 + 0x1p-4 + 0x1p-40, DataType::kFloat8E4M3FN, true), 0x39);
  EXPECT_EQ(DoubleToFloat8(1.0 + 0x1p-4, DataType::kFloat8E4M3FN, true), 0x38);
  // float16: 1 + 2^-11 is the tie between 1 (0x3C00) and 1 + 2^-10 (0x3C01).
  EXPECT_EQ(DoubleToHalf(1.0 + 0x1p-11 + 0x1p-50), 0x3C01);
  EXPECT_EQ(DoubleToHalf(1.0 + 0x1p-11), 0x3C00);
  // Beyond float range: Inf for float16/bfloat16, saturation for float8.
  EXPECT_EQ(DoubleToHalf(1e300), 0x7C00);
  EXPECT_EQ(DoubleToBFloat16(-1e300), 0xFF80);
  EXPECT_EQ(DoubleToFloat8(1e300, DataType::kFloat8E4M3FN, true), 0x7E);
  EXPECT_EQ(DoubleToFloat8(-1e300, DataType::kFloat8E5M2, false), 0xFC);
  // Below half the smallest subnormal: zero with its sign.
  EXPECT_EQ(DoubleToHalf(-1e-300), 0x8000);
  EXPECT_EQ(DoubleToFloat8(-1e-300, DataType::kFloat8E4M3FNUZ, true), 0x00);
  // float8e8m0 sees the bits a float would drop: 1 + 2^-40 rounds up to 2.
  EXPECT_EQ(DoubleToFloat8E8M0(1.0 + 0x1p-40, true, E8M0Rounding::kUp), 128);
  EXPECT_EQ(DoubleToFloat8E8M0(1.0 + 0x1p-40, true, E8M0Rounding::kDown), 127);
  EXPECT_EQ(DoubleToFloat8E8M0(0x1p200, true, E8M0Rounding::kUp), 0xFE);
  EXPECT_EQ(DoubleToFloat8E8M0(0x1p200, false, E8M0Rounding::kUp), 0xFF);
}

// ---- Sub-byte packing --------------------------------------------------------

TEST(FloatFormatsTest, NibblesAndCrumbs) {
  uint8_t buf[3] = {0, 0, 0};
  SetNibble(buf, 0, 0x3);
  SetNibble(buf, 1, 0xA);
  SetNibble(buf, 2, 0x1F);  // only the low 4 bits are stored
  EXPECT_EQ(buf[0], 0xA3);
  EXPECT_EQ(buf[1], 0x0F);
  EXPECT_EQ(GetNibble(buf, 1), 0xA);
  EXPECT_EQ(Int4FromNibble(0xA), -6);
  EXPECT_EQ(Int4FromNibble(0x7), 7);
  EXPECT_EQ(Int4FromNibble(0x8), -8);

  uint8_t crumbs[2] = {0xFF, 0};
  // onnx.numpy_helper._pack_2bitx4([1, -2, 0, -1] as int2) == [0xC9]
  SetCrumb(crumbs, 0, 1);
  SetCrumb(crumbs, 1, 0x2);
  SetCrumb(crumbs, 2, 0);
  SetCrumb(crumbs, 3, 0x3);
  EXPECT_EQ(crumbs[0], 0xC9);
  SetCrumb(crumbs, 5, 0x6);  // only the low 2 bits are stored
  EXPECT_EQ(crumbs[1], 0x08);
  EXPECT_EQ(GetCrumb(crumbs, 3), 3);
  EXPECT_EQ(Int2FromCrumb(3), -1);
  EXPECT_EQ(Int2FromCrumb(2), -2);
  EXPECT_EQ(Int2FromCrumb(1), 1);
}

}  // namespace
}  // namespace nee
