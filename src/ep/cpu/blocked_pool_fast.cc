// ai.nee BlockedMaxPool and BlockedGlobalAveragePool on float32 for the CPU provider (AVX2). MaxPool in
// the channel-blocked layout (ops/blocked_conv.h), e.g. ResNet's 3x3
// stride-2 pool between its blocked stem and its blocked first stage, so the
// pool needs no reorders around it.
//
// A pixel's eight channels are one vector: each output vector starts at the
// window's first tap inside the image and takes every later tap (row-major)
// by `max(tap, best)`, which is `tap > best ? tap : best` lane by lane -- the
// reference's own rule, so NaN (kept only when it comes first) and -0/+0
// (the first of equals kept) give the reference's bits. Interior pixels run
// without bounds checks; the border clips its tap range. Stride-1 windows
// share each input row's maxima between output rows (PoolStrip). Tasks are strips of
// output rows of one channel block, every output written by one task: results
// do not depend on the thread count.
#include <algorithm>
#include <limits>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/blocked_conv.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/simd_x86.h"
#define NEE_BLOCKED_POOL_X86 1
#endif

namespace nee::cpu {

#ifdef NEE_BLOCKED_POOL_X86
namespace {

constexpr int64_t kB = kChannelBlock;

// The max over taps rows [kh0, kh1) x columns [kw0, kw1) of the window whose
// tap (0, 0) is at `at` (a pixel's vector in a [H][W][8] plane); the range
// is not empty.
__attribute__((target("avx2"), always_inline)) inline __m256 WindowMax(const float* at, int64_t W, int64_t kh0,
                                                                       int64_t kh1, int64_t kw0, int64_t kw1) {
  __m256 best = _mm256_loadu_ps(at + (kh0 * W + kw0) * kB);
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = kh == kh0 ? kw0 + 1 : kw0; kw < kw1; ++kw)
      best = _mm256_max_ps(_mm256_loadu_ps(at + (kh * W + kw) * kB), best);
  return best;
}

// Output pixel ow of a row whose window reaches past the left or right edge:
// its tap columns clipped to the image (none inside: the reference's 0).
__attribute__((target("avx2"))) void BorderPixel(const BlockedPoolGeometry& g, const float* x, float* out,
                                                 int64_t ih0, int64_t kh0, int64_t kh1, int64_t ow) {
  const int64_t iw0 = ow * g.sw - g.pl;
  const int64_t kw0 = std::max<int64_t>(0, -iw0), kw1 = std::min<int64_t>(g.KW, g.W - iw0);
  const __m256 v = kw0 < kw1 ? WindowMax(x + (ih0 * g.W + iw0) * kB, g.W, kh0, kh1, kw0, kw1) : _mm256_setzero_ps();
  _mm256_storeu_ps(out + ow * kB, v);
}

// Output row oh of one channel block's plane.
__attribute__((target("avx2"))) void PoolRow(const BlockedPoolGeometry& g, const float* x, float* y, int64_t oh) {
  const int64_t ih0 = oh * g.sh - g.pt;
  const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min<int64_t>(g.KH, g.H - ih0);
  float* out = y + oh * g.OW * kB;
  if (kh0 >= kh1) {  // no input row: the reference's 0
    std::fill(out, out + g.OW * kB, 0.f);
    return;
  }
  // Columns whose whole window lies inside the row: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(g.OW, (g.pl + g.sw - 1) / g.sw);
  const int64_t last = g.W - g.KW + g.pl;
  const int64_t ow_hi = last < 0 ? ow_lo : std::max(ow_lo, std::min(g.OW, last / g.sw + 1));
  for (int64_t ow = 0; ow < ow_lo; ++ow) BorderPixel(g, x, out, ih0, kh0, kh1, ow);
  if (g.KH == 3 && g.KW == 3 && kh0 == 0 && kh1 == 3) {
    // The common 3x3 window, unrolled in the reference's tap order.
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
      const float* r0 = x + (ih0 * g.W + ow * g.sw - g.pl) * kB;
      const float* r1 = r0 + g.W * kB;
      const float* r2 = r1 + g.W * kB;
      __m256 best = _mm256_loadu_ps(r0);
      best = _mm256_max_ps(_mm256_loadu_ps(r0 + kB), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r0 + 2 * kB), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r1), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r1 + kB), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r1 + 2 * kB), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r2), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r2 + kB), best);
      best = _mm256_max_ps(_mm256_loadu_ps(r2 + 2 * kB), best);
      _mm256_storeu_ps(out + ow * kB, best);
    }
  } else {
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow)
      _mm256_storeu_ps(out + ow * kB,
                       WindowMax(x + (ih0 * g.W + ow * g.sw - g.pl) * kB, g.W, kh0, kh1, 0, g.KW));
  }
  for (int64_t ow = ow_hi; ow < g.OW; ++ow) BorderPixel(g, x, out, ih0, kh0, kh1, ow);
}

// Whether the pool runs PoolStrip: stride-1 windows at least three wide
// (YOLO's SPPF 5x5 pools) with interior columns.
bool Separable(const BlockedPoolGeometry& g) {
  const int64_t ow_hi = std::min(g.OW, g.W - g.KW + g.pl + 1);
  return g.sh == 1 && g.sw == 1 && g.KW >= 3 && g.pl < g.KW && ow_hi > g.pl;
}

// Output rows [oh0, oh1) of one channel block's plane with stride-1
// windows: each input row's window maxima along the row (its KW taps) are
// computed once and shared by the KH output rows that read that row, so an
// output takes KH maxima instead of KH x KW (SPPF's 5x5: 10 operations an
// output, not 25). The same bits as the row-major scan: a row's maximum here
// starts from -inf, so it is the row's first maximal value with NaN skipped,
// which is what the scan keeps from that row unless an earlier tap was at
// least as large; and the scan's first tap, which alone can make the result
// NaN, starts the fold as it starts the scan.
__attribute__((target("avx2"))) void PoolStrip(const BlockedPoolGeometry& g, const float* x, float* y, int64_t oh0,
                                               int64_t oh1) {
  const int64_t ow_lo = g.pl, ow_hi = std::min(g.OW, g.W - g.KW + g.pl + 1), cols = ow_hi - ow_lo;
  const int64_t r0 = std::max<int64_t>(0, oh0 - g.pt), r1 = std::min(g.H, oh1 - 1 - g.pt + g.KH);
  thread_local std::vector<float> row_max;
  row_max.resize(static_cast<size_t>(std::max<int64_t>(0, r1 - r0) * cols * kB));
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
      const float* at = x + (r * g.W + ow - g.pl) * kB;
      __m256 best = lowest;
      for (int64_t kw = 0; kw < g.KW; ++kw) best = _mm256_max_ps(_mm256_loadu_ps(at + kw * kB), best);
      _mm256_storeu_ps(row_max.data() + ((r - r0) * cols + ow - ow_lo) * kB, best);
    }
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t ih0 = oh - g.pt;
    const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min<int64_t>(g.KH, g.H - ih0);
    float* out = y + oh * g.OW * kB;
    if (kh0 >= kh1) {  // no input row: the reference's 0
      std::fill(out, out + g.OW * kB, 0.f);
      continue;
    }
    for (int64_t ow = 0; ow < ow_lo; ++ow) BorderPixel(g, x, out, ih0, kh0, kh1, ow);
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
      __m256 best = _mm256_loadu_ps(x + ((ih0 + kh0) * g.W + ow - g.pl) * kB);  // the scan's first tap
      for (int64_t kh = kh0; kh < kh1; ++kh)
        best = _mm256_max_ps(_mm256_loadu_ps(row_max.data() + ((ih0 + kh - r0) * cols + ow - ow_lo) * kB), best);
      _mm256_storeu_ps(out + ow * kB, best);
    }
    for (int64_t ow = ow_hi; ow < g.OW; ++ow) BorderPixel(g, x, out, ih0, kh0, kh1, ow);
  }
}

}  // namespace
#endif  // NEE_BLOCKED_POOL_X86

Status BlockedMaxPoolFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedPoolGeometry g, PlanBlockedMaxPool(ctx));
#ifdef NEE_BLOCKED_POOL_X86
  // (With padding lanes, C not a multiple of 8, the reference writes them 0.)
  if (CpuHasAvx2Fma() && !SgemmPortableForced() && g.C % kB == 0) {
    const int64_t planes = g.N * g.Cb(), in_plane = g.H * g.W * kB, out_plane = g.OH * g.OW * kB;
    // Strips of rows of one plane, read in order (the prefetchers follow a
    // few rows; eight planes' rows at once ran 2-3x slower).
    const int64_t strips = std::min(g.OH, std::max<int64_t>(1, (4 * NumThreads(ctx) + planes - 1) / planes));
    const bool separable = Separable(g);
    ParallelTasks(ctx, planes * strips, [&](int64_t task) {
      const int64_t plane = task / strips, strip = task % strips;
      const int64_t oh0 = strip * g.OH / strips, oh1 = (strip + 1) * g.OH / strips;
      if (separable) return PoolStrip(g, g.x + plane * in_plane, g.y + plane * out_plane, oh0, oh1);
      for (int64_t oh = oh0; oh < oh1; ++oh) PoolRow(g, g.x + plane * in_plane, g.y + plane * out_plane, oh);
    });
    return Status::Ok();
  }
#endif
  BlockedMaxPoolReference(ctx, g);
  return Status::Ok();
}

#ifdef NEE_BLOCKED_POOL_X86
namespace {
// Blocks [b0, b1) of g (image-major): each lane's pixels summed in order, as the reference, four blocks' chains
// side by side so that their adds overlap.
__attribute__((target("avx2"))) void GlobalAverageBlocks(const BlockedGlobalPoolGeometry& g, int64_t b0, int64_t b1) {
  const int64_t plane = g.pixels * kB;
  const __m256 count = _mm256_set1_ps(static_cast<float>(g.pixels));
  auto store = [&](int64_t b, __m256 sum) __attribute__((target("avx2"))) {
    const int64_t n = b / g.Cb(), cb = b % g.Cb();
    _mm256_storeu_ps(g.y + n * g.C + cb * kB, _mm256_div_ps(sum, count));
  };
  int64_t b = b0;
  for (; b + 4 <= b1; b += 4) {
    const float* x = g.x + b * plane;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t p = 0; p < plane; p += kB) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + p));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + plane + p));
      s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + 2 * plane + p));
      s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + 3 * plane + p));
    }
    store(b, s0), store(b + 1, s1), store(b + 2, s2), store(b + 3, s3);
  }
  for (; b < b1; ++b) {
    __m256 sum = _mm256_setzero_ps();
    for (int64_t p = 0; p < plane; p += kB) sum = _mm256_add_ps(sum, _mm256_loadu_ps(g.x + b * plane + p));
    store(b, sum);
  }
}
}  // namespace
#endif

Status BlockedGlobalAveragePoolFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedGlobalPoolGeometry g, PlanBlockedGlobalAveragePool(ctx));
#ifdef NEE_BLOCKED_POOL_X86
  // Whole blocks only (the layout pass converts channels that fill them); an empty plane divides 0 by 0 below,
  // where the reference gives 0.
  if (CpuHasAvx2Fma() && !SgemmPortableForced() && g.C % kB == 0 && g.pixels > 0) {
    const int64_t blocks = g.N * g.Cb();
    // A few hundred KB at most (a CNN's last feature map): one task a thread, each its blocks' every pixel.
    const int64_t tasks = blocks * g.pixels >= 4096 ? std::min<int64_t>(blocks, NumThreads(ctx)) : 1;
    ParallelTasks(ctx, tasks, [&](int64_t t) { GlobalAverageBlocks(g, t * blocks / tasks, (t + 1) * blocks / tasks); });
    return Status::Ok();
  }
#endif
  return RunReference(ctx);
}

}  // namespace nee::cpu
