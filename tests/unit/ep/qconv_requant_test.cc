// RoundingFmaExact (rounding_fma.cc): where it says the one-fma requantization (RoundingFma:
// fma(float(s), mult_f, yzp + 1.5 * 2^23), the bits less the bias's, saturated) gives the reference's byte for
// every int32 sum up to the bound, it must: checked here against RequantRowPortable (the reference's double
// arithmetic) over every sum whose value lies near the output range, exact ties, random sums up to the bound and
// the bound itself, for random multipliers, output zero points and both output types; and it must refuse what
// its argument does not cover.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ep/cpu/qconv_common.h"

namespace nee {
namespace {

using cpu::qconv::Requant;

uint8_t ByRoundingFma(int32_t s, float mult_f, const Requant& q) {
  const int32_t v = cpu::RoundingFma(s, mult_f, static_cast<float>(q.yzp) + cpu::kRoundingBias);
  return static_cast<uint8_t>(std::min(std::max(v, static_cast<int32_t>(q.lo)), static_cast<int32_t>(q.hi)));
}

// One plain fma and a conversion (two roundings), as the tiles formed it before the bias.
uint8_t ByPlainFma(int32_t s, float mult_f, const Requant& q) {
  const float v = std::fma(static_cast<float>(s), mult_f, static_cast<float>(q.yzp));
  const double rounded = std::nearbyint(v);
  return static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(rounded, q.lo), q.hi)));
}

uint8_t Reference(int32_t s, double mult, const Requant& q) {
  uint8_t out = 0;
  cpu::qconv::RequantRowPortable(&s, 1, mult, q, &out);
  return out;
}

Requant OutputRange(bool y_signed, int yzp) {
  Requant q;
  q.y_signed = y_signed;
  q.lo = y_signed ? -128 : 0;
  q.hi = y_signed ? 127 : 255;
  q.yzp = yzp;
  return q;
}

TEST(QConvRequant, RoundingFmaGivesTheReferenceBytesWhereProven) {
  std::mt19937 rng(20261206);
  int plain_fma_wrong = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const bool y_signed = trial % 2 == 1;
    const Requant q = OutputRange(y_signed, static_cast<int>(rng() % 256) - (y_signed ? 128 : 0));
    // Multipliers as the kernel forms them (floats), 2^-12 to 2^-2, and exact powers of two (many exact ties).
    const float mult_f = trial % 8 == 0 ? std::ldexp(1.0f, -2 - trial % 11)
                                        : std::exp2(-12.0f + 10.0f * std::uniform_real_distribution<float>(0, 1)(rng));
    const double mult = mult_f;
    // The largest sum the proof may allow at this multiplier, or 2^31 where it is larger.
    const double bound = std::min(2147483648.0, std::floor(4194303.0 / mult));
    ASSERT_TRUE(cpu::RoundingFmaExact(mult, mult_f, q.yzp, bound)) << "mult " << mult << " yzp " << q.yzp;
    std::vector<int32_t> sums;
    // Every sum whose value lies within 4 of the output range.
    const auto first = static_cast<int64_t>(std::floor((q.lo - 4 - q.yzp) / mult));
    const auto last = static_cast<int64_t>(std::ceil((q.hi + 4 - q.yzp) / mult));
    for (int64_t s = first; s <= last; ++s) sums.push_back(static_cast<int32_t>(s));
    const auto b = static_cast<int64_t>(std::min(bound, 2147483647.0));
    std::uniform_int_distribution<int64_t> anywhere(-b, b), near24(-(int64_t{1} << 25), int64_t{1} << 25);
    for (int i = 0; i < 20000; ++i) sums.push_back(static_cast<int32_t>(anywhere(rng)));
    for (int i = 0; i < 20000; ++i) sums.push_back(static_cast<int32_t>(std::clamp(near24(rng), -b, b)));
    for (int64_t s : {-b, b, int64_t{0}, int64_t{1} << 24, -(int64_t{1} << 24)})
      sums.push_back(static_cast<int32_t>(std::clamp(s, -b, b)));
    bool plain_differs = false;
    for (int32_t s : sums) {
      ASSERT_EQ(ByRoundingFma(s, mult_f, q), Reference(s, mult, q))
          << "mult " << mult << " yzp " << q.yzp << " sum " << s;
      plain_differs = plain_differs || ByPlainFma(s, mult_f, q) != Reference(s, mult, q);
    }
    plain_fma_wrong += plain_differs ? 1 : 0;
  }
  // Why the bias: one plain fma rounds twice, and near-ties come out the other way for many multipliers.
  EXPECT_GT(plain_fma_wrong, 10);
}

TEST(QConvRequant, RoundingFmaRefusesWhatItsArgumentDoesNotCover) {
  using cpu::RoundingFmaExact;
  EXPECT_TRUE(RoundingFmaExact(0.25, 0.25f, 128, 1e6));
  EXPECT_FALSE(RoundingFmaExact(0.5, 0.5f, 0, 1e3));             // not a small multiplier
  EXPECT_FALSE(RoundingFmaExact(-0.25, -0.25f, 0, 1e3));         // negative
  EXPECT_FALSE(RoundingFmaExact(0.1, 0.1f, 0, 1e3));             // double 0.1 is not the float
  EXPECT_FALSE(RoundingFmaExact(std::ldexp(1.0, -21), std::ldexp(1.0f, -21), 0, 1e3));  // value past a double
  EXPECT_FALSE(RoundingFmaExact(0.25, 0.25f, 0.5, 1e3));         // zero point not an integer
  EXPECT_FALSE(RoundingFmaExact(0.25, 0.25f, 300, 1e3));         // nor in a byte's range
  EXPECT_FALSE(RoundingFmaExact(0.25, 0.25f, 0, 16777216.0));    // sums whose values leave C's side
  EXPECT_FALSE(RoundingFmaExact(std::ldexp(1.0, -15), std::ldexp(1.0f, -15), 0, 3e7));  // floats past 2^24, unsaturated
  EXPECT_TRUE(RoundingFmaExact(std::ldexp(1.0, -15), std::ldexp(1.0f, -15), 0, 1.6e7));
  EXPECT_FALSE(RoundingFmaExact(std::ldexp(1.0, -12), std::ldexp(1.0f, -12), 0, 4294967296.0));  // not an int32
}

// What the refusals guard against, one sum each: a sum past 2^24 that is not a float moves a small multiplier's
// value across a half (159 in the reference); a value below -1.5 * 2^23 turns the float's bits negative, which
// the subtraction wraps to a large positive integer (the top of the range instead of the bottom).
TEST(QConvRequant, RoundingFmaFailsWhereItRefuses) {
  const Requant q = OutputRange(false, 0);
  const float small = std::ldexp(1.2345678f, -17);
  EXPECT_FALSE(cpu::RoundingFmaExact(small, small, 0, 2e7));
  EXPECT_EQ(Reference(16827681, small, q), 159);
  EXPECT_NE(ByRoundingFma(16827681, small, q), 159);
  EXPECT_FALSE(cpu::RoundingFmaExact(0.25, 0.25f, 0, 67108864.0));
  EXPECT_EQ(Reference(-67108864, 0.25, q), 0);
  EXPECT_EQ(ByRoundingFma(-67108864, 0.25f, q), 255);
}

}  // namespace
}  // namespace nee
