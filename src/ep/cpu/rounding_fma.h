// Requantizing an int32 sum s to an 8-bit output by one float fma, exactly as the reference's double
// arithmetic does it (round_half_even(double(s) * mult + yzp), saturated), where RoundingFmaExact proves it:
// QLinearConv's tiles (qconv_*.cc) and QLinearMatMul's rows (qlinear_matmul_fast.cc) share it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nee::cpu {

// The one-fma requantization. Adding kRoundingBias (1.5 * 2^23) to the output zero point puts s * mult + yzp
// among the floats that are one apart, so the fma's own rounding (half to even) rounds the value to an integer,
// once, as the reference's nearbyint does; the integer is the result's bits less kRoundingBits (the bias's
// bits). Kernels form it as RoundingFma does, sixteen or eight lanes at a time.
constexpr float kRoundingBias = 12582912.0f;
constexpr int32_t kRoundingBits = 0x4B400000;

inline int32_t RoundingFma(int32_t s, float mult_f, float biased_yzp) {
  const float v = std::fma(static_cast<float>(s), mult_f, biased_yzp);
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<int32_t>(static_cast<uint32_t>(bits) - static_cast<uint32_t>(kRoundingBits));
}

#if defined(__x86_64__) || defined(__i386__)
// Eight sums the same way, on AVX2.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i RoundingFma8(__m256i s, __m256 mult_f,
                                                                                __m256 biased_yzp) {
  const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), mult_f, biased_yzp);
  return _mm256_sub_epi32(_mm256_castps_si256(v), _mm256_set1_epi32(kRoundingBits));
}
#endif

// Whether RoundingFma, saturated to the output range, gives the reference's byte for every int32 sum s with
// |s| <= sum_bound, at multiplier `mult` (its float `mult_f`) and output zero point yzp.
// Decided from the numbers alone (the argument is at the definition); tests check it sum by sum.
bool RoundingFmaExact(double mult, float mult_f, double yzp, double sum_bound);

}  // namespace nee::cpu
