// Sixteen-lane bfloat16 helpers the AVX512-BF16 kernels share (bf16_gemm.cc,
// conv_bf16.cc): widening to float32 and rounding back as the reference does.
// Include only in files compiled for x86-64; the functions carry their own
// target attribute.
#pragma once
#include <immintrin.h>

#include <cstdint>

#define NEE_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace nee::cpu {

// FloatToBFloat16 on sixteen lanes: round to nearest even on the dropped
// 16 bits (a carry may reach infinity, as it should), NaN made quiet with
// its sign kept.
NEE_BF16_TARGET inline __m256i RoundToBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i upper = _mm512_srli_epi32(u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(upper, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i quiet = _mm512_or_si512(_mm512_and_si512(upper, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7fc0));
  r = _mm512_mask_mov_epi32(r, nan, quiet);
  return _mm512_cvtepi32_epi16(r);
}

// The same by vcvtneps2bf16 (AVX512-BF16), one instruction where the
// integer form takes ten: round to nearest even, but denormal inputs
// become zero (as in vdpbf16ps: values below 1.2e-38) and a NaN keeps its
// payload, so NaN lanes (rare: a branch) are rewritten as RoundToBf16's.
NEE_BF16_TARGET inline __m256i RoundToBf16Fast(__m512 v) {
  __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (__builtin_expect(nan != 0, 0)) r = _mm256_mask_mov_epi16(r, nan, RoundToBf16(v));
  return r;
}

// Sixteen bfloat16 values widened to float32 (exact: the upper half).
NEE_BF16_TARGET inline __m512 WidenBf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Sixteen bfloat16 values (masked) loaded and widened.
NEE_BF16_TARGET inline __m512 LoadBf16(const uint16_t* p, __mmask16 mask) {
  return WidenBf16(_mm256_maskz_loadu_epi16(mask, p));
}

// The float32 value of `v` rounded to bfloat16 (the value a bfloat16 op
// would store and its reader widen).
NEE_BF16_TARGET inline __m512 RoundedToBf16(__m512 v) { return WidenBf16(RoundToBf16Fast(v)); }

}  // namespace nee::cpu
