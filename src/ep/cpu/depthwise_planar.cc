// Depthwise 2-D convolution on NCHW planes, sixteen output columns per
// AVX-512 vector (eight per AVX2 vector), for 3x3 and 5x5 kernels with
// stride 1 or 2.
//
// The channel-blocked kernel (depthwise_blocked.cc) fills its vectors on any
// plane, but must transpose the input into pixel-major order and the output
// back: on the wide planes of a mobile network's first layers those two
// transposes cost three times the arithmetic. Here a vector holds sixteen
// neighbouring output columns of one channel, so input and output stay where
// they are:
//  - each tap of an output vector is one load from the input row (stride 1),
//    or two loads and an even-lane permute (stride 2); lanes that fall in the
//    padding are masked to zero, so there is no padded copy either;
//  - the kernel's weights sit in registers for the whole plane;
//  - bias, and the FusedConv activation when it has a sixteen-lane form and
//    there is no residual, are applied before the store.
// Narrow planes waste lanes here, so the caller picks this kernel only when
// the output rows are wide (DepthwisePlanarApplies).
//
// Each output is bias + its taps in (kh, kw) order (padding taps add w * 0),
// computed by exactly one task: results do not depend on the thread count.
#include <algorithm>

#include "ep/cpu/depthwise_blocked.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_PLANAR_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kLanes = 16;  // AVX-512; AVX2 has kLanes8
constexpr int64_t kLanes8 = 8;
// Output rows per task at most: enough work per task to amortize loading the
// weights, small enough that a layer with few channels still splits.
constexpr int64_t kRowsPerTask = 8;  // a multiple of the row blocks (4, 2)

#ifdef NEE_PLANAR_X86
#define NEE_AVX512 __attribute__((target("avx512f")))

// Lanes e in [0, 16) whose input column start + e lies in [0, width).
NEE_AVX512 inline __mmask16 InsideLanes(int64_t start, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, kLanes), hi = std::clamp<int64_t>(width - start, 0, kLanes);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

// The input values tap column `start` (of lane 0) feeds the sixteen lanes:
// row[start + e * S] for lane e, zero outside [0, width).
template <int S>
NEE_AVX512 inline __m512 TapVector(const float* row, int64_t start, int64_t width) {
  if constexpr (S == 1) {
    if (start >= 0 && start + kLanes <= width) return _mm512_loadu_ps(row + start);
    return _mm512_maskz_loadu_ps(InsideLanes(start, width), row + start);
  } else {
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512 lo, hi;
    if (start >= 0 && start + 2 * kLanes <= width) {
      lo = _mm512_loadu_ps(row + start);
      hi = _mm512_loadu_ps(row + start + kLanes);
    } else {
      lo = _mm512_maskz_loadu_ps(InsideLanes(start, width), row + start);
      hi = _mm512_maskz_loadu_ps(InsideLanes(start + kLanes, width), row + start + kLanes);
    }
    return _mm512_permutex2var_ps(lo, evens, hi);
  }
}

// R output rows from oh, the vector of columns [ow, ow + 16): the rows' taps
// read (R - 1) * S + kK input rows, each loaded once per kw and used by every
// output row it feeds, and the R sums are independent chains, which hides the
// FMA latency. For each output row the taps still arrive in (kh, kw) order.
template <FusedActivation::Kind K, int kK, int S, int R>
NEE_AVX512 inline void RowBlock(const Depthwise2D& g, const float* x, const __m512* wv, __m512 bias,
                                const FusedActivation& act, int64_t oh, int64_t ow, float* y) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = bias;
  const int64_t col0 = ow * S - g.pw;  // input column of lane 0, tap kw = 0
  constexpr int kInputRows = (R - 1) * S + kK;
#pragma GCC unroll 9
  for (int i = 0; i < kInputRows; ++i) {
    const int64_t ih = oh * S - g.ph + i;
    const bool inside = ih >= 0 && ih < g.H;
    const float* row = x + ih * g.W;
#pragma GCC unroll 5
    for (int kw = 0; kw < kK; ++kw) {
      // A padding row adds w * 0 to its outputs, as the reference does.
      const __m512 v = inside ? TapVector<S>(row, col0 + kw, g.W) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int kh = i - r * S;
        if (kh >= 0 && kh < kK) acc[r] = _mm512_fmadd_ps(v, wv[kh * kK + kw], acc[r]);
      }
    }
  }
  const int64_t n = std::min(kLanes, g.OW - ow);
  const __mmask16 store = n == kLanes ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (oh + r) * g.OW + ow, store, Activate16<K>(act, acc[r]));
}

// Output rows [oh0, oh1) of one plane. kK: the (square) kernel size; S: the
// stride (both axes); K: the activation applied before the store.
template <FusedActivation::Kind K, int kK, int S>
NEE_AVX512 void PlaneRows(const Depthwise2D& g, const float* x, const float* w, float bias,
                          const FusedActivation& act, int64_t oh0, int64_t oh1, float* y) {
  constexpr int kBlock = S == 1 ? 4 : 2;
  __m512 wv[kK * kK];
#pragma GCC unroll 25
  for (int t = 0; t < kK * kK; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 b = _mm512_set1_ps(bias);
  int64_t oh = oh0;
  for (; oh + kBlock <= oh1; oh += kBlock)
    for (int64_t ow = 0; ow < g.OW; ow += kLanes) RowBlock<K, kK, S, kBlock>(g, x, wv, b, act, oh, ow, y);
  for (; oh < oh1; ++oh)
    for (int64_t ow = 0; ow < g.OW; ow += kLanes) RowBlock<K, kK, S, 1>(g, x, wv, b, act, oh, ow, y);
}

using PlaneRowsFn = void (*)(const Depthwise2D&, const float*, const float*, float, const FusedActivation&, int64_t,
                             int64_t, float*);

template <FusedActivation::Kind K>
PlaneRowsFn ForGeometry(const Depthwise2D& g) {
  if (g.KH == 3 && g.sh == 1) return PlaneRows<K, 3, 1>;
  if (g.KH == 3 && g.sh == 2) return PlaneRows<K, 3, 2>;
  if (g.KH == 5 && g.sh == 1) return PlaneRows<K, 5, 1>;
  if (g.KH == 5 && g.sh == 2) return PlaneRows<K, 5, 2>;
  return nullptr;
}


// ---- AVX2: the same kernel, eight columns per vector -----------------------

#define NEE_AVX2 __attribute__((target("avx2,fma")))

// Lanes e in [0, 8) whose input column start + e lies in [0, width), as
// AVX2's masked loads take them.
NEE_AVX2 inline __m256i InsideLanes8(int64_t start, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, kLanes8), hi = std::clamp<int64_t>(width - start, 0, kLanes8);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane));
}

template <int S>
NEE_AVX2 inline __m256 TapVector8(const float* row, int64_t start, int64_t width) {
  if constexpr (S == 1) {
    if (start >= 0 && start + kLanes8 <= width) return _mm256_loadu_ps(row + start);
    return _mm256_maskload_ps(row + start, InsideLanes8(start, width));
  } else {
    __m256 lo, hi;
    if (start >= 0 && start + 2 * kLanes8 <= width) {
      lo = _mm256_loadu_ps(row + start);
      hi = _mm256_loadu_ps(row + start + kLanes8);
    } else {
      lo = _mm256_maskload_ps(row + start, InsideLanes8(start, width));
      hi = _mm256_maskload_ps(row + start + kLanes8, InsideLanes8(start + kLanes8, width));
    }
    // Even lanes of lo:hi: shuffle_ps picks within 128-bit halves, then the
    // 64-bit pairs are put in order.
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  }
}

template <FusedActivation::Kind K, int kK, int S, int R>
NEE_AVX2 inline void RowBlock8(const Depthwise2D& g, const float* x, const __m256* wv, __m256 bias,
                               const FusedActivation& act, int64_t oh, int64_t ow, float* y) {
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = bias;
  const int64_t col0 = ow * S - g.pw;
  constexpr int kInputRows = (R - 1) * S + kK;
#pragma GCC unroll 9
  for (int i = 0; i < kInputRows; ++i) {
    const int64_t ih = oh * S - g.ph + i;
    const bool inside = ih >= 0 && ih < g.H;
    const float* row = x + ih * g.W;
#pragma GCC unroll 5
    for (int kw = 0; kw < kK; ++kw) {
      const __m256 v = inside ? TapVector8<S>(row, col0 + kw, g.W) : _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int kh = i - r * S;
        if (kh >= 0 && kh < kK) acc[r] = _mm256_fmadd_ps(v, wv[kh * kK + kw], acc[r]);
      }
    }
  }
  const int64_t n = std::min(kLanes8, g.OW - ow);
  // Masked stores are slow on some CPUs: only a row's last, partial vector takes one.
  const __m256i store = InsideLanes8(0, n);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float* out = y + (oh + r) * g.OW + ow;
    const __m256 v = Activate8<K>(act, acc[r]);
    if (n == kLanes8) _mm256_storeu_ps(out, v);
    else _mm256_maskstore_ps(out, store, v);
  }
}

template <FusedActivation::Kind K, int kK, int S>
NEE_AVX2 void PlaneRows8(const Depthwise2D& g, const float* x, const float* w, float bias, const FusedActivation& act,
                         int64_t oh0, int64_t oh1, float* y) {
  constexpr int kBlock = S == 1 ? 4 : 2;
  __m256 wv[kK * kK];
#pragma GCC unroll 25
  for (int t = 0; t < kK * kK; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 b = _mm256_set1_ps(bias);
  int64_t oh = oh0;
  for (; oh + kBlock <= oh1; oh += kBlock)
    for (int64_t ow = 0; ow < g.OW; ow += kLanes8) RowBlock8<K, kK, S, kBlock>(g, x, wv, b, act, oh, ow, y);
  for (; oh < oh1; ++oh)
    for (int64_t ow = 0; ow < g.OW; ow += kLanes8) RowBlock8<K, kK, S, 1>(g, x, wv, b, act, oh, ow, y);
}

template <FusedActivation::Kind K>
PlaneRowsFn ForGeometry8(const Depthwise2D& g) {
  if (g.KH == 3 && g.sh == 1) return PlaneRows8<K, 3, 1>;
  if (g.KH == 3 && g.sh == 2) return PlaneRows8<K, 3, 2>;
  if (g.KH == 5 && g.sh == 1) return PlaneRows8<K, 5, 1>;
  if (g.KH == 5 && g.sh == 2) return PlaneRows8<K, 5, 2>;
  return nullptr;
}

bool UseAvx512() { return SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced(); }
bool UseAvx2() { return SgemmActiveIsa() == SgemmIsa::kAvx2 && !SgemmPortableForced(); }

// The kernel with the activation in registers, or with none when the
// epilogue must run after the rows (a residual first, or Tanh with AVX-512).
PlaneRowsFn SelectPlaneRows(const Depthwise2D& g, const FusedActivation& act, bool has_residual) {
  using Kind = FusedActivation::Kind;
  if (!UseAvx512()) {
    return ForActivation8(has_residual ? Kind::kNone : act.kind,
                          [&](auto k) { return ForGeometry8<decltype(k)::value>(g); });
  }
  const PlaneRowsFn plain = ForGeometry<Kind::kNone>(g);
  if (has_residual) return plain;
  return ForActivation16(
      act.kind, [&](auto k) { return ForGeometry<decltype(k)::value>(g); }, plain);
}
#endif  // NEE_PLANAR_X86

}  // namespace

bool DepthwisePlanarApplies(const Depthwise2D& g) {
#ifdef NEE_PLANAR_X86
  // AVX-512: rows of 12 or more columns fill most of a vector; narrower ones
  // are the channel-blocked kernel's (MobileNetV2's layers, 1 thread: 112
  // wide 2.2x faster here, 56 1.7x, 28 1.4x, 14 1.1x; 7 wide 1.4x slower).
  // AVX2 (eight lanes; 1 thread, MobileNetV2's shapes): here 2.3x faster
  // than the channel-blocked kernel on 112-wide rows, 1.9x on 28; on 14- and
  // 7-wide rows the blocked kernel is 5-30% faster.
  const bool square = g.KH == g.KW && g.sh == g.sw && g.dh == 1 && g.dw == 1;
  const bool shape = square && (g.KH == 3 || g.KH == 5) && (g.sh == 1 || g.sh == 2);
  if (UseAvx512()) return shape && g.OW >= 12;
  return UseAvx2() && shape && g.OW >= 20;
#else
  (void)g;
  return false;
#endif
}

void DepthwisePlanar(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                     const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_PLANAR_X86
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const bool finish_after = z || (UseAvx512() && !HasActivate16(act.kind));
  const PlaneRowsFn rows_fn = SelectPlaneRows(g, act, z != nullptr);
  const int64_t strips = (g.OH + kRowsPerTask - 1) / kRowsPerTask, planes = g.N * g.C;
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW, taps = g.KH * g.KW;
  ParallelTasks(ctx, planes * strips, [&](int64_t t) {
    const int64_t p = t / strips, c = p % g.C;
    const int64_t oh0 = t % strips * kRowsPerTask, oh1 = std::min(g.OH, oh0 + kRowsPerTask);
    float* y_plane = y + p * out_plane;
    rows_fn(g, x + p * in_plane, w + c * taps, bias ? bias[c] : 0.f, act, oh0, oh1, y_plane);
    if (!finish_after) return;
    const int64_t offset = p * out_plane + oh0 * g.OW, count = (oh1 - oh0) * g.OW;
    BiasResidualActivate(act, nullptr, z ? z + offset : nullptr, 0, y + offset, 0, 1, count);
  });
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
#endif
}

}  // namespace nee::cpu
