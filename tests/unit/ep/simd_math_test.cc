// The sixteen-lane exponential (simd_math.h) gives bitwise what the
// eight-lane one gives wherever the result is a normal float (so kernels'
// AVX-512 and AVX2 paths agree); both exponentials and both sigmoids stay
// within a few ulp of double-precision math, subnormals included.
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace nee
#endif
