// One k quad of QLinearConv's VNNI tiles, shared by the GEMM path's tiles (qconv_vnni.cc, X from packed panels)
// and the direct path's (qconv_direct.cc, X from the interleaved image): kR output channels' weight quads
// broadcast (the first six from panel w0, the rest from w1) against kP vectors of sixteen pixels' quads, and
// the accumulators stored as s[panel][row][pixel] (kVnniRows rows a panel), or, for whole tiles, requantized in
// registers and stored as output bytes. Only for functions compiled for AVX-512 VNNI (they inline these).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ep/cpu/qconv_requant_avx512.h"
#include "ep/cpu/qconv_vnni.h"

namespace nee::cpu::qconv {

#define NEE_VNNI_STEP_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline

template <int kR, int kP>
NEE_VNNI_STEP_INLINE void ZeroVnniAcc(__m512i (&acc)[kR][kP]) {
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < kP; ++p) acc[r][p] = _mm512_setzero_si512();
}

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

// A whole tile (kVnniRows rows of kP full pixel panels, constants in acc already)
// requantized in registers and stored as bytes, four rows of a panel at a time by RequantRows4 - what
// FinishTilesAvx512 does to whole rows, so the same bytes - without the sums' round trip through memory
// (with K = 64, requantizing took half as long as the products). Rows m0.. of q, stored at out, rows ld apart.
template <int kP>
NEE_VNNI_STEP_INLINE void RequantStoreVnniTile(const __m512i (&acc)[kVnniRows][kP], const VnniTileOut& o) {
  const Requant& q = *o.q;
  const RequantZ z = MakeRequantZ(q.yzp, q.float_exact);
  const float* mult_f = q.mult_f + o.m0;
  const double* mult = q.mult + o.m0;
#pragma GCC unroll 3
  for (int r = 0; r < kVnniRows; r += 4)
#pragma GCC unroll 2
    for (int p = 0; p < kP; ++p) {
      const __m512i s[4] = {acc[r][p], acc[r + 1][p], acc[r + 2][p], acc[r + 3][p]};
      StoreRows4x16(RequantRows4(s, mult_f + r, mult + r, z, q.y_signed), o.out + r * o.ld + p * kCols,
                    o.ld);
    }
}

#undef NEE_VNNI_STEP_INLINE

}  // namespace nee::cpu::qconv
#endif
