// Depthwise 2-D convolution on NCHW planes, sixteen output columns per
// AVX-512 vector (eight per AVX2 vector, through padded scratch rows: see
// "AVX2" below), for 3x3 and 5x5 kernels with stride 1 or 2.
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
// Narrow planes waste lanes here, so with AVX-512 the caller picks this
// kernel only when the output rows are wide (DepthwisePlanarApplies).
//
// Each output is bias + its taps in (kh, kw) order (padding taps add w * 0),
// computed by exactly one task: results do not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

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

// ---- AVX2, rows through a padded scratch -------------------------------------
//
// The kernel above loads each tap straight from the input: on narrow planes
// (14 and 7 columns) most of its vectors touch a border and take masked
// loads and a masked store, and with stride 2 each tap costs two loads and
// two shuffles. Here each input row a strip reads is first copied once into
// a scratch row, zeros in the padding:
//  - stride 1: P[j] = x[j - pw], so tap kw of output column ow is P[ow + kw];
//  - stride 2: the row split into its even and odd columns,
//    Q_r[j] = x[2j + r - pw], so tap kw is Q_{kw % 2}[ow + kw / 2];
// every tap is then one plain load. A row's last, partial vector is the one
// ending at its last column (it recomputes a few columns, with the same
// bits), so every store is a full vector but on rows narrower than eight.
// Several small planes go to one task. Padding rows are a zero scratch row,
// so each output is still bias + its taps in (kh, kw) order.

// Output rows per strip of the scratch kernel at most: planes this tall or
// less are one strip, taller ones take strips of a half (stride 1) or a
// quarter (stride 2, twice the input rows) as many; each strip copies the
// (kK - S) input rows it shares with the next one again. (MobileNetV2 on
// Zen 3: 16-row strips of 28-high planes were 20% slower than whole planes.)
constexpr int64_t kScratchStripRows = 32;

// Scratch row length, a multiple of 8: the taps of a row's last vector
// (first column max(OW - 8, 0)) stay inside it.
int64_t ScratchRow(const Depthwise2D& g) {
  const int64_t last = std::max<int64_t>(g.OW - kLanes8, 0), reach = g.sh == 1 ? g.KW - 1 : (g.KW - 1) / 2;
  return (last + reach + kLanes8 + 7) / 8 * 8;
}

// The eight floats from `p` whose lanes `inside` keeps, zero in the others.
// A masked load is slow on some CPUs (AMD's): where all eight floats lie in
// the tensor [lo, hi), a plain load and an AND do it.
NEE_AVX2 inline __m256 LoadInside8(const float* p, __m256i inside, const float* lo, const float* hi) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a >= reinterpret_cast<uintptr_t>(lo) && a + kLanes8 * sizeof(float) <= reinterpret_cast<uintptr_t>(hi))
    return _mm256_and_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(inside));
  return _mm256_maskload_ps(p, inside);
}

// The floats row[start, start + 8), zero outside [0, width).
NEE_AVX2 inline __m256 RowVector8(const float* row, int64_t start, int64_t width, const float* lo, const float* hi) {
  if (start >= 0 && start + kLanes8 <= width) return _mm256_loadu_ps(row + start);
  if (start >= width || start + kLanes8 <= 0) return _mm256_setzero_ps();
  return LoadInside8(row + start, InsideLanes8(start, width), lo, hi);
}

NEE_AVX2 inline __m256 LoadKeep(const int32_t* keep) {
  return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keep)));
}

// Fills dst[0, len) with P (stride 1) or Q_0 at dst, Q_1 at dst + len
// (stride 2); [lo, hi) is the whole input tensor. `keep` (S * len lanes,
// all ones where column k - pw lies in [0, width), else zero) is the same
// for every row: where the row's reads [row - pw, row - pw + S * len) lie in
// the tensor, a vector that reaches into the padding is a plain load ANDed
// with it (a masked load is slow on some CPUs).
template <int S>
__attribute__((target("avx2,fma"), always_inline)) inline void PadRow8(const float* row, int64_t width, int64_t pw, int64_t len, const int32_t* keep,
                      const float* lo, const float* hi, float* dst) {
  const float* base = row - pw;
  const auto first = reinterpret_cast<uintptr_t>(base), last = first + S * len * sizeof(float);
  const bool plain = first >= reinterpret_cast<uintptr_t>(lo) && last <= reinterpret_cast<uintptr_t>(hi);
  for (int64_t j = 0; j < len; j += kLanes8) {
    if constexpr (S == 1) {
      __m256 v;
      if (j >= pw && j - pw + kLanes8 <= width) v = _mm256_loadu_ps(base + j);
      else if (plain) v = _mm256_and_ps(_mm256_loadu_ps(base + j), LoadKeep(keep + j));
      else v = RowVector8(row, j - pw, width, lo, hi);
      _mm256_storeu_ps(dst + j, v);
    } else {
      const int64_t start = 2 * j - pw;
      __m256 a, b;
      if (start >= 0 && start + 2 * kLanes8 <= width) {
        a = _mm256_loadu_ps(base + 2 * j);
        b = _mm256_loadu_ps(base + 2 * j + kLanes8);
      } else if (plain) {
        a = _mm256_and_ps(_mm256_loadu_ps(base + 2 * j), LoadKeep(keep + 2 * j));
        b = _mm256_and_ps(_mm256_loadu_ps(base + 2 * j + kLanes8), LoadKeep(keep + 2 * j + kLanes8));
      } else {
        a = RowVector8(row, start, width, lo, hi);
        b = RowVector8(row, start + kLanes8, width, lo, hi);
      }
      // shuffle_ps picks within 128-bit halves; the 64-bit pairs are then put in order.
      const __m256 even = _mm256_shuffle_ps(a, b, 0x88), odd = _mm256_shuffle_ps(a, b, 0xDD);
      _mm256_storeu_ps(dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)));
      _mm256_storeu_ps(dst + len + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xD8)));
    }
  }
}

// The first n (< 8) floats of v to dst.
NEE_AVX2 inline void StorePartial8(float* dst, __m256 v, int64_t n) {
  __m128 part = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(dst, part);
    part = _mm256_extractf128_ps(v, 1);
    dst += 4, n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(dst), part);
    part = _mm_movehl_ps(part, part);
    dst += 2, n -= 2;
  }
  if (n) _mm_store_ss(dst, part);
}

// R output rows from scratch row `rows[0]` on (each rows[i] one padded input
// row, `len` apart for stride 2's odd half), the vector of columns [ow, ow + 8).
template <FusedActivation::Kind K, int kK, int S, int R>
NEE_AVX2 inline void ScratchBlock8(const float* const* rows, int64_t len, const __m256* wv, __m256 bias,
                                   const FusedActivation& act, int64_t ow, int64_t n, float* y, int64_t out_row) {
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = bias;
  constexpr int kInputRows = (R - 1) * S + kK;
#pragma GCC unroll 11
  for (int i = 0; i < kInputRows; ++i) {
    const float* row = rows[i] + ow;
#pragma GCC unroll 5
    for (int kw = 0; kw < kK; ++kw) {
      const __m256 v = S == 1 ? _mm256_loadu_ps(row + kw) : _mm256_loadu_ps(row + (kw & 1) * len + kw / 2);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int kh = i - r * S;
        if (kh >= 0 && kh < kK) acc[r] = _mm256_fmadd_ps(v, wv[kh * kK + kw], acc[r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256 v = Activate8<K>(act, acc[r]);
    if (n == kLanes8) _mm256_storeu_ps(y + r * out_row + ow, v);
    else StorePartial8(y + r * out_row + ow, v, n);
  }
}

template <FusedActivation::Kind K, int kK, int S, int R>
NEE_AVX2 inline void ScratchRows8(const Depthwise2D& g, const float* const* rows, int64_t len, const __m256* wv,
                                  __m256 bias, const FusedActivation& act, float* y) {
  if (g.OW < kLanes8) {
    ScratchBlock8<K, kK, S, R>(rows, len, wv, bias, act, 0, g.OW, y, g.OW);
    return;
  }
  int64_t ow = 0;
  for (; ow + kLanes8 <= g.OW; ow += kLanes8) ScratchBlock8<K, kK, S, R>(rows, len, wv, bias, act, ow, kLanes8, y, g.OW);
  if (ow < g.OW) ScratchBlock8<K, kK, S, R>(rows, len, wv, bias, act, g.OW - kLanes8, kLanes8, y, g.OW);
}

// Output rows [oh0, oh1) of one plane through `scratch` (room for the strip's
// input rows, then one zero row).
template <FusedActivation::Kind K, int kK, int S>
NEE_AVX2 void ScratchPlaneRows8(const Depthwise2D& g, const float* x, const float* w, float bias,
                                const FusedActivation& act, int64_t oh0, int64_t oh1, float* y, float* scratch,
                                const int32_t* keep, const float* lo, const float* hi) {
  const int64_t len = ScratchRow(g), stride = S * len;  // floats per scratch row
  const int64_t in_rows = (oh1 - oh0 - 1) * S + kK;
  float* zero = scratch + in_rows * stride;
  if (oh0 * S < g.ph || (oh1 - 1) * S - g.ph + kK > g.H) std::fill(zero, zero + stride, 0.f);
  const float* rows[(kScratchStripRows - 1) * 2 + 5];
  for (int64_t i = 0; i < in_rows; ++i) {
    const int64_t ih = oh0 * S - g.ph + i;
    if (ih < 0 || ih >= g.H) {
      rows[i] = zero;
      continue;
    }
    PadRow8<S>(x + ih * g.W, g.W, g.pw, len, keep, lo, hi, scratch + i * stride);
    rows[i] = scratch + i * stride;
  }
  __m256 wv[kK * kK];
#pragma GCC unroll 25
  for (int t = 0; t < kK * kK; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 b = _mm256_set1_ps(bias);
  constexpr int kBlock = S == 1 ? 4 : 2;
  int64_t oh = oh0;
  for (; oh + kBlock <= oh1; oh += kBlock)
    ScratchRows8<K, kK, S, kBlock>(g, rows + (oh - oh0) * S, len, wv, b, act, y + oh * g.OW);
  if constexpr (kBlock == 4) {
    if (oh + 2 <= oh1) {
      ScratchRows8<K, kK, S, 2>(g, rows + (oh - oh0) * S, len, wv, b, act, y + oh * g.OW);
      oh += 2;
    }
  }
  for (; oh < oh1; ++oh) ScratchRows8<K, kK, S, 1>(g, rows + (oh - oh0) * S, len, wv, b, act, y + oh * g.OW);
}

using ScratchRowsFn = void (*)(const Depthwise2D&, const float*, const float*, float, const FusedActivation&, int64_t,
                               int64_t, float*, float*, const int32_t*, const float*, const float*);

template <FusedActivation::Kind K>
ScratchRowsFn ScratchForGeometry8(const Depthwise2D& g) {
  if (g.KH == 3 && g.sh == 1) return ScratchPlaneRows8<K, 3, 1>;
  if (g.KH == 3 && g.sh == 2) return ScratchPlaneRows8<K, 3, 2>;
  if (g.KH == 5 && g.sh == 1) return ScratchPlaneRows8<K, 5, 1>;
  if (g.KH == 5 && g.sh == 2) return ScratchPlaneRows8<K, 5, 2>;
  return nullptr;
}

bool UseAvx512() { return SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced(); }
bool UseAvx2() { return SgemmActiveIsa() == SgemmIsa::kAvx2 && !SgemmPortableForced(); }

// Outputs per task of the scratch kernel at least (several small planes each).
constexpr int64_t kScratchTaskOutputs = 1024;

bool UseScratch8() { return !UseAvx512() && UseAvx2(); }

// The kernel with the activation in registers, or with none when the
// epilogue must run after the rows (a residual first).
PlaneRowsFn SelectPlaneRows(const Depthwise2D& g, const FusedActivation& act, bool has_residual) {
  using Kind = FusedActivation::Kind;
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
  // AVX2 (eight lanes, the scratch-row kernel; 1 thread, MobileNetV2's
  // shapes, Zen 3): faster than the channel-blocked kernel on every one
  // (stride 1: 2.1x on 112-wide rows, 1.4-1.5x on 28, 14 and 7; stride 2:
  // 1.15-1.85x), and than the direct eight-lane kernel it replaced by 5-35%
  // (stride 1) and about 30% (stride 2), both before its later tuning.
  const bool square = g.KH == g.KW && g.sh == g.sw && g.dh == 1 && g.dw == 1;
  const bool shape = square && (g.KH == 3 || g.KH == 5) && (g.sh == 1 || g.sh == 2);
  if (UseAvx512()) return shape && g.OW >= 12;
  return UseAvx2() && shape;
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
  if (UseScratch8()) {
    using Kind = FusedActivation::Kind;
    const ScratchRowsFn fn = ForActivation8(z ? Kind::kNone : act.kind,
                                            [&](auto k) { return ScratchForGeometry8<decltype(k)::value>(g); });
    // Small planes: whole planes, several to a task; larger: strips of rows.
    const int64_t out_plane = g.OH * g.OW, planes = g.N * g.C, in_plane = g.H * g.W, taps = g.KH * g.KW;
    const int64_t strip_rows = g.OH <= kScratchStripRows ? g.OH : kScratchStripRows / (2 * g.sh);
    const int64_t strips = (g.OH + strip_rows - 1) / strip_rows;
    const int64_t group = strips > 1 ? 1 : std::clamp<int64_t>(kScratchTaskOutputs / out_plane, 1, planes);
    const int64_t groups = (planes + group - 1) / group;
    const size_t scratch_floats = static_cast<size_t>(((strip_rows - 1) * g.sh + g.KH + 1) * g.sh * ScratchRow(g));
    // PadRow8's lanes to keep: padded column k holds input column k - pw.
    std::vector<int32_t> keep(static_cast<size_t>(g.sh * ScratchRow(g)));
    for (size_t k = 0; k < keep.size(); ++k) {
      const int64_t col = static_cast<int64_t>(k) - g.pw;
      keep[k] = col >= 0 && col < g.W ? -1 : 0;
    }
    ParallelTasks(ctx, groups * strips, [&](int64_t t) {
      thread_local std::vector<float> buffer;
      if (buffer.size() < scratch_floats) buffer.resize(scratch_floats);
      const int64_t p0 = t / strips * group, p1 = std::min(planes, p0 + group);
      const int64_t oh0 = t % strips * strip_rows, oh1 = std::min(g.OH, oh0 + strip_rows);
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t c = p % g.C;
        // Small planes follow one another too quickly for the hardware
        // prefetcher: the next one is asked for while this one is computed.
        if (p + 1 < p1) {
          const char* next = reinterpret_cast<const char*>(x + (p + 1) * in_plane);
          for (int64_t b = 0; b < in_plane * static_cast<int64_t>(sizeof(float)); b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
        }
        fn(g, x + p * in_plane, w + c * taps, bias ? bias[c] : 0.f, act, oh0, oh1, y + p * out_plane, buffer.data(),
           keep.data(), x, x + planes * in_plane);
        if (!z) continue;
        const int64_t offset = p * out_plane + oh0 * g.OW, count = (oh1 - oh0) * g.OW;
        BiasResidualActivate(act, nullptr, z + offset, 0, y + offset, 0, 1, count);
      }
    });
    return;
  }
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
