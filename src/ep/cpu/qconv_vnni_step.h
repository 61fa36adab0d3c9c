// One k quad of QLinearConv's VNNI tiles, shared by the GEMM path's tiles (qconv_vnni.cc, X from packed panels)
// and the direct path's (qconv_direct.cc, X from the interleaved image): kR output channels' weight quads
// broadcast (the first six from panel w0, the rest from w1) against kP vectors of sixteen pixels' quads, and
// the accumulators stored as s[panel][row][pixel] (kVnniRows rows a panel). Only for functions compiled for
// AVX-512 VNNI (they inline these).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ep/cpu/qconv_vnni.h"

namespace nee::cpu::qconv {

#define NEE_VNNI_STEP_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline

template <int kR, int kP>
NEE_VNNI_STEP_INLINE void VnniQuadStep(__m512i (&acc)[kR][kP], const __m512i (&xv)[kP], const int8_t* w0,
                                       const int8_t* w1) {
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r) {
    int32_t quad;
    std::memcpy(&quad, r < kRowsPerPanel ? w0 + 4 * r : w1 + 4 * (r - kRowsPerPanel), sizeof quad);
    const __m512i wv = _mm512_set1_epi32(quad);
#pragma GCC unroll 2
    for (int p = 0; p < kP; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], xv[p], wv);
  }
}

template <int kR, int kP>
NEE_VNNI_STEP_INLINE void StoreVnniSums(const __m512i (&acc)[kR][kP], int32_t* s) {
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < kP; ++p) _mm512_storeu_si512(s + (p * kVnniRows + r) * kCols, acc[r][p]);
}

#undef NEE_VNNI_STEP_INLINE

}  // namespace nee::cpu::qconv
#endif
