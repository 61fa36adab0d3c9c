// Depthwise convolutions on small planes (AVX2), where the row kernel
// (depthwise_planar.cc) fills its vectors poorly (7 of 8 lanes on a 7-wide
// row, 14 of 16 on a 14-wide one) and first copies each input row into a
// padded scratch row, whose reads at an offset of one or two floats then miss
// store-to-load forwarding. Both kernels here read the input where it lies.
//
// Stride 1 ("flat"): the plane is one run of OH * OW outputs, eight to a
// vector across row ends. When the output rows are as wide as the input's
// (the "same" padding of a mobile network's 7x7 and 14x14 layers), the input
// of tap (kh, kw) for flat output o is flat input o + (kh - ph) * W + (kw -
// pw): one load per tap and vector. Lanes whose tap falls in the padding (the
// row above or below the plane, the column left or right of it, or past the
// plane's last output) read a neighbouring plane's floats or the end of the
// row before; masks zero them: per (vector, tap) in the plane's first and
// last rows, per (vector, column) between them.
//
// Stride 2, 3x3, pads of 1, output rows of at most 8 ("narrow"): one vector
// per output row. Each input row is loaded as two vectors and split into its
// even and odd columns in registers; the odd ones moved up a lane are the
// columns left of each output's centre. Each such row serves the two output
// rows that read it.
//
// In both, each padding tap adds w * 0, and each output is bias + its taps in
// (kh, kw) order, computed by one task: the same bits as the row kernel, for
// any thread count. Planes whose reads would leave the tensor (the first or
// last) are computed from a copy with room around it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ep/cpu/depthwise_blocked.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_FLAT_X86 1
#endif

namespace nee::cpu {

namespace {

#ifdef NEE_FLAT_X86
#define NEE_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kLanes = 8;
// Flat outputs per plane at most: the masks take vectors x taps x 32 bytes
// (7 KiB for 14 x 14 with a 3x3 kernel), read from L1 for every plane.
constexpr int64_t kMaxOutputs = 256;
// Outputs per task at least (several small planes each).
constexpr int64_t kTaskOutputs = 1024;
// Rows narrower than this take the flat kernel (measured against the row
// kernel: DepthwiseFlatApplies).
constexpr int64_t kFlatMaxWidth = 16;

// What every plane of one node shares: where each tap reads, relative to
// the flat output index, and which lanes of which vector keep it.
struct FlatTables {
  int64_t vectors = 0;
  int64_t taps = 0;
  std::vector<int64_t> offset;  // per tap
  std::vector<int32_t> keep;    // [vector][tap][lane]: -1 where the tap's input is in the plane
  int64_t first_read = 0;       // flat input index of the lowest read
  int64_t end_read = 0;         // one past the highest
  // Vectors [middle_begin, middle_end) have every tap's row inside the plane
  // and all eight outputs in it: only the column masks below apply.
  int64_t middle_begin = 0, middle_end = 0;
  std::vector<int32_t> column_keep;  // [vector][kw][lane]: -1 where column ow + kw - pw is in the plane
};

FlatTables TablesFor(const Depthwise2D& g) {
  FlatTables t;
  const int64_t outputs = g.OH * g.OW;
  t.vectors = (outputs + kLanes - 1) / kLanes;
  t.taps = g.KH * g.KW;
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) t.offset.push_back((kh - g.ph) * g.W + (kw - g.pw));
  t.keep.assign(static_cast<size_t>(t.vectors * t.taps * kLanes), 0);
  for (int64_t v = 0; v < t.vectors; ++v)
    for (int64_t tap = 0; tap < t.taps; ++tap)
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        const int64_t o = v * kLanes + lane;
        const int64_t ih = o / g.OW + tap / g.KW - g.ph, iw = o % g.OW + tap % g.KW - g.pw;
        const bool inside = o < outputs && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
        t.keep[static_cast<size_t>((v * t.taps + tap) * kLanes + lane)] = inside ? -1 : 0;
      }
  t.first_read = t.offset.front();
  t.end_read = t.vectors * kLanes + t.offset.back();
  t.column_keep.assign(static_cast<size_t>(t.vectors * g.KW * kLanes), 0);
  for (int64_t v = 0; v < t.vectors; ++v)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        const int64_t iw = (v * kLanes + lane) % g.OW + kw - g.pw;
        t.column_keep[static_cast<size_t>((v * g.KW + kw) * kLanes + lane)] = iw >= 0 && iw < g.W ? -1 : 0;
      }
  auto middle = [&](int64_t v) {
    const int64_t first_row = v * kLanes / g.OW, last = v * kLanes + kLanes - 1;
    return last < outputs && first_row - g.ph >= 0 && last / g.OW + g.KH - 1 - g.ph < g.H;
  };
  t.middle_begin = 0;
  while (t.middle_begin < t.vectors && !middle(t.middle_begin)) ++t.middle_begin;
  t.middle_end = t.middle_begin;
  while (t.middle_end < t.vectors && middle(t.middle_end)) ++t.middle_end;
  return t;
}

// The first n (< 8) floats of v to dst.
NEE_AVX2 inline void StoreFirst(float* dst, __m256 v, int64_t n) {
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, v);
  std::copy(lanes, lanes + n, dst);
}

// One output vector with every tap masked (the plane's first and last rows).
template <int kTaps>
NEE_AVX2 inline __m256 FlatVectorMasked(const FlatTables& t, int64_t v, const float* x, const __m256* wv, __m256 acc) {
  const float* in = x + v * kLanes;
  const int32_t* keep = t.keep.data() + v * kTaps * kLanes;
#pragma GCC unroll 25
  for (int tap = 0; tap < kTaps; ++tap) {
    const __m256 mask = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keep + tap * kLanes)));
    acc = _mm256_fmadd_ps(_mm256_and_ps(_mm256_loadu_ps(in + t.offset[static_cast<size_t>(tap)]), mask), wv[tap], acc);
  }
  return acc;
}

// One output vector whose taps' rows are all inside the plane: the centre
// column needs no mask, the others their column's. Pads are (kK - 1) / 2.
template <int kK>
NEE_AVX2 inline __m256 FlatVectorMiddle(const FlatTables& t, int64_t v, int64_t width, const float* x,
                                        const __m256* wv, __m256 acc) {
  constexpr int kCentre = (kK - 1) / 2;
  const float* in = x + v * kLanes;
  const int32_t* keep = t.column_keep.data() + v * kK * kLanes;
  __m256 column[kK];
#pragma GCC unroll 5
  for (int kw = 0; kw < kK; ++kw)
    column[kw] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keep + kw * kLanes)));
#pragma GCC unroll 5
  for (int kh = 0; kh < kK; ++kh) {
    const float* row = in + (kh - kCentre) * width;
#pragma GCC unroll 5
    for (int kw = 0; kw < kK; ++kw) {
      __m256 value = _mm256_loadu_ps(row + kw - kCentre);
      if (kw != kCentre) value = _mm256_and_ps(value, column[kw]);
      acc = _mm256_fmadd_ps(value, wv[kh * kK + kw], acc);
    }
  }
  return acc;
}

// One plane: x points at its first input, y at its first output.
template <FusedActivation::Kind K, int kK>
NEE_AVX2 void FlatPlane(const FlatTables& t, int64_t outputs, int64_t width, const float* x, const float* w,
                        float bias, const FusedActivation& act, float* y) {
  constexpr int kTaps = kK * kK;
  __m256 wv[kTaps];
#pragma GCC unroll 25
  for (int tap = 0; tap < kTaps; ++tap) wv[tap] = _mm256_set1_ps(w[tap]);
  const __m256 b = _mm256_set1_ps(bias);
  for (int64_t v = 0; v < t.vectors; ++v) {
    const bool middle = v >= t.middle_begin && v < t.middle_end;
    __m256 acc = middle ? FlatVectorMiddle<kK>(t, v, width, x, wv, b) : FlatVectorMasked<kTaps>(t, v, x, wv, b);
    acc = Activate8<K>(act, acc);
    if (v * kLanes + kLanes <= outputs) _mm256_storeu_ps(y + v * kLanes, acc);
    else StoreFirst(y + v * kLanes, acc, outputs - v * kLanes);
  }
}

using FlatPlaneFn = void (*)(const FlatTables&, int64_t, int64_t, const float*, const float*, float,
                             const FusedActivation&, float*);

template <FusedActivation::Kind K>
FlatPlaneFn ForTaps(int64_t taps) {
  return taps == 9 ? FlatPlane<K, 3> : FlatPlane<K, 5>;
}

// The three tap vectors of one input row for stride 2: columns 2c - 1, 2c
// and 2c + 1 of output column c, masked by keep (zeros above or below the
// plane: row null).
struct RowTaps {
  __m256 t[3];
};

NEE_AVX2 inline RowTaps TapsOfRow(const float* row, const __m256* keep) {
  if (!row) return {{_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}};
  const __m256 lo = _mm256_loadu_ps(row), hi = _mm256_loadu_ps(row + kLanes);
  // shuffle_ps picks within 128-bit halves; the 64-bit pairs are then put in order.
  const __m256 even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  const __m256 odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  const __m256i up_one_lane = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
  return {{_mm256_and_ps(_mm256_permutevar8x32_ps(odd, up_one_lane), keep[0]), _mm256_and_ps(even, keep[1]),
           _mm256_and_ps(odd, keep[2])}};
}

// Output rows [0, OH) of one plane, stride 2: x and y at the plane's start.
// keep: 3 x 8 lanes, -1 where output column c's input column 2c + kw - 1
// lies in [0, W).
template <FusedActivation::Kind K>
NEE_AVX2 void NarrowPlane(const Depthwise2D& g, const int32_t* keep_lanes, const float* x, const float* w,
                          float bias, const FusedActivation& act, float* y) {
  __m256 keep[3];
  for (int kw = 0; kw < 3; ++kw)
    keep[kw] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keep_lanes + kw * kLanes)));
  __m256 wv[9];
#pragma GCC unroll 9
  for (int tap = 0; tap < 9; ++tap) wv[tap] = _mm256_set1_ps(w[tap]);
  const __m256 b = _mm256_set1_ps(bias);
  auto row = [&](int64_t ih) { return ih >= 0 && ih < g.H ? x + ih * g.W : nullptr; };
  RowTaps above = TapsOfRow(nullptr, keep);  // input row 2r - 1
  for (int64_t r = 0; r < g.OH; ++r) {
    const RowTaps centre = TapsOfRow(row(2 * r), keep), below = TapsOfRow(row(2 * r + 1), keep);
    __m256 acc = b;
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) acc = _mm256_fmadd_ps(above.t[kw], wv[kw], acc);
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) acc = _mm256_fmadd_ps(centre.t[kw], wv[3 + kw], acc);
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) acc = _mm256_fmadd_ps(below.t[kw], wv[6 + kw], acc);
    acc = Activate8<K>(act, acc);
    // A full store spills into the next row's start, which that row then
    // overwrites; the plane's last row must not reach the next plane.
    if (g.OW == kLanes || r + 1 < g.OH) _mm256_storeu_ps(y + r * g.OW, acc);
    else StoreFirst(y + r * g.OW, acc, g.OW);
    above = below;
  }
}

using NarrowPlaneFn = void (*)(const Depthwise2D&, const int32_t*, const float*, const float*, float,
                               const FusedActivation&, float*);

// Every plane of the tensor, several small ones to a task: plane(x_plane,
// channel, y_plane) computes one, reading it where it lies, or from a copy
// with `before` and `after` floats of zeroed room when its reads would leave
// the tensor (the first and last planes). With a residual the kernels ran
// without the activation; the residual and activation follow per plane.
template <typename PlaneFn>
void ForEachPlane(KernelContext& ctx, const Depthwise2D& g, const float* x, int64_t before, int64_t after,
                  const FusedActivation& act, const float* z, float* y, PlaneFn plane) {
  const int64_t planes = g.N * g.C, in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  const int64_t group = std::clamp<int64_t>(kTaskOutputs / out_plane, 1, planes);
  ParallelTasks(ctx, (planes + group - 1) / group, [&](int64_t task) {
    const int64_t p0 = task * group, p1 = std::min(planes, p0 + group);
    for (int64_t p = p0; p < p1; ++p) {
      const float* x_plane = x + p * in_plane;
      thread_local std::vector<float> copy;
      if (p * in_plane - before < 0 || (p + 1) * in_plane + after > planes * in_plane) {
        copy.assign(static_cast<size_t>(before + in_plane + after), 0.f);
        std::copy(x_plane, x_plane + in_plane, copy.begin() + before);
        x_plane = copy.data() + before;
      }
      plane(x_plane, p % g.C, y + p * out_plane);
      if (z) BiasResidualActivate(act, nullptr, z + p * out_plane, 0, y + p * out_plane, 0, 1, out_plane);
    }
  });
}

bool UseAvx2Only() {
  return SgemmActiveIsa() == SgemmIsa::kAvx2 && !SgemmPortableForced();
}
#endif  // NEE_FLAT_X86

}  // namespace

bool DepthwiseFlatApplies(const Depthwise2D& g) {
#ifdef NEE_FLAT_X86
  // Only where the row kernel wastes lanes and the flat index works (output
  // rows as wide as the input's). Measured per node on MobileNetV2, 1 thread
  // (AVX2, Zen 3), against the row kernel: 7x7 57 -> 50 us, 14x14 90 -> 77 and
  // 61 -> 55; 28x28 82 -> 102 and 56x56 206 -> 300, so those stay with it.
  // With AVX-512 such planes are the channel-blocked kernel's.
  const bool square = g.KH == g.KW && (g.KH == 3 || g.KH == 5);
  const bool stride1 = g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
  const bool same = g.ph == (g.KH - 1) / 2 && g.pw == (g.KW - 1) / 2;
  return UseAvx2Only() && square && stride1 && same && g.OW == g.W && g.OW < kFlatMaxWidth &&
         g.OH * g.OW <= kMaxOutputs;
#else
  (void)g;
  return false;
#endif
}

void DepthwiseFlat(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                   const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_FLAT_X86
  using Kind = FusedActivation::Kind;
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const FlatPlaneFn fn =
      ForActivation8(z ? Kind::kNone : act.kind, [&](auto k) { return ForTaps<decltype(k)::value>(g.KH * g.KW); });
  const FlatTables tables = TablesFor(g);
  const int64_t out_plane = g.OH * g.OW, taps = g.KH * g.KW;
  // The masks drop whatever a copy's room holds.
  const int64_t before = -std::min<int64_t>(0, tables.first_read);
  const int64_t after = std::max<int64_t>(g.H * g.W, tables.end_read) - g.H * g.W;
  ForEachPlane(ctx, g, x, before, after, act, z, y, [&](const float* x_plane, int64_t c, float* y_plane) {
    fn(tables, out_plane, g.W, x_plane, w + c * taps, bias ? bias[c] : 0.f, act, y_plane);
  });
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
#endif
}

bool DepthwiseNarrowApplies(const Depthwise2D& g) {
#ifdef NEE_FLAT_X86
  // A row's 16 loaded floats must hold every column its outputs read.
  const bool shape = g.KH == 3 && g.KW == 3 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && g.ph == 1 &&
                     g.pw == 1;
  return UseAvx2Only() && shape && g.OW <= kLanes && g.W <= 2 * kLanes;
#else
  (void)g;
  return false;
#endif
}

void DepthwiseNarrow(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                     const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_FLAT_X86
  using Kind = FusedActivation::Kind;
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const NarrowPlaneFn fn =
      ForActivation8(z ? Kind::kNone : act.kind, [](auto k) -> NarrowPlaneFn { return NarrowPlane<decltype(k)::value>; });
  int32_t keep[3 * kLanes];
  for (int kw = 0; kw < 3; ++kw)
    for (int c = 0; c < kLanes; ++c) keep[kw * kLanes + c] = 2 * c + kw - 1 >= 0 && 2 * c + kw - 1 < g.W ? -1 : 0;
  const int64_t after = 2 * kLanes - g.W;  // the last row's loads reach this far past the plane
  ForEachPlane(ctx, g, x, 0, after, act, z, y, [&](const float* x_plane, int64_t c, float* y_plane) {
    fn(g, keep, x_plane, w + c * 9, bias ? bias[c] : 0.f, act, y_plane);
  });
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
#endif
}

}  // namespace nee::cpu
