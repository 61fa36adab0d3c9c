// The sixteen-lane exponential (simd_math.h) gives bitwise what the
// eight-lane one gives wherever the result is a normal float, and the
// sixteen-lane sigmoid bitwise what the eight-lane one gives everywhere (so
// kernels' AVX-512 and AVX2 paths agree); both exponentials and both sigmoids
// stay within a few ulp of double-precision math, subnormals included. The
// eight-lane sigmoid (and SiLU, x times it) is also held to its ulp bound
// over a dense sweep of floats against double-precision std::exp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ep/cpu/simd_math.h"

#if defined(__x86_64__) || defined(__i386__)
namespace nee {
namespace {

std::vector<float> Sweep() {
  std::vector<float> v;
  for (float x = -120.f; x <= 120.f; x += 0.0137f) v.push_back(x);
  for (float x : {0.f, -0.f, 1e-30f, -1e-30f, 88.7f, -103.9f, 1e4f, -1e4f}) v.push_back(x);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  while (v.size() % 16) v.push_back(0.5f);
  return v;
}

__attribute__((target("avx2,fma"))) void Eight(const std::vector<float>& x, std::vector<float>& exp_out,
                                               std::vector<float>& sig_out) {
  for (size_t i = 0; i < x.size(); i += 8) {
    const __m256 v = _mm256_loadu_ps(&x[i]);
    _mm256_storeu_ps(&exp_out[i], cpu::Exp8(v));
    _mm256_storeu_ps(&sig_out[i], cpu::Sigmoid8(v));
  }
}

__attribute__((target("avx512f"))) void Sixteen(const std::vector<float>& x, std::vector<float>& exp_out,
                                                std::vector<float>& sig_out) {
  for (size_t i = 0; i < x.size(); i += 16) {
    const __m512 v = _mm512_loadu_ps(&x[i]);
    _mm512_storeu_ps(&exp_out[i], cpu::Exp16(v));
    _mm512_storeu_ps(&sig_out[i], cpu::Sigmoid16(v));
  }
}

TEST(SimdMath, ExpAndSigmoidAgreeAcrossWidthsAndWithDoubleMath) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "needs AVX-512F and AVX2+FMA";
  const std::vector<float> x = Sweep();
  std::vector<float> e8(x.size()), s8(x.size()), e16(x.size()), s16(x.size());
  Eight(x, e8, s8);
  Sixteen(x, e16, s16);
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(e8[i]) < std::numeric_limits<float>::min()))  // normal, inf or NaN
      EXPECT_EQ(0, std::memcmp(&e8[i], &e16[i], sizeof(float))) << x[i] << ": " << e8[i] << " vs " << e16[i];
  for (size_t i = 0; i < x.size(); ++i)  // NaN bits included
    EXPECT_EQ(0, std::memcmp(&s8[i], &s16[i], sizeof(float))) << x[i] << ": " << s8[i] << " vs " << s16[i];
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(e16[i]) && std::isnan(s16[i]));
      continue;
    }
    const double exp_want = std::exp(static_cast<double>(x[i]));
    const double sig_want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    if (exp_want > 3.4e38) {
      EXPECT_TRUE(std::isinf(e16[i])) << x[i];
    } else if (exp_want >= std::numeric_limits<float>::min()) {  // normal range: relative error
      EXPECT_NEAR(e16[i] / exp_want, 1.0, 4e-7) << x[i];
    } else {  // subnormal: absolute, two steps of the subnormal grid (1.4e-45 each)
      EXPECT_NEAR(e16[i], exp_want, 2.9e-45) << x[i];
      EXPECT_NEAR(e8[i], exp_want, 2.9e-45) << x[i];
    }
    EXPECT_NEAR(s16[i], sig_want, 2.4e-7 * sig_want + 1e-44) << x[i];  // 2 ulp
    EXPECT_NEAR(s8[i], sig_want, 2.4e-7 * sig_want + 1e-44) << x[i];
  }
}

// The spacing of floats at |v| (the one above it at a power of two), 2^-149
// among the subnormals.
double Ulp(double v) {
  int e;
  std::frexp(std::fabs(v), &e);
  return std::ldexp(1.0, std::max(e, -125) - 24);
}

__attribute__((target("avx2,fma"))) void Sigmoid8Of(const float* x, float* y) {
  _mm256_storeu_ps(y, cpu::Sigmoid8(_mm256_loadu_ps(x)));
}

// Every 1021st float of [-120, 120] (2.2 million), against
// 1 / (1 + exp(-x)) in double: the sigmoid within 2.5 ulp (2.40 measured
// over every float; the roundings of e^-|x| and of 1 + e each cost up to an
// ulp of a result in the binade below them), SiLU computed from it within
// 3.5 ulp where the sigmoid is a normal float; exactly 0 and 1 once
// saturated, and at the infinities; NaN in, NaN out.
TEST(SimdMath, SigmoidWithinUlpsOfDoubleMath) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "needs AVX2+FMA";
  double worst = 0, worst_silu = 0;
  float worst_at = 0, worst_silu_at = 0;
  alignas(32) float in[8], out[8];
  int filled = 0;
  auto check = [&] {
    Sigmoid8Of(in, out);
    for (int j = 0; j < filled; ++j) {
      const double x = in[j];
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(out[j]));
        continue;
      }
      const double want = 1.0 / (1.0 + std::exp(-x));
      if (std::fabs(x) > 110.0) {  // saturated: 0 (e^x below half the smallest subnormal) or 1
        EXPECT_EQ(out[j], x > 0 ? 1.f : 0.f) << x;
        continue;
      }
      const double err = std::fabs(out[j] - want) / Ulp(want);
      if (err > worst) worst = err, worst_at = in[j];
      if (x > -87.0) {
        const double silu_want = x * want;
        const double silu_err = std::fabs(static_cast<float>(in[j] * out[j]) - silu_want) / Ulp(silu_want);
        if (silu_err > worst_silu) worst_silu = silu_err, worst_silu_at = in[j];
      }
    }
    filled = 0;
  };
  auto push = [&](float v) {
    in[filled++] = v;
    if (filled == 8) check();
  };
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t bits = 0; bits <= 0x42F00000u; bits += 1021) {  // 0x42F00000 = 120
      const uint32_t b = bits | sign;
      float v;
      std::memcpy(&v, &b, sizeof v);
      push(v);
    }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (float v : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 0.f, -0.f, 1e-45f, -1e-45f,
                  -87.5f, -103.9f, -104.f, -110.f, 16.7f, 17.f, 88.8f})
    push(v);
  while (filled) push(0.f);
  EXPECT_LE(worst, 2.5) << "at x = " << worst_at;
  EXPECT_LE(worst_silu, 3.5) << "at x = " << worst_silu_at;
  float y[8], x[8] = {kInf, -kInf, 0.f, -0.f, 200.f, -200.f, 1e30f, -1e30f};
  Sigmoid8Of(x, y);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[4], 1.f);
  EXPECT_EQ(y[5], 0.f);
  EXPECT_EQ(y[6], 1.f);
  EXPECT_EQ(y[7], 0.f);
}

}  // namespace
}  // namespace nee
#endif
