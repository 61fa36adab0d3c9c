// A 16x16 float32 transpose in AVX-512 registers, shared by the kernels that
// move sixteen channel planes into pixel-major lanes and back (the NCHW
// depthwise path of depthwise_blocked.cc, the bfloat16 depthwise conv of
// conv_bf16.cc). Include only in files compiled for x86-64; the function
// carries its own target attribute and is called after a check that the CPU
// has AVX-512F.
#pragma once
#include <immintrin.h>

namespace nee::cpu {

// r[i] becomes column i of the 16x16 matrix whose rows were r[0..15].
__attribute__((target("avx512f"), always_inline)) inline void Transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + j] holds, in each 128-bit lane L, element 4L + j of rows 4i..4i+3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d lo0 = _mm512_castps_pd(a[4 * i]), hi0 = _mm512_castps_pd(a[4 * i + 1]);
    const __m512d lo1 = _mm512_castps_pd(a[4 * i + 2]), hi1 = _mm512_castps_pd(a[4 * i + 3]);
    b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  // Gather lane L of the four groups: column 4L + j.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 u = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x44), v = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x44);
    const __m512 u2 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xEE), v2 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xEE);
    r[j] = _mm512_shuffle_f32x4(u, v, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(u, v, 0xDD);
    r[8 + j] = _mm512_shuffle_f32x4(u2, v2, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(u2, v2, 0xDD);
  }
}

}  // namespace nee::cpu
