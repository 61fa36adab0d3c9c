// ConvertTensor against numpy (x86-64) / ml_dtypes. Every expected value was
// computed with /work/main/.venv/bin/python (numpy 2.4, ml_dtypes 0.6) as
// `np.array(inputs, <source dtype>).astype(<target dtype>)`, or
// `.astype(np.str_)` for strings, unless a comment says otherwise.
#include "ir/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../paths_util.h"

namespace nee {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Float inputs including NaN, Inf, out-of-range and truncation cases.
const std::vector<double> kFloatInputs = {
    kNan, kInf, -kInf, 300.7, -300.7, 3000000000.0, -3000000000.0, 1e+19, -1e+19, 1e+20,
    9.223372036854776e+18, 1.8446744073709552e+19, -1.5, 255.9, 127.5, -128.9, 65535.5,
    4294967295.0, 2147483648.0, 0.0, -0.0, 0.99, -0.99, 1e-30};

Tensor Convert(const Tensor& src, DataType to, ConvertOptions options = {}) {
  Tensor dst = Tensor::Allocate(to, src.dims()).value();
  Status s = ConvertTensor(src, dst, options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dst;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Element i of an integer tensor of any width (packed ones included), as int64.
std::vector<int64_t> AsInt64(const Tensor& t) {
  Tensor wide = Convert(t, DataType::kInt64);
  return Values<int64_t>(wide);
}

TEST(ConvertTest, Float64ToIntegersLikeNumpyOnX86) {
  Tensor src = Tensor::FromVector<double>(kFloatInputs, {static_cast<int64_t>(kFloatInputs.size())});
  EXPECT_EQ(Values<int8_t>(Convert(src, DataType::kInt8)),
            (std::vector<int8_t>{0, 0, 0, 44, -44, 0, 0, 0, 0, 0, 0, 0, -1, -1, 127, -128, -1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Convert(src, DataType::kUint8)),
            (std::vector<uint8_t>{0, 0, 0, 44, 212, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 128, 255, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<int16_t>(Convert(src, DataType::kInt16)),
            (std::vector<int16_t>{0, 0, 0, 300, -300, 0, 0, 0, 0, 0, 0, 0, -1, 255, 127, -128, -1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint16_t>(Convert(src, DataType::kUint16)),
            (std::vector<uint16_t>{0, 0, 0, 300, 65236, 0, 0, 0, 0, 0, 0, 0, 65535, 255, 127, 65408, 65535, 0, 0, 0,
                                   0, 0, 0, 0}));
  const int32_t kMin32 = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(Values<int32_t>(Convert(src, DataType::kInt32)),
            (std::vector<int32_t>{kMin32, kMin32, kMin32, 300, -300, kMin32, kMin32, kMin32, kMin32, kMin32, kMin32,
                                  kMin32, -1, 255, 127, -128, 65535, kMin32, kMin32, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint32_t>(Convert(src, DataType::kUint32)),
            (std::vector<uint32_t>{2147483648u, 0, 2147483648u, 300, 4294966996u, 3000000000u, 2147483648u, 0,
                                   2147483648u, 0, 0, 0, 4294967295u, 255, 127, 4294967168u, 65535, 4294967295u,
                                   2147483648u, 0, 0, 0, 0, 0}));
  const int64_t kMin64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Values<int64_t>(Convert(src, DataType::kInt64)),
            (std::vector<int64_t>{kMin64, kMin64, kMin64, 300, -300, 3000000000, -3000000000, kMin64, kMin64, kMin64,
                                  kMin64, kMin64, -1, 255, 127, -128, 65535, 4294967295, 2147483648, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint64_t>(Convert(src, DataType::kUint64)),
            (std::vector<uint64_t>{9223372036854775808u, 0u, 9223372036854775808u, 300u, 18446744073709551316u,
                                   3000000000u, 18446744070709551616u, 10000000000000000000u, 9223372036854775808u,
                                   0u, 9223372036854775808u, 0u, 18446744073709551615u, 255u, 127u,
                                   18446744073709551488u, 65535u, 4294967295u, 2147483648u, 0u, 0u, 0u, 0u, 0u}));
  EXPECT_EQ(Values<bool>(Convert(src, DataType::kBool)),
            (std::vector<bool>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1}));
}

TEST(ConvertTest, Float32ToWideAndPackedIntegers) {
  std::vector<float> in(kFloatInputs.begin(), kFloatInputs.end());
  Tensor src = Tensor::FromVector<float>(in, {static_cast<int64_t>(in.size())});
  EXPECT_EQ(Values<uint32_t>(Convert(src, DataType::kUint32)),
            (std::vector<uint32_t>{2147483648u, 0, 2147483648u, 300, 4294966996u, 3000000000u, 2147483648u, 0,
                                   2147483648u, 0, 0, 0, 4294967295u, 255, 127, 4294967168u, 65535, 0, 2147483648u,
                                   0, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint64_t>(Convert(src, DataType::kUint64)),
            (std::vector<uint64_t>{9223372036854775808u, 0u, 9223372036854775808u, 300u, 18446744073709551316u,
                                   3000000000u, 18446744070709551616u, 9999999980506447872u, 9223372036854775808u,
                                   0u, 9223372036854775808u, 0u, 18446744073709551615u, 255u, 127u,
                                   18446744073709551488u, 65535u, 4294967296u, 2147483648u, 0u, 0u, 0u, 0u, 0u}));
  // ml_dtypes int4/uint4/int2/uint2.
  EXPECT_EQ(AsInt64(Convert(src, DataType::kInt4)),
            (std::vector<int64_t>{0, 0, 0, -4, 4, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0, -1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kUint4)),
            (std::vector<int64_t>{0, 0, 0, 12, 4, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 0, 15, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kInt2)),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0, -1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kUint2)),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 0, 3, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(ConvertTest, IntegersWrapAndRoundOnce) {
  const std::vector<int64_t> in = {200, -200, 70000, -1, 1099511627781, -1099511627779, INT64_MAX, INT64_MIN,
                                   127, -128, 7, -9, 15, 16};
  Tensor src = Tensor::FromVector<int64_t>(in, {static_cast<int64_t>(in.size())});
  EXPECT_EQ(Values<int8_t>(Convert(src, DataType::kInt8)),
            (std::vector<int8_t>{-56, 56, 112, -1, 5, -3, -1, 0, 127, -128, 7, -9, 15, 16}));
  EXPECT_EQ(Values<uint16_t>(Convert(src, DataType::kUint16)),
            (std::vector<uint16_t>{200, 65336, 4464, 65535, 5, 65533, 65535, 0, 127, 65408, 7, 65527, 15, 16}));
  EXPECT_EQ(Values<uint32_t>(Convert(src, DataType::kUint32)),
            (std::vector<uint32_t>{200, 4294967096u, 70000, 4294967295u, 5, 4294967293u, 4294967295u, 0, 127,
                                   4294967168u, 7, 4294967287u, 15, 16}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kInt4)),
            (std::vector<int64_t>{-8, -8, 0, -1, 5, -3, -1, 0, -1, 0, 7, 7, -1, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kUint4)),
            (std::vector<int64_t>{8, 8, 0, 15, 5, 13, 15, 0, 15, 0, 7, 7, 15, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kInt2)),
            (std::vector<int64_t>{0, 0, 0, -1, 1, 1, -1, 0, -1, 0, -1, -1, -1, 0}));
  EXPECT_EQ(AsInt64(Convert(src, DataType::kUint2)),
            (std::vector<int64_t>{0, 0, 0, 3, 1, 1, 3, 0, 3, 0, 3, 3, 3, 0}));
  EXPECT_EQ(Values<float>(Convert(src, DataType::kFloat)),
            (std::vector<float>{200.0f, -200.0f, 70000.0f, -1.0f, 1099511627776.0f, -1099511627776.0f,
                                9.223372036854776e+18f, -9.223372036854776e+18f, 127, -128, 7, -9, 15, 16}));
  EXPECT_EQ(Values<double>(Convert(src, DataType::kDouble)),
            (std::vector<double>{200, -200, 70000, -1, 1099511627781.0, -1099511627779.0, 9.223372036854776e+18,
                                 -9.223372036854776e+18, 127, -128, 7, -9, 15, 16}));
  // numpy: float16 bits of [200, -200, inf, -1, inf, -inf, inf, -inf, 127, -128, 7, -9, 15, 16].
  EXPECT_EQ(Values<uint16_t>(Convert(src, DataType::kFloat16)),
            (std::vector<uint16_t>{0x5A40, 0xDA40, 0x7C00, 0xBC00, 0x7C00, 0xFC00, 0x7C00, 0xFC00, 0x57F0, 0xD800,
                                   0x4700, 0xC880, 0x4B80, 0x4C00}));
  // ml_dtypes bfloat16 (through float32, which is exact or single-rounding for these).
  EXPECT_EQ(Values<uint16_t>(Convert(src, DataType::kBFloat16)),
            (std::vector<uint16_t>{0x4348, 0xc348, 0x4789, 0xbf80, 0x5380, 0xd380, 0x5f00, 0xdf00, 0x42fe, 0xc300,
                                   0x40e0, 0xc110, 0x4170, 0x4180}));
}

TEST(ConvertTest, LargeIntegersAreRoundedOnceToNarrowFloats) {
  // 2^31 + 2^23 + 1 lies just above the bfloat16 tie between 2^31 and
  // 2^31 + 2^24: correctly rounded it goes up (0x4F01). Through float32 it
  // would first become the tie and then round to even, 2^31 (0x4F00), which is
  // what ml_dtypes gives; nee rounds once.
  Tensor src = Tensor::FromVector<int64_t>({(int64_t{1} << 31) + (1 << 23) + 1}, {1});
  EXPECT_EQ(Convert(src, DataType::kBFloat16).data<uint16_t>()[0], 0x4F01);
  // uint64 values: numpy astype(float32) / astype(float64).
  Tensor u = Tensor::FromVector<uint64_t>({UINT64_MAX, uint64_t{1} << 63, (uint64_t{1} << 53) + 1, (1u << 24) + 1, 0},
                                          {5});
  EXPECT_EQ(Values<float>(Convert(u, DataType::kFloat)),
            (std::vector<float>{1.8446744073709552e+19f, 9.223372036854776e+18f, 9007199254740992.0f, 16777216.0f, 0}));
  EXPECT_EQ(Values<double>(Convert(u, DataType::kDouble)),
            (std::vector<double>{1.8446744073709552e+19, 9.223372036854776e+18, 9007199254740992.0, 16777217.0, 0}));
  EXPECT_EQ(Values<int64_t>(Convert(u, DataType::kInt64)),
            (std::vector<int64_t>{-1, INT64_MIN, 9007199254740993, 16777217, 0}));
}

TEST(ConvertTest, BoolConversions) {
  Tensor b = Tensor::FromVector<bool>({true, false, true}, {3});
  EXPECT_EQ(Values<float>(Convert(b, DataType::kFloat)), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(Values<int64_t>(Convert(b, DataType::kInt64)), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(Values<uint16_t>(Convert(b, DataType::kFloat16)), (std::vector<uint16_t>{0x3C00, 0, 0x3C00}));
  EXPECT_EQ(Values<std::string>(Convert(b, DataType::kString)), (std::vector<std::string>{"True", "False", "True"}));
  Tensor i = Tensor::FromVector<int32_t>({0, 256, -1}, {3});
  EXPECT_EQ(Values<bool>(Convert(i, DataType::kBool)), (std::vector<bool>{false, true, true}));
}

TEST(ConvertTest, Float8SaturationFollowsAttribute) {
  // onnx.numpy_helper.saturate_cast / ml_dtypes astype of [1000000, -inf, 1e-7, nan].
  Tensor src = Tensor::FromVector<float>({1e6f, -INFINITY, 1e-7f, NAN}, {4});
  EXPECT_EQ(Values<uint8_t>(Convert(src, DataType::kFloat8E4M3FN)), (std::vector<uint8_t>{0x7E, 0xFE, 0x00, 0x7F}));
  ConvertOptions no_saturate;
  no_saturate.saturate = false;
  EXPECT_EQ(Values<uint8_t>(Convert(src, DataType::kFloat8E4M3FN, no_saturate)),
            (std::vector<uint8_t>{0x7F, 0xFF, 0x00, 0x7F}));
  EXPECT_EQ(Values<uint8_t>(Convert(src, DataType::kFloat8E5M2, no_saturate)),
            (std::vector<uint8_t>{0x7C, 0xFC, 0x00, 0x7E}));
  // float8 -> float16 through the exact value: e4m3fn 448 -> 448.
  Tensor f8 = Convert(src, DataType::kFloat8E4M3FN);
  EXPECT_EQ(Values<uint16_t>(Convert(f8, DataType::kFloat16))[0], 0x5F00);
  // float8e8m0 from onnx.numpy_helper.to_float8e8m0([0.124, 1.1, 4.0], mode).
  Tensor e = Tensor::FromVector<float>({0.124f, 1.1f, 4.0f}, {3});
  EXPECT_EQ(Values<uint8_t>(Convert(e, DataType::kFloat8E8M0)), (std::vector<uint8_t>{124, 128, 129}));
  ConvertOptions down;
  down.e8m0_rounding = E8M0Rounding::kDown;
  EXPECT_EQ(Values<uint8_t>(Convert(e, DataType::kFloat8E8M0, down)), (std::vector<uint8_t>{123, 127, 129}));
}

TEST(ConvertTest, NumbersToStringsLikeNumpy) {
  Tensor f = Tensor::FromVector<float>({0.1f, 1.0f, 100.0f, 1e-4f, 1e-5f, 12345678.0f, 1e16f, 3e20f, NAN, -INFINITY,
                                        -0.0f, 0.47892547f, 65504.0f, 1.5e-5f, 999999.94f, 1e6f, 0.001234f, 1e-45f,
                                        3.4e38f},
                                       {19});
  EXPECT_EQ(Values<std::string>(Convert(f, DataType::kString)),
            (std::vector<std::string>{"0.1", "1.0", "100.0", "1e-04", "1e-05", "1.2345678e+07", "1e+16", "3e+20", "nan",
                                      "-inf", "-0.0", "0.47892547", "65504.0", "1.5e-05", "999999.94", "1e+06",
                                      "0.001234", "1e-45", "3.4e+38"}));
  Tensor d = Tensor::FromVector<double>({0.0001, 12345678.0, 1e15, 1e16, 9999999999999998.0, 1e300, 5e-324, 123.456,
                                         9.999999999999999e-05, 0.1},
                                        {10});
  EXPECT_EQ(Values<std::string>(Convert(d, DataType::kString)),
            (std::vector<std::string>{"0.0001", "12345678.0", "1000000000000000.0", "1e+16", "9999999999999998.0",
                                      "1e+300", "5e-324", "123.456", "9.999999999999999e-05", "0.1"}));
  // float16 inputs given as float16 values of [0.1, 0.47892547, 65504, 1000, 12345, 2048, 999.5, 998, 1.5e-5,
  // 0.0001, 1e-5].
  Tensor h = Convert(Tensor::FromVector<double>({0.1, 0.47892547, 65504, 1000, 12345, 2048, 999.5, 998, 1.5e-5,
                                                 0.0001, 1e-5},
                                                {11}),
                     DataType::kFloat16);
  EXPECT_EQ(Values<std::string>(Convert(h, DataType::kString)),
            (std::vector<std::string>{"0.1", "0.479", "6.55e+04", "1e+03", "1.2344e+04", "2.048e+03", "999.5",
                                      "998.0", "1.5e-05", "0.0001", "1e-05"}));
  Tensor i = Tensor::FromVector<int64_t>({1, -5, INT64_MAX}, {3});
  EXPECT_EQ(Values<std::string>(Convert(i, DataType::kString)),
            (std::vector<std::string>{"1", "-5", "9223372036854775807"}));
  Tensor u = Tensor::FromVector<uint64_t>({UINT64_MAX}, {1});
  EXPECT_EQ(Values<std::string>(Convert(u, DataType::kString)), (std::vector<std::string>{"18446744073709551615"}));
}

// Random values of each type against numpy's astype(str)
// (tests/unit/ir/data/number_strings.txt, from make_float_tables.py).
TEST(ConvertTest, NumbersToStringsMatchNumpyOnRandomValues) {
  std::ifstream in(std::string(NEE_TEST_DATA_DIR) + "/unit/ir/data/number_strings.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  int checked = 0, mismatches = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag, hex, expected;
    fields >> tag >> hex >> expected;
    const uint64_t bits = std::stoull(hex, nullptr, 16);
    Tensor t;
    if (tag == "f16") {
      t = Tensor::Allocate(DataType::kFloat16, {1}).value();
      t.data<uint16_t>()[0] = static_cast<uint16_t>(bits);
    } else if (tag == "f32") {
      t = Tensor::Allocate(DataType::kFloat, {1}).value();
      const uint32_t u = static_cast<uint32_t>(bits);
      std::memcpy(t.raw_data(), &u, 4);
    } else {
      t = Tensor::Allocate(DataType::kDouble, {1}).value();
      std::memcpy(t.raw_data(), &bits, 8);
    }
    const std::string actual = Convert(t, DataType::kString).data<std::string>()[0];
    ++checked;
    if (actual != expected && ++mismatches < 20) ADD_FAILURE() << line << ": got " << actual;
  }
  EXPECT_GT(checked, 4000);
  EXPECT_EQ(mismatches, 0);
}

TEST(ConvertTest, StringsToNumbers) {
  Tensor s = Tensor::FromVector<std::string>({"1e5", "NaN", "nan", "-INF", "+INF", "inf", "Infinity", " 12", "2.5",
                                              "-3", "0.1", "1e400", "-1E-8"},
                                             {13});
  std::vector<float> f = Values<float>(Convert(s, DataType::kFloat));
  // numpy astype(float32) of the same strings (1e400 overflows to inf).
  const std::vector<float> expected = {1e5f, NAN, NAN, -INFINITY, INFINITY, INFINITY, INFINITY, 12.0f, 2.5f,
                                       -3.0f, 0.1f, INFINITY, -1e-8f};
  ASSERT_EQ(f.size(), expected.size());
  for (size_t k = 0; k < f.size(); ++k) {
    if (std::isnan(expected[k])) EXPECT_TRUE(std::isnan(f[k])) << k;
    else EXPECT_EQ(f[k], expected[k]) << k;
  }
  // "0.1" straight to float16 (numpy: float16(0.1) is 0x2E66).
  Tensor h = Convert(Tensor::FromVector<std::string>({"0.1", "-inf", "65520"}, {3}), DataType::kFloat16);
  EXPECT_EQ(Values<uint16_t>(h), (std::vector<uint16_t>{0x2E66, 0xFC00, 0x7C00}));
  // Integer literals are exact; non-integer text truncates (ONNX: "100.5" may give 100).
  Tensor ints = Tensor::FromVector<std::string>({"9007199254740993", "-3", " 12", "100.5", "-2.7", "1e3"}, {6});
  EXPECT_EQ(Values<int64_t>(Convert(ints, DataType::kInt64)),
            (std::vector<int64_t>{9007199254740993, -3, 12, 100, -2, 1000}));
  Tensor big = Tensor::FromVector<std::string>({"18446744073709551615"}, {1});
  EXPECT_EQ(Values<uint64_t>(Convert(big, DataType::kUint64))[0], UINT64_MAX);
  Tensor bools = Tensor::FromVector<std::string>({"True", "false", "0", "1", "0.0", "nan"}, {6});
  EXPECT_EQ(Values<bool>(Convert(bools, DataType::kBool)), (std::vector<bool>{true, false, false, true, false, true}));
}

TEST(ConvertTest, StringsAreRoundedOnceFromTheirExactDecimalValue) {
  // Expected values from exact rational arithmetic (Python fractions), not
  // numpy: numpy parses to float64 first and so rounds twice. 1.00048828125 is
  // the float16 midpoint between 1 (0x3C00) and 1 + 2^-10 (0x3C01); the
  // nearest double of the longer literals is that midpoint itself.
  Tensor h = Convert(Tensor::FromVector<std::string>({"1.00048828125", "1.00048828125000000001",
                                                      "-1.00048828125000000001", "1.00048828124999999999"},
                                                     {4}),
                     DataType::kFloat16);
  EXPECT_EQ(Values<uint16_t>(h), (std::vector<uint16_t>{0x3C00, 0x3C01, 0xBC01, 0x3C00}));
  // Truncation: the nearest double of 2.99999999999999999999 is 3.0.
  Tensor i = Convert(Tensor::FromVector<std::string>({"2.99999999999999999999", "-2.99999999999999999999", "3.0"}, {3}),
                     DataType::kInt32);
  EXPECT_EQ(Values<int32_t>(i), (std::vector<int32_t>{2, -2, 3}));
  // float8e8m0 rounding up: anything above 1 becomes 2 (code 128), 1 stays 1 (127).
  Tensor e = Convert(Tensor::FromVector<std::string>({"1.00000000000000000001", "1"}, {2}), DataType::kFloat8E8M0);
  EXPECT_EQ(Values<uint8_t>(e), (std::vector<uint8_t>{128, 127}));
  // bfloat16 midpoint 1 + 2^-8 = 1.00390625 (between 0x3F80 and 0x3F81).
  Tensor b = Convert(Tensor::FromVector<std::string>({"1.00390625", "1.003906250000000000001"}, {2}),
                     DataType::kBFloat16);
  EXPECT_EQ(Values<uint16_t>(b), (std::vector<uint16_t>{0x3F80, 0x3F81}));
}

TEST(ConvertTest, BadStringsAndTypesAreErrors) {
  Tensor s = Tensor::FromVector<std::string>({"1", "hello"}, {2});
  Tensor dst = Tensor::Allocate(DataType::kFloat, {2}).value();
  Status st = ConvertTensor(s, dst);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("hello"), std::string::npos);
  EXPECT_NE(st.message().find("element 1"), std::string::npos);
  Tensor hex = Tensor::FromVector<std::string>({"0x10"}, {1});
  Tensor i = Tensor::Allocate(DataType::kInt32, {1}).value();
  EXPECT_FALSE(ConvertTensor(hex, i).ok());
  Tensor c = Tensor::Allocate(DataType::kComplex64, {1}).value();
  EXPECT_EQ(ConvertTensor(c, i).code(), StatusCode::kNotImplemented);
  Tensor wrong = Tensor::Allocate(DataType::kInt32, {3}).value();
  EXPECT_EQ(ConvertTensor(hex, wrong).code(), StatusCode::kInvalidArgument);
}

TEST(ConvertTest, SingleElementAccess) {
  // Same rules as the tensor conversion (numpy: float64 -> int8 of 300.7 is 44).
  Tensor i8 = Tensor::Allocate(DataType::kInt8, {2}).value();
  StoreDoubleElement(i8, 1, 300.7);
  EXPECT_EQ(i8.data<int8_t>()[1], 44);
  EXPECT_EQ(ElementAsDouble(i8, 1), 44.0);
  Tensor u2 = Tensor::Allocate(DataType::kUint2, {5}).value();
  StoreDoubleElement(u2, 4, 3.0);
  StoreDoubleElement(u2, 3, 2.0);
  EXPECT_EQ(ElementAsDouble(u2, 4), 3.0);
  EXPECT_EQ(ElementAsDouble(u2, 3), 2.0);
  EXPECT_EQ(ElementAsDouble(u2, 0), 0.0);
  Tensor e8 = Tensor::Allocate(DataType::kFloat8E8M0, {1}).value();
  StoreDoubleElement(e8, 0, 3.0);  // rounds up to 4 (code 129)
  EXPECT_EQ(ElementAsDouble(e8, 0), 4.0);
  Tensor s = Tensor::Allocate(DataType::kString, {1}).value();
  EXPECT_TRUE(std::isnan(ElementAsDouble(s, 0)));
}

TEST(ConvertTest, PackedRangesDoNotDisturbNeighbours) {
  // Converting [0, 4) and [4, 7) separately equals one conversion.
  Tensor src = Tensor::FromVector<int32_t>({1, -2, 3, -4, 5, -6, 7}, {7});
  Tensor whole = Convert(src, DataType::kInt4);
  Tensor parts = Tensor::Allocate(DataType::kInt4, {7}).value();
  ASSERT_TRUE(ConvertElements(src, parts, 4, 7, {}).ok());
  ASSERT_TRUE(ConvertElements(src, parts, 0, 4, {}).ok());
  EXPECT_EQ(AsInt64(parts), AsInt64(whole));
  EXPECT_EQ(AsInt64(whole), (std::vector<int64_t>{1, -2, 3, -4, 5, -6, 7}));
  EXPECT_FALSE(ConvertElements(src, parts, 5, 9, {}).ok());
}

}  // namespace
}  // namespace nee
