// FusedConv's activations on eight floats with AVX2 and on sixteen with
// AVX-512 (all of them), with the same operations per lane, so every path
// gives the same bits. Kernels apply them to results still in
// registers (Winograd's output transform, the depthwise kernels) or in L1
// (the SGEMM epilogue, fused_conv_fast.cc).
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <type_traits>

#include "ep/cpu/simd_math.h"
#include "ops/fused_conv.h"

// GCC 12 warns about the _mm512_undefined_ps() inside _mm512_max_ps and
// friends once they are inlined into the kernels that include this header
// (their templates over Activate16): a false positive, silenced for them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace nee::cpu {

// Whether Activate16 computes `kind` (all of them since Tanh16; kept for the
// kernels that ask).
constexpr bool HasActivate16(FusedActivation::Kind kind) {
  using K = FusedActivation::Kind;
  return kind == K::kNone || kind == K::kRelu || kind == K::kClip || kind == K::kLeakyRelu ||
         kind == K::kHardSigmoid || kind == K::kHardSwish || kind == K::kSigmoid || kind == K::kSilu ||
         kind == K::kTanh;
}

// make(std::integral_constant<Kind, K>{}) for the K equal to `kind` when
// Activate16 computes it, `otherwise` for the rest (none now): the one switch for
// every kernel instantiated per activation, to pick its instance at run time.
template <typename Make, typename R>
R ForActivation16(FusedActivation::Kind kind, Make&& make, R otherwise) {
  using K = FusedActivation::Kind;
  switch (kind) {
    case K::kNone: return make(std::integral_constant<K, K::kNone>{});
    case K::kRelu: return make(std::integral_constant<K, K::kRelu>{});
    case K::kClip: return make(std::integral_constant<K, K::kClip>{});
    case K::kLeakyRelu: return make(std::integral_constant<K, K::kLeakyRelu>{});
    case K::kHardSigmoid: return make(std::integral_constant<K, K::kHardSigmoid>{});
    case K::kHardSwish: return make(std::integral_constant<K, K::kHardSwish>{});
    case K::kSigmoid: return make(std::integral_constant<K, K::kSigmoid>{});
    case K::kSilu: return make(std::integral_constant<K, K::kSilu>{});
    case K::kTanh: return make(std::integral_constant<K, K::kTanh>{});
    default: return otherwise;
  }
}

// make(std::integral_constant<Kind, K>{}) for the K equal to `kind`: every
// activation has an eight-lane version.
template <typename Make>
auto ForActivation8(FusedActivation::Kind kind, Make&& make) {
  using K = FusedActivation::Kind;
  if (kind == K::kTanh) return make(std::integral_constant<K, K::kTanh>{});
  return ForActivation16(kind, make, make(std::integral_constant<K, K::kNone>{}));
}

// max_ps(a, b) returns b when either is NaN, so every bound goes first: NaN
// inputs stay NaN, as in the reference.
template <FusedActivation::Kind K>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate8(const FusedActivation& act, __m256 x) {
  using Kind = FusedActivation::Kind;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  if constexpr (K == Kind::kRelu) return _mm256_max_ps(zero, x);
  if constexpr (K == Kind::kClip) return _mm256_min_ps(_mm256_set1_ps(act.b), _mm256_max_ps(_mm256_set1_ps(act.a), x));
  if constexpr (K == Kind::kLeakyRelu)
    return _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
  if constexpr (K == Kind::kHardSigmoid) {
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_set1_ps(act.b));
    return _mm256_min_ps(one, _mm256_max_ps(zero, v));
  }
  if constexpr (K == Kind::kHardSwish) {
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.f / 6.f)), _mm256_set1_ps(0.5f));
    return _mm256_mul_ps(x, _mm256_min_ps(one, _mm256_max_ps(zero, v)));
  }
  if constexpr (K == Kind::kSigmoid) return Sigmoid8(x);
  if constexpr (K == Kind::kSilu) return _mm256_mul_ps(x, Sigmoid8(x));
  if constexpr (K == Kind::kTanh) return Tanh8(x);
  return x;
}

// max_ps(a, b) returns b when either is NaN, so every bound goes first: NaN
// inputs stay NaN, as in the reference.
template <FusedActivation::Kind K>
__attribute__((target("avx512f"), always_inline)) inline __m512 Activate16(const FusedActivation& act, __m512 x) {
  using Kind = FusedActivation::Kind;
  static_assert(HasActivate16(K), "an activation without a sixteen-lane version");
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
  if constexpr (K == Kind::kRelu) return _mm512_max_ps(zero, x);
  if constexpr (K == Kind::kClip) return _mm512_min_ps(_mm512_set1_ps(act.b), _mm512_max_ps(_mm512_set1_ps(act.a), x));
  if constexpr (K == Kind::kLeakyRelu)
    return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, _mm512_set1_ps(act.a));
  if constexpr (K == Kind::kHardSigmoid) {
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(act.a)), _mm512_set1_ps(act.b));
    return _mm512_min_ps(one, _mm512_max_ps(zero, v));
  }
  if constexpr (K == Kind::kHardSwish) {
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.f / 6.f)), _mm512_set1_ps(0.5f));
    return _mm512_mul_ps(x, _mm512_min_ps(one, _mm512_max_ps(zero, v)));
  }
  if constexpr (K == Kind::kSigmoid) return Sigmoid16(x);
  if constexpr (K == Kind::kSilu) return _mm512_mul_ps(x, Sigmoid16(x));
  if constexpr (K == Kind::kTanh) return Tanh16(x);
  return x;
}

}  // namespace nee::cpu
#endif
