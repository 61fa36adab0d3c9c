// The requantization of sixteen int32 sums on AVX-512 that QLinearConv's VNNI paths share (qconv_vnni.cc's
// tiles, qconv_depthwise_vnni.cc's depthwise rows): the float shortcut, proven below, with the reference's
// double arithmetic where it cannot tell, and the saturating narrow-and-store. For small multipliers only
// (Requant::small_multipliers).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

#define NEE_QREQUANT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

// GCC 12 warns about the self-initialized _mm512_undefined_* inside its own intrinsics once they are inlined
// (a false positive, as activation_fast.cc notes): the AVX-512 files put their code between these two.
#if defined(__GNUC__) && !defined(__clang__)
#define NEE_QCONV_AVX512_WARNINGS_OFF                                   \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define NEE_QCONV_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define NEE_QCONV_AVX512_WARNINGS_OFF
#define NEE_QCONV_AVX512_WARNINGS_ON
#endif

namespace nee::cpu::qconv {

// Eight sums by the reference's double arithmetic, double(s) * m + yzp without contraction (the _round
// forms never fuse), converted in the current rounding mode (half to even).
NEE_QREQUANT_TARGET inline __m256i RequantHalf(__m256i v, __m512d m, __m512d z) {
  constexpr int kCur = _MM_FROUND_CUR_DIRECTION;
  return _mm512_cvtpd_epi32(_mm512_add_round_pd(_mm512_mul_round_pd(_mm512_cvtepi32_pd(v), m, kCur), z, kCur));
}

// One row's sixteen sums (its constant added) requantized to int32, by the float shortcut below where it can
// tell, else by the reference's double arithmetic.
//
// The shortcut (the argument of qconv_depthwise.cc's RoundFloat8, with one rounding fewer): A = float(s),
// L = fma(A, m, yzp - delta) and H = fma(A, m, yzp + delta), each rounded once (yzp +- delta, an integer of
// at most 255 plus or minus 2^-11, is exact in float). The reference is D = double(s) * m + yzp in double,
// rounded half to even. Let E = s * m + yzp exactly. |A * m - s * m| <= |s * m| 2^-24 and L, H are within
// half an ulp of A * m + yzp -+ delta; where |E| <= 512, |s * m| <= 767, so L <= E - delta + 1.2e-4 and
// H >= E + delta - 1.2e-4, while |D - E| < 1e-12: D lies strictly inside (L, H). If L and H convert (half to
// even) to the same integer k, both lie in [k - 1/2, k + 1/2], so D lies strictly inside (k - 1/2, k + 1/2)
// and rounds to k. Where |E| > 512, D and L share a sign and exceed the output range by far, so both
// saturate to the same end when narrowed; small multipliers keep |L| < 2^31, so it converts. Lanes whose two
// conversions differ (ties and near-ties, about one row in a hundred) take the double arithmetic.
// z_lo, z_hi: yzp -+ delta as floats; z: yzp as doubles.
NEE_QREQUANT_TARGET inline __m512i RequantRow16(__m512i s, float mult_f, double mult, __m512 z_lo, __m512 z_hi,
                                                 __m512d z) {
  const __m512 a = _mm512_cvtepi32_ps(s), m = _mm512_set1_ps(mult_f);
  const __m512i v = _mm512_cvtps_epi32(_mm512_fmadd_ps(a, m, z_lo));
  if (_mm512_cmpneq_epi32_mask(v, _mm512_cvtps_epi32(_mm512_fmadd_ps(a, m, z_hi))) == 0) return v;
  const __m512d md = _mm512_set1_pd(mult);
  return _mm512_inserti64x4(_mm512_castsi256_si512(RequantHalf(_mm512_castsi512_si256(s), md, z)),
                            RequantHalf(_mm512_extracti64x4_epi64(s, 1), md, z), 1);
}

// One row's int32 values narrowed with saturation (int8: [-128, 127] by vpmovsdb; uint8: [0, 255], the
// negatives to 0 first, then vpmovusdb, which reads the lanes as unsigned); StoreRow16 stores them: all
// sixteen bytes when `whole`, else the lanes of `store`.
NEE_QREQUANT_TARGET inline __m128i Narrow16(__m512i v, bool y_signed) {
  __m128i bytes = y_signed ? _mm512_cvtsepi32_epi8(v) : _mm512_cvtusepi32_epi8(_mm512_max_epi32(v, _mm512_setzero_si512()));
  // vpmovdb into a register, then a store: its store form (masked or not) is far slower on Zen 4.
  __asm__("" : "+v"(bytes));
  return bytes;
}

NEE_QREQUANT_TARGET inline void StoreRow16(__m512i v, bool y_signed, __mmask16 store, bool whole, uint8_t* out) {
  const __m128i bytes = Narrow16(v, y_signed);
  if (whole)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
  else
    _mm_mask_storeu_epi8(out, store, bytes);
}

}  // namespace nee::cpu::qconv

#endif
