// The sixteen-lane exponential (simd_math.h) gives bitwise what the
// eight-lane one gives wherever the result is a normal float, and the
// sixteen-lane sigmoid and tanh bitwise what the eight-lane ones give
// everywhere (so kernels' AVX-512 and AVX2 paths agree, and a kernel may
// finish a tensor's tail on the other width); both exponentials and both
// sigmoids stay within a few ulp of double-precision math, subnormals
// included. The eight-lane sigmoid (and SiLU, x times it) is also held to its
// ulp bound over a dense sweep of floats against double-precision std::exp,
// and tanh to its relative bound against std::tanh.
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
    EXPECT_NEAR(s16[i], sig_want, 3.6e-7 * sig_want + 1e-44) << x[i];  // 3 ulp
    EXPECT_NEAR(s8[i], sig_want, 3.6e-7 * sig_want + 1e-44) << x[i];
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
// 1 / (1 + exp(-x)) in double: the sigmoid within 3 ulp (over every
// float: 2.89; the roundings of e^-|x| — mostly its table entry's — and of 1 + e
// each cost up to an ulp of a result in the binade below them), SiLU
// computed from it within 4 ulp (3.72 over every float) where the sigmoid is a normal
// float; exactly 0 and 1 once saturated, and at the infinities; NaN in, NaN
// out.
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
  EXPECT_LE(worst, 3.0) << "at x = " << worst_at;
  EXPECT_LE(worst_silu, 4.0) << "at x = " << worst_silu_at;
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

// Every 997th float of each sign, all exponents (4.3 million, with the
// infinities and NaNs among them): Sigmoid16 and Tanh16 give Sigmoid8's and
// Tanh8's bits, NaN payloads included; tanh within 3e-7 relative of
// std::tanh in double (1.95e-7 measured over every float), odd, exactly +-1
// once saturated, NaN in, NaN out.
__attribute__((target("avx2,fma"))) void EightLanes(const float* x, float* sig, float* tanh_out) {
  for (int i = 0; i < 16; i += 8) {
    _mm256_storeu_ps(sig + i, cpu::Sigmoid8(_mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(tanh_out + i, cpu::Tanh8(_mm256_loadu_ps(x + i)));
  }
}
__attribute__((target("avx512f"))) void SixteenLanes(const float* x, float* sig, float* tanh_out) {
  _mm512_storeu_ps(sig, cpu::Sigmoid16(_mm512_loadu_ps(x)));
  _mm512_storeu_ps(tanh_out, cpu::Tanh16(_mm512_loadu_ps(x)));
}

TEST(SimdMath, SigmoidAndTanhSameBitsOnBothWidthsTanhWithinBound) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "needs AVX-512F and AVX2+FMA";
  double worst_tanh = 0;
  float worst_at = 0;
  int64_t differing = 0;
  float x[16], s8[16], t8[16], s16[16], t16[16];
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += 16 * 997) {
    for (int j = 0; j < 16; ++j) {
      const uint32_t bits = static_cast<uint32_t>(start + uint64_t{997} * j);
      std::memcpy(&x[j], &bits, sizeof bits);
    }
    EightLanes(x, s8, t8);
    SixteenLanes(x, s16, t16);
    for (int j = 0; j < 16; ++j) {
      if (std::memcmp(&s8[j], &s16[j], sizeof(float)) || std::memcmp(&t8[j], &t16[j], sizeof(float))) ++differing;
      if (std::isnan(x[j])) {
        EXPECT_TRUE(std::isnan(t16[j]) && std::isnan(s16[j])) << x[j];
        continue;
      }
      const double want = std::tanh(static_cast<double>(x[j]));
      const double err = want == 0 ? std::fabs(t16[j]) : std::fabs(t16[j] - want) / std::fabs(want);
      if (err > worst_tanh) worst_tanh = err, worst_at = x[j];
    }
  }
  EXPECT_EQ(differing, 0);
  EXPECT_LE(worst_tanh, 3e-7) << "at x = " << worst_at;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float special[16] = {kInf, -kInf, 0.f, -0.f, 20.f, -20.f, 1e30f, -1e30f, 0.39999998f, 0.4f, -0.4f,
                             1e-30f, -1e-30f, 55.f, -60.f, std::numeric_limits<float>::quiet_NaN()};
  EightLanes(special, s8, t8);
  SixteenLanes(special, s16, t16);
  const float tanh_want[15] = {1.f, -1.f, 0.f, -0.f, 1.f, -1.f, 1.f, -1.f, std::tanh(0.39999998f), std::tanh(0.4f),
                               -std::tanh(0.4f), 1e-30f, -1e-30f, 1.f, -1.f};
  for (int j = 0; j < 15; ++j) {
    EXPECT_NEAR(t16[j], tanh_want[j], 3e-7 * std::fabs(tanh_want[j])) << special[j];
    EXPECT_EQ(std::signbit(t16[j]), std::signbit(special[j])) << special[j];
  }
  EXPECT_TRUE(std::isnan(t16[15]) && std::isnan(s16[15]));
}

// The sixteen-lane GELUs (FusedMatMul's epilogue on AVX-512) give the
// eight-lane ones' bits, NaN payloads included, over every 997th float of
// each sign and all exponents and the special values.
__attribute__((target("avx2,fma"))) void GelusEight(const float* x, float* erf_form, float* tanh_form) {
  for (int i = 0; i < 16; i += 8) {
    _mm256_storeu_ps(erf_form + i, cpu::GeluErfOp{}(_mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(tanh_form + i, cpu::GeluTanhOp{}(_mm256_loadu_ps(x + i)));
  }
}
__attribute__((target("avx512f"))) void GelusSixteen(const float* x, float* erf_form, float* tanh_form) {
  _mm512_storeu_ps(erf_form, cpu::GeluErfOp{}(_mm512_loadu_ps(x)));
  _mm512_storeu_ps(tanh_form, cpu::GeluTanhOp{}(_mm512_loadu_ps(x)));
}

TEST(SimdMath, GelusSameBitsOnBothWidths) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "needs AVX-512F and AVX2+FMA";
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float x[16], e8[16], t8[16], e16[16], t16[16];
  int64_t differing = 0, checked = 0;
  auto compare = [&] {
    GelusEight(x, e8, t8);
    GelusSixteen(x, e16, t16);
    for (int j = 0; j < 16; ++j, ++checked)
      if (std::memcmp(&e8[j], &e16[j], sizeof(float)) || std::memcmp(&t8[j], &t16[j], sizeof(float))) ++differing;
  };
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += 16 * 997) {
    for (int j = 0; j < 16; ++j) {
      const uint32_t bits = static_cast<uint32_t>(start + uint64_t{997} * j);
      std::memcpy(&x[j], &bits, sizeof bits);
    }
    compare();
  }
  const float special[16] = {kInf, -kInf, 0.f, -0.f, 3.92f * 1.41421356f, -5.5f, 1e30f, -1e30f, 0.5f, -0.5f, 1.f,
                             1e-30f, -1e-30f, 10.f, -10.f, std::numeric_limits<float>::quiet_NaN()};
  std::memcpy(x, special, sizeof x);
  compare();
  EXPECT_GT(checked, 4000000);
  EXPECT_EQ(differing, 0);
  EXPECT_TRUE(std::isnan(e16[15]) && std::isnan(t16[15]));
  EXPECT_EQ(e16[0], kInf);
  EXPECT_EQ(e16[2], 0.f);
}

}  // namespace
}  // namespace nee
#endif
