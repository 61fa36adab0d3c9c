// Sixteen-lane (AVX-512) versions of simd_math.h's Exp8 and Sigmoid8: the
// same operations in the same order per lane (round to nearest, FMAs, the
// two-factor 2^n, a correctly rounded divide), so a lane gives the same bits
// whichever width computed it and results do not depend on the CPU's vector
// width or on where a loop was cut. Only for use inside functions compiled
// with __attribute__((target("avx512f,avx512dq"))) after a run-time check.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace nee::cpu {

#define NEE_AVX512_INLINE __attribute__((target("avx512f,avx512dq"), always_inline)) inline

inline bool CpuHasAvx512Dq() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
}

NEE_AVX512_INLINE __m512 Pow2x16(__m512i n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

// Exp8 lane for lane (see simd_math.h for the method and its accuracy).
NEE_AVX512_INLINE __m512 Exp16(__m512 x) {
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  // max/min(x, c) return c for a NaN x, as _mm256_max_ps/_mm256_min_ps do.
  __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-110.f));
  xc = _mm512_min_ps(xc, _mm512_set1_ps(100.f));
  const __m512 n_float = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n_float, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n_float, _mm512_set1_ps(1.42860682030941723212e-6f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  const __m512i n = _mm512_cvtps_epi32(n_float);
  const __m512i half = _mm512_srai_epi32(n, 1);
  const __m512 result = _mm512_mul_ps(_mm512_mul_ps(p, Pow2x16(half)), Pow2x16(_mm512_sub_epi32(n, half)));
  return _mm512_mask_blend_ps(is_nan, result, x);
}

// Sigmoid8 lane for lane: e = e^-|x|, then 1 / (1 + e) or e / (1 + e).
NEE_AVX512_INLINE __m512 Sigmoid16(__m512 x) {
  const __m512 abs_x = _mm512_andnot_ps(_mm512_set1_ps(-0.f), x);
  const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), abs_x));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_blend_ps(negative, _mm512_set1_ps(1.f), e);
  return _mm512_div_ps(numerator, _mm512_add_ps(_mm512_set1_ps(1.f), e));
}

}  // namespace nee::cpu
#endif
