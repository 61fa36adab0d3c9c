// The register-level pieces of Winograd F(4x4, 3x3) on AVX2 (see
// conv_winograd43.cc, the only includer): lane masks, the 6-point
// transforms with the points 0, 1, -1, 1/2, -2, and the transposes that
// turn input rows into columns of eight tiles and back.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ep/cpu/simd_x86.h"

#define NEE_AVX2 __attribute__((target("avx2,fma")))
#define NEE_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

namespace nee::cpu::winograd43 {

// Of a 4-float chunk at column `start`, the lanes in [0, W) (as LanesBetween8
// in simd_x86.h, for four lanes).
NEE_AVX2 inline __m128i ColumnsInside4(int64_t start, int64_t width) {
  const __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
  const int64_t lo = std::clamp<int64_t>(-start, 0, 4), hi = std::clamp<int64_t>(width - start, 0, 4);
  const __m128i above_lo = _mm_cmpgt_epi32(lane, _mm_set1_epi32(static_cast<int>(lo) - 1));
  const __m128i below_hi = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(hi)), lane);
  return _mm_and_si128(above_lo, below_hi);
}

// Bᵀ applied to six vectors (d[0] .. d[5], one per tile row or column).
NEE_AVX2_INLINE void TransformInput6(const __m256 d[6], __m256 r[6]) {
  const __m256 two = _mm256_set1_ps(2.f), half = _mm256_set1_ps(0.5f), three_halves = _mm256_set1_ps(1.5f);
  const __m256 five_halves = _mm256_set1_ps(2.5f);
  const __m256 d31 = _mm256_sub_ps(d[3], d[1]), d42 = _mm256_sub_ps(d[4], d[2]);
  r[0] = _mm256_fmadd_ps(three_halves, d31, _mm256_fnmadd_ps(two, d[2], _mm256_add_ps(d[0], d[4])));
  r[1] = _mm256_fmadd_ps(five_halves, d[3], _mm256_fmadd_ps(half, d[2], _mm256_sub_ps(d[4], d[1])));
  r[2] = _mm256_fnmadd_ps(five_halves, d[2], _mm256_fmadd_ps(half, d[3], _mm256_add_ps(d[4], d[1])));
  r[3] = _mm256_fmadd_ps(two, d31, d42);
  r[4] = _mm256_fnmadd_ps(half, d31, d42);
  r[5] = _mm256_fmadd_ps(three_halves, d42, _mm256_fnmadd_ps(two, d[3], _mm256_add_ps(d[5], d[1])));
}

// Aᵀ applied to six vectors m[0] .. m[5] (stride `step` apart).
NEE_AVX2_INLINE void TransformOutput6(const __m256* m, int step, __m256 o[4]) {
  const __m256 m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
  const __m256 p = _mm256_add_ps(m1, m2), q = _mm256_sub_ps(m1, m2);
  o[0] = _mm256_add_ps(_mm256_add_ps(m0, p), _mm256_add_ps(m3, m4));
  o[1] = _mm256_fmadd_ps(_mm256_set1_ps(0.5f), m3, _mm256_fnmadd_ps(_mm256_set1_ps(2.f), m4, q));
  o[2] = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), m3, _mm256_fmadd_ps(_mm256_set1_ps(4.f), m4, p));
  o[3] = _mm256_fmadd_ps(_mm256_set1_ps(0.125f), m3, _mm256_fnmadd_ps(_mm256_set1_ps(8.f), m4, _mm256_add_ps(q, m5)));
}

// Columns 0..5 of the tiles of one input row: p[j] lane 4h + t =
// row[h][4t + j], zero outside [0, W) (masks[h][i]: the lanes of chunk i of
// half h, columns 4i .. 4i + 3 from row[h], that are inside; not read with
// kInside, where every column is). Chunk i of both halves makes one
// vector, so a transpose of 4x4 blocks within each 128-bit half puts the
// tiles in order.
template <bool kInside>
NEE_AVX2_INLINE __m256 Chunks(const float* const row[2], const __m128i* const masks[2], int i) {
  if (kInside) return _mm256_loadu2_m128(row[1] + 4 * i, row[0] + 4 * i);
  return _mm256_set_m128(_mm_maskload_ps(row[1] + 4 * i, masks[1][i]), _mm_maskload_ps(row[0] + 4 * i, masks[0][i]));
}

template <bool kInside>
NEE_AVX2_INLINE void LoadTileColumns(const float* const row[2], const __m128i* const masks[2], __m256 p[6]) {
  const __m256 a = Chunks<kInside>(row, masks, 0), b = Chunks<kInside>(row, masks, 1);
  const __m256 c = Chunks<kInside>(row, masks, 2), d = Chunks<kInside>(row, masks, 3);
  const __m256 e = Chunks<kInside>(row, masks, 4);
  const __m256d ab_lo = _mm256_castps_pd(_mm256_unpacklo_ps(a, b)), ab_hi = _mm256_castps_pd(_mm256_unpackhi_ps(a, b));
  const __m256d cd_lo = _mm256_castps_pd(_mm256_unpacklo_ps(c, d)), cd_hi = _mm256_castps_pd(_mm256_unpackhi_ps(c, d));
  p[0] = _mm256_castpd_ps(_mm256_unpacklo_pd(ab_lo, cd_lo));
  p[1] = _mm256_castpd_ps(_mm256_unpackhi_pd(ab_lo, cd_lo));
  p[2] = _mm256_castpd_ps(_mm256_unpacklo_pd(ab_hi, cd_hi));
  p[3] = _mm256_castpd_ps(_mm256_unpackhi_pd(ab_hi, cd_hi));
  // Columns 4 and 5 are columns 0 and 1 of the next tile: chunks 1 .. 4.
  const __m256d bc_lo = _mm256_castps_pd(_mm256_unpacklo_ps(b, c)), de_lo = _mm256_castps_pd(_mm256_unpacklo_ps(d, e));
  p[4] = _mm256_castpd_ps(_mm256_unpacklo_pd(bc_lo, de_lo));
  p[5] = _mm256_castpd_ps(_mm256_unpackhi_pd(bc_lo, de_lo));
}

// The first k <= 8 floats at p (mask: lanes below k), the rest zero.
NEE_AVX2_INLINE __m256 LoadFirst8(const float* p, int64_t k, __m256i mask) {
  return k == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

// Output columns 0..3 of the tiles (y[j] lane 4h + t: column 4t + j of half
// h) written as 16 consecutive floats from row[h], those below width[h]:
// the inverse of LoadTileColumns' transpose.
NEE_AVX2_INLINE void StoreTileColumns(const __m256 y[4], float* const row[2], const int64_t width[2]) {
  const __m256d lo01 = _mm256_castps_pd(_mm256_unpacklo_ps(y[0], y[1])),
                hi01 = _mm256_castps_pd(_mm256_unpackhi_ps(y[0], y[1]));
  const __m256d lo23 = _mm256_castps_pd(_mm256_unpacklo_ps(y[2], y[3])),
                hi23 = _mm256_castps_pd(_mm256_unpackhi_ps(y[2], y[3]));
  const __m256 t04 = _mm256_castpd_ps(_mm256_unpacklo_pd(lo01, lo23)),
               t15 = _mm256_castpd_ps(_mm256_unpackhi_pd(lo01, lo23));
  const __m256 t26 = _mm256_castpd_ps(_mm256_unpacklo_pd(hi01, hi23)),
               t37 = _mm256_castpd_ps(_mm256_unpackhi_pd(hi01, hi23));
  const __m256 out[2][2] = {{_mm256_permute2f128_ps(t04, t15, 0x20), _mm256_permute2f128_ps(t26, t37, 0x20)},
                            {_mm256_permute2f128_ps(t04, t15, 0x31), _mm256_permute2f128_ps(t26, t37, 0x31)}};
  for (int h = 0; h < 2; ++h) {
    if (width[h] >= 16) {
      _mm256_storeu_ps(row[h], out[h][0]);
      _mm256_storeu_ps(row[h] + 8, out[h][1]);
      continue;
    }
    for (int q = 0; q < 2 && 8 * q < width[h]; ++q)
      _mm256_maskstore_ps(row[h] + 8 * q, LanesBetween8(0, width[h] - 8 * q), out[h][q]);
  }
}

}  // namespace nee::cpu::winograd43

#endif  // x86
