// Small AVX2 helpers shared by the CPU provider's kernels. Only for use inside
// functions compiled with __attribute__((target("avx2,fma"))) and called after
// a run-time check that the CPU has AVX2 and FMA.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace nee::cpu {

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

// Whether this CPU can run the AVX2+FMA kernels.
inline bool CpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace nee::cpu
#endif
