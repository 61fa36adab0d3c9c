// The requantization of sixteen int32 sums on AVX-512 that QLinearConv's VNNI paths share (qconv_vnni.cc's
// tiles, qconv_depthwise_vnni.cc's depthwise rows): one fma where planning proved it exact (OneFma16), else the
// float shortcut, proven below, with the reference's double arithmetic where it cannot tell; and the saturating
// narrow-and-store. For small multipliers only (Requant::small_multipliers).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

#include "ep/cpu/qconv_common.h"

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

// The constants RequantRow16 and RequantRows4 add to the scaled sums: the bracket yzp -+ delta of the float
// shortcut (below), or, where planning proved the one-fma requantization exact for every channel of the node
// (Requant::float_exact, RoundingFmaExact), yzp + kRoundingBias and no bracket: then each sum takes one fma and
// one integer subtraction (OneFma16), with no second bound, compare or double fallback (the bytes are the
// reference's all the same).
struct RequantZ {
  __m512 lo, hi;  // yzp -+ delta as floats; with one_fma, both yzp + kRoundingBias
  __m512d z;      // yzp as doubles (the fallback's)
  bool one_fma;
};

NEE_QREQUANT_TARGET inline RequantZ MakeRequantZ(double yzp, bool one_fma) {
  const float z = static_cast<float>(yzp), delta = 1.0f / 2048;
  if (one_fma) {
    const __m512 biased = _mm512_set1_ps(z + kRoundingBias);
    return RequantZ{biased, biased, _mm512_set1_pd(yzp), true};
  }
  return RequantZ{_mm512_set1_ps(z - delta), _mm512_set1_ps(z + delta), _mm512_set1_pd(yzp), false};
}

// Sixteen sums (as floats) requantized by one fma, where planning proved it exact (RoundingFma).
NEE_QREQUANT_TARGET inline __m512i OneFma16(__m512 a, __m512 m, __m512 biased_yzp) {
  return _mm512_sub_epi32(_mm512_castps_si512(_mm512_fmadd_ps(a, m, biased_yzp)), _mm512_set1_epi32(kRoundingBits));
}

// One row's sixteen sums (its constant added) requantized to int32, by the float shortcut below where it can
// tell, else by the reference's double arithmetic.
//
// The shortcut (qconv_depthwise.cc's RoundFma8 and qconv_tile_avx2.cc on eight lanes): A = float(s),
// L = fma(A, m, yzp - delta) and H = fma(A, m, yzp + delta), each rounded once (yzp +- delta, an integer of
// at most 255 plus or minus 2^-11, is exact in float). The reference is D = double(s) * m + yzp in double,
// rounded half to even. Let E = s * m + yzp exactly. |A * m - s * m| <= |s * m| 2^-24 and L, H are within
// half an ulp of A * m + yzp -+ delta; where |E| <= 512, |s * m| <= 767, so L <= E - delta + 1.2e-4 and
// H >= E + delta - 1.2e-4, while |D - E| < 1e-12: D lies strictly inside (L, H). If L and H convert (half to
// even) to the same integer k, both lie in [k - 1/2, k + 1/2], so D lies strictly inside (k - 1/2, k + 1/2)
// and rounds to k. Where |E| > 512, D and L share a sign and exceed the output range by far, so both
// saturate to the same end when narrowed; small multipliers keep |L| < 2^31, so it converts. Lanes whose two
// conversions differ (ties and near-ties, about one row in a hundred) take the double arithmetic.
NEE_QREQUANT_TARGET inline __m512i RequantRow16(__m512i s, float mult_f, double mult, const RequantZ& z) {
  const __m512 a = _mm512_cvtepi32_ps(s), m = _mm512_set1_ps(mult_f);
  if (z.one_fma) return OneFma16(a, m, z.lo);
  const __m512i v = _mm512_cvtps_epi32(_mm512_fmadd_ps(a, m, z.lo));
  if (_mm512_cmpneq_epi32_mask(v, _mm512_cvtps_epi32(_mm512_fmadd_ps(a, m, z.hi))) == 0) return v;
  const __m512d md = _mm512_set1_pd(mult);
  return _mm512_inserti64x4(_mm512_castsi256_si512(RequantHalf(_mm512_castsi512_si256(s), md, z.z)),
                            RequantHalf(_mm512_extracti64x4_epi64(s, 1), md, z.z), 1);
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

// Four rows' int32 values narrowed with saturation by two packs (int32 -> int16 signed, then int16 -> 8 bits
// signed or unsigned: the same clamp as StoreRow16), where four vpmovdb would take eight uops. The packs work
// within 128-bit lanes, leaving row r's pixels 4l..4l+3 at dword 4l + r (StoreRows4x16 puts them in order).
NEE_QREQUANT_TARGET inline __m512i PackRows4(__m512i v0, __m512i v1, __m512i v2, __m512i v3, bool y_signed) {
  const __m512i w01 = _mm512_packs_epi32(v0, v1), w23 = _mm512_packs_epi32(v2, v3);
  return y_signed ? _mm512_packs_epi16(w01, w23) : _mm512_packus_epi16(w01, w23);
}

// PackRows4's bytes stored as four rows: one vpermd gathers each row's sixteen bytes into lane r.
NEE_QREQUANT_TARGET inline void StoreRows4x16(__m512i packed, uint8_t* out, int64_t ld) {
  const __m512i rows = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), packed);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_castsi512_si128(rows));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + ld), _mm512_extracti32x4_epi32(rows, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * ld), _mm512_extracti32x4_epi32(rows, 2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * ld), _mm512_extracti32x4_epi32(rows, 3));
}

// Four whole rows (their constants added): RequantRow16's bounds L and H for all four, narrowed, and compared
// once as bytes. Rounding and saturating are monotonic and L < D < H (RequantRow16), so where the bytes of L
// and H agree they are D's too (a bound may even differ before saturating). Rows whose bytes differ somewhere
// (rare) go through RequantRow16 again, which takes the double arithmetic where it must. With z.one_fma,
// OneFma16 alone (RequantZ).
NEE_QREQUANT_TARGET __attribute__((always_inline)) inline __m512i RequantRows4(const __m512i (&s)[4], const float* mult_f,
                                                                               const double* mult, const RequantZ& z,
                                                                               bool y_signed) {
  __m512 a[4];
  __m512i lo[4];
  if (z.one_fma) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) lo[r] = OneFma16(_mm512_cvtepi32_ps(s[r]), _mm512_set1_ps(mult_f[r]), z.lo);
    return PackRows4(lo[0], lo[1], lo[2], lo[3], y_signed);
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    a[r] = _mm512_cvtepi32_ps(s[r]);
    lo[r] = _mm512_cvtps_epi32(_mm512_fmadd_ps(a[r], _mm512_set1_ps(mult_f[r]), z.lo));
  }
  const __m512i bytes = PackRows4(lo[0], lo[1], lo[2], lo[3], y_signed);
  __m512i hi[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) hi[r] = _mm512_cvtps_epi32(_mm512_fmadd_ps(a[r], _mm512_set1_ps(mult_f[r]), z.hi));
  if (_mm512_cmpneq_epi8_mask(bytes, PackRows4(hi[0], hi[1], hi[2], hi[3], y_signed)) == 0) return bytes;
  return PackRows4(RequantRow16(s[0], mult_f[0], mult[0], z), RequantRow16(s[1], mult_f[1], mult[1], z),
                   RequantRow16(s[2], mult_f[2], mult[2], z), RequantRow16(s[3], mult_f[3], mult[3], z), y_signed);
}

}  // namespace nee::cpu::qconv

#endif
