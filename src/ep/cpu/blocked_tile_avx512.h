// What the AVX-512 tiles of the channel-blocked convolutions share
// (blocked_pointwise_avx512.cc, blocked_direct_avx512.cc,
// blocked_stem_avx512.cc): a zmm holds one pixel's sixteen channels of a pair
// of output blocks, stored as two halves a plane apart after the residual
// and the activation; and how a row of pixels is cut into tiles.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ops/blocked_conv.h"

namespace nee::cpu::blocked_tile {

using Kind = FusedActivation::Kind;

// The activations the tiles finish in registers (HardSwish: MobileNetV3's).
inline bool InRegisters(Kind kind) {
  return kind == Kind::kNone || kind == Kind::kRelu || kind == Kind::kClip || kind == Kind::kSilu ||
         kind == Kind::kHardSwish;
}

// Pixels the next tile covers of `left`, at most `widest`: a remainder just
// above the widest is split in two near halves (13 -> 7 + 6), not widest + a
// lone pixel, since a tile streams all its weights whatever its width.
inline int64_t TilePixels(int64_t left, int64_t widest) {
  if (left <= widest) return left;
  if (left < widest + widest / 2) return (left + 1) / 2;
  return widest;
}

}  // namespace nee::cpu::blocked_tile

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"

namespace nee::cpu::blocked_tile {

// A tile's activation as a type: `fn(KindOf<K>{})` for the activation the
// tile finishes in registers (InRegisters), so that its stores branch on it
// once, not once a vector (a 1x1 conv over 32 channels spent ~5% of its time
// on the per-vector switch). The code is the same size either way: every
// vector's store carries each activation's instructions.
template <Kind K>
using KindOf = std::integral_constant<Kind, K>;

// The attributes of the lambda WithActivation calls: inlined, on AVX-512.
#define NEE_TILE_STORES __attribute__((target("avx512f,avx512dq"), always_inline))

template <typename Fn>
NEE_TILE_STORES inline void WithActivation(Kind kind, Fn&& fn) {
  switch (kind) {
    case Kind::kRelu: return fn(KindOf<Kind::kRelu>{});
    case Kind::kClip: return fn(KindOf<Kind::kClip>{});
    case Kind::kSilu: return fn(KindOf<Kind::kSilu>{});
    case Kind::kHardSwish: return fn(KindOf<Kind::kHardSwish>{});
    default: return fn(KindOf<Kind::kNone>{});
  }
}

template <Kind K>
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512 Activate(const FusedActivation& act,
                                                                                  __m512 v) {
  if constexpr (K == Kind::kNone) return v;
  else return Activate16<K>(act, v);
}

// One finished vector: (v + z) then the activation K, its low half to y + lo
// (block 2j's pixel), its high half to y + hi (block 2j + 1's, absent for the
// last pair of an odd block count: `has_high`).
template <Kind K>
__attribute__((target("avx512f,avx512dq"), always_inline)) inline void StorePair(const FusedActivation& act, float* y,
                                                                                  const float* z, int64_t lo,
                                                                                  int64_t hi, bool has_high, __m512 v) {
  if (z) {
    __m512 r = _mm512_castps256_ps512(_mm256_loadu_ps(z + lo));
    if (has_high) r = _mm512_insertf32x8(r, _mm256_loadu_ps(z + hi), 1);
    v = _mm512_add_ps(v, r);
  }
  v = Activate<K>(act, v);
  _mm256_storeu_ps(y + lo, _mm512_castps512_ps256(v));
  if (has_high) _mm256_storeu_ps(y + hi, _mm512_extractf32x8_ps(v, 1));
}

}  // namespace nee::cpu::blocked_tile
#endif
