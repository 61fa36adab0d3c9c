// Small AVX2 helpers shared by the CPU provider's kernels. Only for use inside
// functions compiled with __attribute__((target("avx2,fma"))) and called after
// a run-time check that the CPU has AVX2 and FMA.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace nee::cpu {

// All ones in lanes [lo, hi) of eight, as AVX2's masked loads and stores
// take their masks (lo and hi clamped to [0, 8]).
__attribute__((target("avx2,fma"))) inline __m256i LanesBetween8(int64_t lo, int64_t hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  lo = std::clamp<int64_t>(lo, 0, 8), hi = std::clamp<int64_t>(hi, 0, 8);
  const __m256i above_lo = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1));
  const __m256i below_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane);
  return _mm256_and_si256(above_lo, below_hi);
}

// Eight consecutive output columns' inputs for one window tap: src[0],
// src[stride], ..., src[7 * stride], for stride 1 or 2. Stride 2 loads
// sixteen floats (src[15] must be readable) and keeps the even ones.
template <int kStride>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 LoadStrided8(const float* src) {
  static_assert(kStride == 1 || kStride == 2, "strides 1 and 2 only");
  if constexpr (kStride == 1) {
    return _mm256_loadu_ps(src);
  } else {
    const __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + 8);
    // [l0 l2 h0 h2 | l4 l6 h4 h6] -> [l0 l2 l4 l6 h0 h2 h4 h6]
    const __m256 evens = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(evens), _MM_SHUFFLE(3, 1, 2, 0)));
  }
}

// out[j] = column j of the 8x8 tile at x (row stride ldx, elements): the
// transpose, left in registers. Every loop is unrolled: otherwise GCC keeps
// r and t in memory (stack spills and loop counters were most of the time on
// a detector head's transposes).
__attribute__((target("avx2"), always_inline)) inline void Transpose8x8ToRegs(const float* x, int64_t ldx,
                                                                              __m256 out[8]) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + i * ldx);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));      // a0 b0 c0 d0 | a4 ..
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));  // a1 b1 c1 d1 | a5 ..
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
    out[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
  }
}

// y[j][i] = x[i][j] for an 8x8 tile; x has row stride ldx, y ldy (elements).
__attribute__((target("avx2"))) inline void Transpose8x8Avx2(const float* x, int64_t ldx, float* y,
                                                               int64_t ldy) {
  __m256 out[8];
  Transpose8x8ToRegs(x, ldx, out);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(y + j * ldy, out[j]);
}

// Eight columns of k contiguous floats each, `ldx` apart, written as k rows
// of eight floats, `ldy` apart: y[p * ldy + c] = x[c * ldx + p]. Eight steps
// of p at a time through the 8x8 transpose (each column read in runs, each
// row written whole), the last k % 8 one float at a time. For weights packed
// into panels whose rows hold a run of columns.
__attribute__((target("avx2"))) inline void TransposeColumns8Avx2(const float* x, int64_t ldx, int64_t k, float* y,
                                                                    int64_t ldy) {
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) Transpose8x8Avx2(x + p, ldx, y + p * ldy, ldy);
  for (; p < k; ++p)
    for (int64_t c = 0; c < 8; ++c) y[p * ldy + c] = x[c * ldx + p];
}

// Whether this CPU can run the AVX2+FMA kernels.
inline bool CpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace nee::cpu
#endif
