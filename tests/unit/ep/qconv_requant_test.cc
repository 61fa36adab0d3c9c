// qconv::ProveFloatRequant (qconv_common.cc): where it says the AVX2 tiles' one-fma requantization
// (clamp(round_half_even(fma(float(s), mult_f, float(yzp))))) gives the reference's byte for every int32 sum,
// it must: checked here against RequantRowPortable (the reference's double arithmetic) over every sum whose
// value lies near the output range, random int32 sums and the extremes, for random multipliers, output zero
// points and both output types; and it must refuse multipliers for which some sum differs (found here by
// searching the band independently), so that both answers occur.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ep/cpu/qconv_common.h"

namespace nee {
namespace {

uint8_t OneFma(int32_t s, float mult_f, const cpu::qconv::Requant& q) {
  const float v = std::fma(static_cast<float>(s), mult_f, static_cast<float>(q.yzp));
  const double r = std::min(std::max(static_cast<double>(std::nearbyint(v)), q.lo), q.hi);
  return static_cast<uint8_t>(static_cast<int32_t>(r));
}

uint8_t Reference(int32_t s, double mult, const cpu::qconv::Requant& q) {
  uint8_t out = 0;
  cpu::qconv::RequantRowPortable(&s, 1, mult, q, &out);
  return out;
}

TEST(QConvRequant, FloatPathProvenOnlyWhereItMatchesTheReference) {
  std::mt19937 rng(20261205);
  int proven = 0, refused = 0;
  for (int trial = 0; trial < 120; ++trial) {
    cpu::qconv::Requant q;
    q.y_signed = trial % 2 == 1;
    q.lo = q.y_signed ? -128 : 0;
    q.hi = q.y_signed ? 127 : 255;
    q.yzp = static_cast<double>(static_cast<int>(rng() % 256) + static_cast<int>(q.lo));
    // Multipliers as the kernel forms them (floats), 2^-12 to 2^-4, and a few exact powers of two (exact ties).
    const float mult_f = trial % 10 == 0 ? std::ldexp(1.0f, -4 - trial % 7)
                                         : std::exp2(-12.0f + 8.0f * std::uniform_real_distribution<float>(0, 1)(rng));
    const double mult = mult_f;
    const bool ok = cpu::qconv::ProveFloatRequant(mult, mult_f, q, int64_t{1} << 20);
    // Every sum whose value lies within 4 of the output range, searched here.
    const auto first = static_cast<int64_t>(std::floor((q.lo - 4 - q.yzp) / mult));
    const auto last = static_cast<int64_t>(std::ceil((q.hi + 4 - q.yzp) / mult));
    bool differs = false;
    for (int64_t s = first; s <= last && !differs; ++s)
      differs = OneFma(static_cast<int32_t>(s), mult_f, q) != Reference(static_cast<int32_t>(s), mult, q);
    EXPECT_EQ(ok, !differs) << "mult " << mult << " yzp " << q.yzp;
    if (!ok) {
      ++refused;
      continue;
    }
    ++proven;
    std::vector<int32_t> sums = {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 0, -1, 1};
    for (int i = 0; i < 20000; ++i) sums.push_back(static_cast<int32_t>(rng()));
    for (int i = 0; i < 20000; ++i)
      sums.push_back(static_cast<int32_t>(static_cast<int64_t>(rng() % (1 << 24)) - (1 << 23)));
    for (int32_t s : sums) ASSERT_EQ(OneFma(s, mult_f, q), Reference(s, mult, q)) << "mult " << mult << " sum " << s;
  }
  EXPECT_GT(proven, 0);
  EXPECT_GT(refused, 0);
}

TEST(QConvRequant, FloatPathRefusesLargeOrInexactMultipliers) {
  cpu::qconv::Requant q;
  EXPECT_FALSE(cpu::qconv::ProveFloatRequant(0.5, 0.5f, q, int64_t{1} << 20));
  EXPECT_FALSE(cpu::qconv::ProveFloatRequant(-0.01, -0.01f, q, int64_t{1} << 20));
  EXPECT_FALSE(cpu::qconv::ProveFloatRequant(0.1, 0.1f, q, int64_t{1} << 20));  // double 0.1 is not the float
  EXPECT_FALSE(cpu::qconv::ProveFloatRequant(1e-7, 1e-7f, q, int64_t{1} << 20));  // too many sums to check
}

}  // namespace
}  // namespace nee
