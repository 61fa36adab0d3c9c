// The fast Cast between float32 and float16 / bfloat16 (ep/cpu/cast_fast.cc)
// against the reference Cast kernel, bitwise, at 1 and 2 threads: every
// 16-bit pattern widened; random 32-bit patterns (NaN with and without the
// quiet bit, infinities, subnormals) and chosen values (ties at both formats'
// rounding points, float16's overflow edge and subnormal range) narrowed; odd
// lengths, so the vector loops' tails and the thread split are covered. Other
// pairs of types go to the reference.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Node CastTo(DataType to) {
  return testing::MakeNode("Cast", 1, 1, {testing::IntAttr("to", static_cast<int64_t>(to))});
}

void ExpectBitwiseReference(const Tensor& x, DataType to, const std::string& what) {
  const Node node = CastTo(to);
  constexpr int64_t kOpset = 21;
  auto schema = OpRegistry::Global().Resolve("", "Cast", kOpset);
  ASSERT_TRUE(schema.ok());
  auto ref = testing::RunKernel(schema.value()->kernel, node, kOpset, {Value(x)}, 1);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = testing::RunKernel(cpu::CastFast, node, kOpset, {Value(x)}, threads);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->dtype(), to) << what;
    ASSERT_EQ(got->dims(), ref->dims()) << what;
    ASSERT_EQ(got->byte_size(), ref->byte_size()) << what;
    const auto* g = static_cast<const uint8_t*>(got->raw_data());
    const auto* r = static_cast<const uint8_t*>(ref->raw_data());
    const size_t elem = to == DataType::kFloat ? 4 : 2;
    size_t mismatches = 0;
    for (size_t i = 0; i < ref->byte_size(); i += elem) {
      if (std::memcmp(g + i, r + i, elem) == 0) continue;
      if (++mismatches <= 5) {
        uint32_t gb = 0, rb = 0;
        std::memcpy(&gb, g + i, elem);
        std::memcpy(&rb, r + i, elem);
        ADD_FAILURE() << what << " threads " << threads << " element " << i / elem << ": fast 0x" << std::hex << gb
                      << ", reference 0x" << rb;
      }
    }
    EXPECT_EQ(mismatches, 0u) << what << " threads " << threads;
  }
}

// Every 16-bit pattern, then a tail of 7 more, as `type`.
Tensor AllPatterns(DataType type) {
  std::vector<uint16_t> bits(65536 + 7);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i * 40503u);  // odd multiplier: a permutation
  Tensor t = Tensor::Allocate(type, {static_cast<int64_t>(bits.size())}).value();
  std::memcpy(t.raw_data(), bits.data(), bits.size() * 2);
  return t;
}

TEST(FastCast, WidensEveryHalfAndBFloat16Pattern) {
  ExpectBitwiseReference(AllPatterns(DataType::kFloat16), DataType::kFloat, "float16 -> float");
  ExpectBitwiseReference(AllPatterns(DataType::kBFloat16), DataType::kFloat, "bfloat16 -> float");
}

// Values where rounding is decided: ties to even and just beside them, at
// float16's (13 dropped bits) and bfloat16's (16) rounding points, the
// float16 overflow edge (65504 / 65520), float16 subnormals and float
// subnormals, zeros, infinities and NaNs of both signs and kinds.
std::vector<float> SpecialValues(std::mt19937& rng) {
  std::vector<float> v = {0.f, -0.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          FromBits(0x7f800001u), FromBits(0xff800001u), FromBits(0x7fa00000u), FromBits(0x7fc00001u),
                          FromBits(0x7f802000u), 65504.f, 65519.996f, 65520.f, -65520.f, 1e30f, -1e30f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(), FromBits(0x007fffffu), 5.9604645e-8f,
                          2.9802322e-8f, 2.9802326e-8f, 6.1035156e-5f, 6.1e-5f, 3.0517578e-5f};
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 4000; ++i) {
    const uint32_t base = any(rng) & 0x7fffffffu;
    for (uint32_t dropped : {13u, 16u}) {
      const uint32_t kept = base & ~((1u << dropped) - 1);
      const uint32_t half = 1u << (dropped - 1);
      for (uint32_t u : {kept | half, (kept | half) - 1, (kept | half) + 1, kept + (1u << dropped) + half}) {
        v.push_back(FromBits(u));
        v.push_back(-FromBits(u));
      }
    }
  }
  return v;
}

TEST(FastCast, NarrowsRandomAndSpecialFloatsLikeTheReference) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> values = SpecialValues(rng);
  for (int i = 0; i < 70001; ++i) values.push_back(FromBits(any(rng)));  // NaN, Inf, subnormals among them
  // Finite values in float16's range: whole vectors without NaN take the F16C path.
  std::uniform_real_distribution<float> finite(-70000.f, 70000.f);
  for (int i = 0; i < 50003; ++i) values.push_back(finite(rng) * (i % 3 == 0 ? 1e-6f : 1.f));
  Tensor x = Tensor::FromVector(values, {static_cast<int64_t>(values.size())});
  ExpectBitwiseReference(x, DataType::kFloat16, "float -> float16");
  ExpectBitwiseReference(x, DataType::kBFloat16, "float -> bfloat16");
  // The specials alone: a short tensor, mostly tail and single-block paths.
  std::vector<float> few(values.begin(), values.begin() + 27);
  Tensor s = Tensor::FromVector(few, {27});
  ExpectBitwiseReference(s, DataType::kFloat16, "specials -> float16");
  ExpectBitwiseReference(s, DataType::kBFloat16, "specials -> bfloat16");
}

TEST(FastCast, OtherTypesGoToTheReference) {
  Tensor x = Tensor::FromVector(std::vector<float>{1.5f, -2.25f, 3.f}, {3});
  ExpectBitwiseReference(x, DataType::kInt32, "float -> int32");
  ExpectBitwiseReference(x, DataType::kDouble, "float -> double");
  Tensor h = Tensor::Allocate(DataType::kFloat16, {2}).value();
  h.data<uint16_t>()[0] = 0x3c00;
  h.data<uint16_t>()[1] = 0xc000;
  ExpectBitwiseReference(h, DataType::kBFloat16, "float16 -> bfloat16");
  ExpectBitwiseReference(h, DataType::kDouble, "float16 -> double");
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

// bool -> float32 (magika's one-hot mask): random masks of odd lengths, one
// past a thread chunk, and empty, against the reference at 1 and 2 threads.
TEST(CastFast, BoolToFloatMatchesTheReference) {
  std::mt19937 rng(31);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{2048 * 257}, (int64_t{1} << 15) + 1}) {
    std::vector<bool> bits(static_cast<size_t>(n));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = (rng() & 1) != 0;
    Tensor x = Tensor::Allocate(DataType::kBool, {n}).value();
    for (int64_t i = 0; i < n; ++i) x.data<bool>()[i] = bits[static_cast<size_t>(i)];
    ExpectBitwiseReference(x, DataType::kFloat, "bool n=" + std::to_string(n));
  }
}

}  // namespace
}  // namespace nee
