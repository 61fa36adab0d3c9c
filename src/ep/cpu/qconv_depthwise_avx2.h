// What the AVX2 depthwise QLinearConv kernels share (qconv_depthwise.cc's flat runs and sixteen-channel
// groups, qconv_depthwise_s2.cc's stride-2 rows): the requantization of sixteen int32 sums held as the
// 256-bit vpunpcklwd / vpunpckhwd (or vpunpcklbw / vpunpckhbw) of sixteen positions split them, lo =
// positions 0-3 and 8-11, hi = 4-7 and 12-15, into sixteen bytes in position order.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/qconv_common.h"

namespace nee::cpu::qconv {

// How a kernel requantizes: the reference's double arithmetic, clamped (any multipliers), or for small
// multipliers the float shortcut (RoundFma8), falling back to that arithmetic unclamped (see Requant).
// kFloatExact: small multipliers proven exact by one fma (Requant::float_exact, RoundingFmaExact).
enum class RequantMode { kDoubleClamped, kFloatShortcut, kFloatExact };

// Four sums to int32 as the reference rounds them: double(acc) * mult + yzp (no contraction: this target
// has no FMA), clamped unless the multipliers are small (see Requant), half to even.
template <bool kClamp>
__attribute__((target("avx2"))) inline __m128i Requant4(__m128i acc, __m256d mult, __m256d yzp, __m256d low,
                                                        __m256d high) {
  __m256d d = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(acc), mult), yzp);
  if (kClamp) {
    d = _mm256_min_pd(_mm256_max_pd(d, low), high);
    d = _mm256_round_pd(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  return _mm256_cvtpd_epi32(d);
}

// Sixteen sums (lo: positions 0-3 and 8-11, hi: 4-7 and 12-15, as vpunpck leaves them), the channel's
// constant included, requantized to sixteen bytes in position order.
template <bool kClamp>
__attribute__((target("avx2"))) inline __m128i Requant16(__m256i lo, __m256i hi, __m256d mult, __m256d yzp,
                                                         __m256d low, __m256d high, bool y_signed) {
  const __m128i w0 = _mm_packs_epi32(Requant4<kClamp>(_mm256_castsi256_si128(lo), mult, yzp, low, high),
                                     Requant4<kClamp>(_mm256_castsi256_si128(hi), mult, yzp, low, high));
  const __m128i w1 = _mm_packs_epi32(Requant4<kClamp>(_mm256_extracti128_si256(lo, 1), mult, yzp, low, high),
                                     Requant4<kClamp>(_mm256_extracti128_si256(hi, 1), mult, yzp, low, high));
  return y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
}

// The float shortcut, for small multipliers (every |mult| < 1/2), proven in qconv_requant_avx512.h
// (RequantRow16; the GEMM tiles of qconv_tile_avx2.cc take it too) to give the reference's bytes or to say
// it cannot: A = float(acc), L = fma(A, m, yzp - delta), H = fma(A, m, yzp + delta), delta = kFmaDelta, each
// rounded once; the reference's D = double(acc) * m + yzp lies strictly between them, so where L and H
// convert (half to even) to the same integer, D rounds to it too, and clamping commutes with that (the
// saturating packs clamp). Lanes whose two conversions differ (about 1 in 2000) send the whole vector to
// the double arithmetic. Eight sums: L converted, and which lanes agreed.
//
// kFmaDelta is 2^-13, a quarter of the AVX-512 kernels' 2^-11: where |E| <= 512 (E = acc * m + yzp exactly),
// |L - (E - delta)| <= 767 * 2^-24 (A's rounding) + 2^-15 (the fma's) < 7.7e-5 < 2^-13 = 1.2e-4, so L < D < H
// still, and yzp +- 2^-13 (an integer of at most 255 in magnitude) is exact in float (any delta from 7.7e-5 to
// 2^-11 works); a quarter of the near-ties fall back (with 2^-11 a 3x3 depthwise conv at 56x56 spent 3% of its
// time in the double arithmetic).
constexpr float kFmaDelta = 1.0f / 8192;
__attribute__((target("avx2,fma"), always_inline)) inline __m256i RoundFma8(__m256i acc, __m256 mult, __m256 z_lo,
                                                                            __m256 z_hi, __m256i* agree) {
  const __m256 a = _mm256_cvtepi32_ps(acc);
  const __m256i low = _mm256_cvtps_epi32(_mm256_fmadd_ps(a, mult, z_lo));
  *agree = _mm256_cmpeq_epi32(low, _mm256_cvtps_epi32(_mm256_fmadd_ps(a, mult, z_hi)));
  return low;
}

// Sixteen sums by the shortcut into 16 bytes at *bytes, signed or unsigned; false, *bytes untouched, where a
// lane needs the double arithmetic. lo and hi (each with its multipliers) hold them as the 256-bit
// unpacklo/unpackhi_epi16 of the products split them, so the packs put the sixteen back in order.
__attribute__((target("avx2,fma"), always_inline)) inline bool TryRoundFma16(__m256i lo, __m256i hi, __m256 mult_lo,
                                                                              __m256 mult_hi, __m256 z_lo,
                                                                              __m256 z_hi, bool y_signed,
                                                                              __m128i* bytes) {
  __m256i agree_lo, agree_hi;
  const __m256i r_lo = RoundFma8(lo, mult_lo, z_lo, z_hi, &agree_lo);
  const __m256i r_hi = RoundFma8(hi, mult_hi, z_lo, z_hi, &agree_hi);
  if (_mm256_movemask_epi8(_mm256_and_si256(agree_lo, agree_hi)) != -1) return false;
  const __m256i w = _mm256_packs_epi32(r_lo, r_hi);  // 0-7 | 8-15
  const __m128i w0 = _mm256_castsi256_si128(w), w1 = _mm256_extracti128_si256(w, 1);
  *bytes = y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
  return true;
}

// Sixteen sums (as TryRoundFma16 takes them) by one fma each where planning proved that exact for every sum
// (Requant::float_exact, RoundingFma8; z is yzp + kRoundingBias): no bracket, no compare, no fallback.
__attribute__((target("avx2,fma"), always_inline)) inline __m128i RoundFmaExact16(__m256i lo, __m256i hi,
                                                                                   __m256 mult_lo, __m256 mult_hi,
                                                                                   __m256 z, bool y_signed) {
  const __m256i w = _mm256_packs_epi32(RoundingFma8(lo, mult_lo, z), RoundingFma8(hi, mult_hi, z));
  const __m128i w0 = _mm256_castsi256_si128(w), w1 = _mm256_extracti128_si256(w, 1);
  return y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
}

// One channel's requantization of sixteen sums at a time (one multiplier for all sixteen), set up once
// per channel: the double arithmetic's constants and the float shortcut's.
struct ChannelRequant16 {
  __m256d mult, yzp, low, high;
  __m256 mult_f, z_lo, z_hi, z;
  bool y_signed;

  __attribute__((target("avx2"))) ChannelRequant16(double mult_value, const Requant& q)
      : mult(_mm256_set1_pd(mult_value)),
        yzp(_mm256_set1_pd(q.yzp)),
        low(_mm256_set1_pd(q.lo)),
        high(_mm256_set1_pd(q.hi)),
        mult_f(_mm256_set1_ps(static_cast<float>(mult_value))),
        z_lo(_mm256_set1_ps(static_cast<float>(q.yzp) - kFmaDelta)),
        z_hi(_mm256_set1_ps(static_cast<float>(q.yzp) + kFmaDelta)),
        z(_mm256_set1_ps(static_cast<float>(q.yzp) + kRoundingBias)),
        y_signed(q.y_signed) {}

  // lo and hi as TryRoundFma16 takes them, to sixteen bytes in position order: the shortcut where the
  // mode allows it and every lane agrees, else the double arithmetic (clamped in kDoubleClamped mode).
  template <RequantMode kMode>
  __attribute__((target("avx2,fma"), always_inline)) __m128i Bytes(__m256i lo, __m256i hi) const {
    __m128i bytes;
    if constexpr (kMode == RequantMode::kFloatExact) {
      bytes = RoundFmaExact16(lo, hi, mult_f, mult_f, z, y_signed);
    } else if constexpr (kMode == RequantMode::kFloatShortcut) {
      if (!TryRoundFma16(lo, hi, mult_f, mult_f, z_lo, z_hi, y_signed, &bytes))
        bytes = Requant16<false>(lo, hi, mult, yzp, low, high, y_signed);
    } else {
      bytes = Requant16<true>(lo, hi, mult, yzp, low, high, y_signed);
    }
    return bytes;
  }
};

}  // namespace nee::cpu::qconv
#endif
