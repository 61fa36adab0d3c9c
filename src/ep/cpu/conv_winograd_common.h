// What the two Winograd convolutions share (internal to conv_winograd.cc,
// F(2x2, 3x3), and conv_winograd43.cc, F(4x4, 3x3)): the block of tile rows a
// task takes, the transformed input's layout in SGEMM's packed B panels, the
// per-thread scratch and the way a phase is shared out among threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/conv_winograd.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_WINOGRAD_COMMON_X86 1
#endif

namespace nee::cpu::winograd_common {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A block of tile rows [ty0, ty1) of image n.
struct Block {
  int64_t n, ty0, ty1;
};

// The transformed input of one block: one matrix V_e (C x cols) per element
// e of the transformed tile, each in SGEMM's packed B layout, so the GEMMs
// read them without another copy.
struct PackedV {
  float* data;
  int64_t c, cols;
  int64_t matrix_floats() const { return c * RoundUp32(cols); }
  static int64_t RoundUp32(int64_t n) { return CeilDiv(n, kSgemmPanelWidth) * kSgemmPanelWidth; }
  float* matrix(int e) const { return data + e * matrix_floats(); }
};

// Zeroes the columns past `cols` in the last panel of every k-block of the
// first `elems` matrices (the GEMM reads them; their products land in
// columns it never stores). Called before the input transform, which then
// writes the data columns: so it zeroes the last panel's runs that hold
// padding whole, one contiguous fill per matrix and k-block, where a fill
// per channel row and run (kc calls of a few floats each) took 0.6% of
// YOLO's time on AVX2 in memset's call overhead.
inline void ZeroPanelPadding(const PackedV& pv, int elems) {
  const int64_t padded = PackedV::RoundUp32(pv.cols);
  if (padded == pv.cols) return;
  const int64_t last_panel = pv.cols / kSgemmPanelWidth;
  const int64_t first_run = pv.cols % kSgemmPanelWidth / kSgemmPanelRun;  // the panel's first run with padding
  for (int e = 0; e < elems; ++e)
    for (int64_t p0 = 0; p0 < pv.c; p0 += kSgemmDepthBlock) {
      const int64_t kc = std::min(kSgemmDepthBlock, pv.c - p0);
      // The last panel of this k-block: its runs one after another, each kc rows of kSgemmPanelRun floats.
      float* panel = pv.matrix(e) + SgemmPackedBIndex(pv.c, pv.cols, p0, last_panel * kSgemmPanelWidth);
      const int64_t runs = kSgemmPanelWidth / kSgemmPanelRun;
      std::fill(panel + first_run * kc * kSgemmPanelRun, panel + runs * kc * kSgemmPanelRun, 0.f);
    }
}

// Per-thread scratch, 64-byte aligned as SGEMM's packed panels must be (one
// buffer for both transforms: a thread runs one block at a time).
inline float* BlockScratch(int64_t floats) {
  thread_local SgemmScratch scratch;
  return scratch.Get(floats);
}

// Runs fn(begin, end) over [0, n): in chunks on the context's threads when
// `ctx` is given, else in one call on this thread.
template <typename Fn>
void Split(const KernelContext* ctx, int64_t n, Fn&& fn) {
  if (!ctx) return fn(int64_t{0}, n);
  const int64_t parts = std::min<int64_t>(n, 4 * NumThreads(*ctx));
  ParallelTasks(*ctx, parts, [&](int64_t p) { fn(n * p / parts, n * (p + 1) / parts); });
}

// Every 3x3 filter of w ([M][C][3][3]) transformed and packed: the matrices
// U_e (M x C, element e of filter (m, c) at row m, column c) as SGEMM's
// packed A, one per element. `eight` transforms filters c..c+7 of a row at
// once (the taps of eight filters in the lanes of a vector, so each element
// is one store of eight floats), `one` a filter alone, for the row's last
// few or where `eight` is null; both write element e `stride` floats after
// element e - 1. Rows are transformed kRows at a time into a scratch that
// the next rows reuse, then packed: a filter at a time, its elements
// scattered over all of U, with U whole in a scratch of its own (fresh
// pages each conv), took ~0.15 s of ResNet-50's first run. The blocks of
// rows are shared among the session's threads.
using FilterTransform = void (*)(const float* w, float* u, int64_t stride);
inline std::vector<SgemmPackedA> TransformFilters(int elems, int64_t M, int64_t C, const float* w,
                                                  FilterTransform eight, FilterTransform one,
                                                  const KernelContext& ctx) {
  constexpr int64_t kRows = 4 * kSgemmTileRows;
  std::vector<SgemmPackedA> u;
  u.reserve(static_cast<size_t>(elems));
  for (int e = 0; e < elems; ++e) u.emplace_back(M, C);
  // Blocks of kRows filter rows, shared among the threads (each its own
  // scratch): a block's transforms and packing are the same on any thread.
  ctx.ParallelFor(CeilDiv(M, kRows), 1, [&](int64_t b0, int64_t b1) {
    std::unique_ptr<float[]> scratch(new float[static_cast<size_t>(elems * std::min(M, kRows) * C)]);
    for (int64_t m0 = b0 * kRows; m0 < std::min(M, b1 * kRows); m0 += kRows) {
      const int64_t rows = std::min(kRows, M - m0), stride = rows * C;
      for (int64_t r = 0; r < rows; ++r) {
        const float* filters = w + (m0 + r) * C * 9;
        float* out = scratch.get() + r * C;
        int64_t c = 0;
        if (eight)
          for (; c + 8 <= C; c += 8) eight(filters + c * 9, out + c, stride);
        for (; c < C; ++c) one(filters + c * 9, out + c, stride);
      }
      for (int e = 0; e < elems; ++e)
        u[static_cast<size_t>(e)].PackRows(m0, rows, 1.f, {scratch.get() + e * stride, C, 1});
    }
  });
  return u;
}

// The taps of eight consecutive filters (72 floats) as nine rows of eight:
// taps[k][f] is tap k of filter f.
inline void TransposeEightFilters(const float* w, float (&taps)[9][8]) {
  for (int f = 0; f < 8; ++f)
    for (int k = 0; k < 9; ++k) taps[k][f] = w[f * 9 + k];
}

// The transformed weights: made once per session when the weights are a
// constant (the original's pages released: runs read the transformed copy),
// else on every call; the same arithmetic, so the same bits either way.
// `transform()` returns a std::shared_ptr to a W.
template <typename W, typename TransformFn>
Result<std::shared_ptr<const W>> TransformedWeights(KernelContext& ctx, int64_t M, int64_t C, TransformFn&& transform) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return std::shared_ptr<const W>(transform());
  return ctx.prepared()->GetOrBuild<W>({M, C}, [&]() -> Result<std::shared_ptr<const W>> {
    std::shared_ptr<const W> transformed = transform();
    ctx.ReleaseConstantInput(1);
    return transformed;
  });
}

// Whether a conv with fewer blocks of tile rows than threads should still be
// cut into one block a thread (each thread then reads all the transformed
// weights, `elems` matrices of M x C, but nothing the other threads wrote)
// rather than run its blocks with each phase shared among the threads (each
// thread reads half of the weights, and half of each phase's input comes from
// the other core's caches: input channels, then GEMMs, then output channels).
// Yes while the weights fit a core's L2 (1 MiB on Zen 4): YOLO's 64-channel
// 3x3 convs at 40x40 (F(4x4, 3x3), 590 KB) at 2 threads ran 356 us instead
// of 427 (and their neighbours' pixel-major tasks then find their pixels on
// their own core); ResNet-50's 14x14 and 7x7 ones (4-16 MB) keep sharing.
inline bool EachThreadReadsWeights(int64_t elems, int64_t M, int64_t C) {
  constexpr int64_t kWeightBytesPerThread = 1 << 20;
  return elems * M * C * static_cast<int64_t>(sizeof(float)) <= kWeightBytesPerThread;
}

// Runs run(block, shared) over every block of tile rows of the N images
// (`tiling`: blocks per image and first_row(b)): with a block or more per
// thread, the blocks as pixel-major tasks (shared null); with fewer blocks
// than threads, one block after another, each with its phases shared among
// the threads (shared = &ctx). Stops, returning false, once a run returns false.
template <typename TilingT, typename RunFn>
bool RunBlocks(const KernelContext& ctx, int64_t N, const TilingT& tiling, RunFn&& run) {
  const int64_t tasks = N * tiling.blocks;
  auto block = [&](int64_t task) {
    const int64_t b = task % tiling.blocks;
    return Block{task / tiling.blocks, tiling.first_row(b), tiling.first_row(b + 1)};
  };
  std::atomic<bool> ok{true};
  if (NumThreads(ctx) == 1 || tasks >= NumThreads(ctx)) {
    ParallelTasks(ctx, tasks, [&](int64_t task) {
      if (ok.load(std::memory_order_relaxed) && !run(block(task), nullptr)) ok.store(false, std::memory_order_relaxed);
    });
  } else {
    for (int64_t task = 0; task < tasks && ok.load(); ++task)
      if (!run(block(task), &ctx)) ok.store(false);
  }
  return ok.load();
}


#ifdef NEE_WINOGRAD_COMMON_X86
// ---- nee's channel-blocked layout ([N, C/8, H, W, 8], ops/blocked_conv.h) --
//
// A block's input rows of eight channels are deinterleaved into planes in the
// thread's scratch (a block's rows: they stay in L2) and go through the NCHW
// input transform; each eight output channels' rows are transformed into
// planes there and interleaved into the blocked output. So the values, and
// the bits, are the NCHW path's, without the FromBlocked and ToBlocked passes
// over whole tensors that an NCHW conv inside a blocked run needs.

constexpr int64_t kLayoutBlock = 8;  // channels per block of the layout

inline float* ChannelScratch(int64_t floats) {
  thread_local SgemmScratch scratch;
  return scratch.Get(floats);
}

// planes[l * pixels + p] = blocked[p * 8 + l] for the eight lanes l.
__attribute__((target("avx2"))) inline void Deinterleave8(const float* blocked, int64_t pixels, float* planes) {
  constexpr int64_t kB = kLayoutBlock;
  int64_t p = 0;
  for (; p + kB <= pixels; p += kB) Transpose8x8Avx2(blocked + p * kB, kB, planes + p, pixels);
  for (; p < pixels; ++p)
    for (int64_t l = 0; l < kB; ++l) planes[l * pixels + p] = blocked[p * kB + l];
}

// blocked[p * 8 + l] = planes[l * pixels + p]: Deinterleave8's inverse.
__attribute__((target("avx2"))) inline void Interleave8(const float* planes, int64_t pixels, float* blocked) {
  constexpr int64_t kB = kLayoutBlock;
  int64_t p = 0;
  for (; p + kB <= pixels; p += kB) Transpose8x8Avx2(planes + p, pixels, blocked + p * kB, kB);
  for (; p < pixels; ++p)
    for (int64_t l = 0; l < kB; ++l) blocked[p * kB + l] = planes[l * pixels + p];
}

// Where a conv reads its input and writes its output: x, z and y NCHW, or
// channel-blocked (then a phase's channel ranges are whole blocks).
struct Layout {
  bool blocked;
  const float* x;
  const float* z;  // the residual, or null
  float* y;
};

// Input channels [c0, c1) of block b as planes of H rows of W:
// input(geometry, planes, plane_stride, c0, c1) reads channel c at
// planes + (c - c0) * plane_stride. Blocked, eight channels at a time: the
// rows [r0, r1) the block's tile rows (tile outputs high, tile + 2 inputs)
// read, as an image of r1 - r0 rows whose begin pad is ph + r0.
template <typename InputFn>
void InputPlanes(const Winograd3x3& g, int64_t tile, const Block& b, const Layout& io, int64_t c0, int64_t c1,
                 InputFn&& input) {
  if (!io.blocked) return input(g, io.x + (b.n * g.C + c0) * g.H * g.W, g.H * g.W, c0, c1);
  const int64_t r0 = std::clamp<int64_t>(tile * b.ty0 - g.ph, 0, g.H);
  const int64_t r1 = std::clamp<int64_t>(tile * b.ty1 - g.ph + 2, r0, g.H);
  Winograd3x3 rows = g;
  rows.H = r1 - r0;
  rows.ph = g.ph + r0;
  const int64_t pixels = rows.H * g.W;
  float* planes = ChannelScratch(kLayoutBlock * std::max<int64_t>(pixels, 1));
  for (int64_t c = c0; c < c1; c += kLayoutBlock) {
    Deinterleave8(io.x + (b.n * g.C + c) * g.H * g.W + r0 * g.W * kLayoutBlock, pixels, planes);
    input(rows, planes, pixels, c, c + kLayoutBlock);
  }
}

// Output channels [m0, m1) of block b: output(geometry, block, planes,
// plane_stride, m0, m1) writes channel m's output rows at planes + (m - m0) *
// plane_stride (blocked: the block's rows as an image of OH - oy0 rows, its
// tile rows from 0, into scratch, then interleaved into y). `finish`: the
// residual and activation follow, over the rows while still in cache.
template <typename OutputFn>
void OutputPlanes(const Winograd3x3& g, int64_t tile, const Block& b, const Layout& io, const FusedActivation& act,
                  bool finish, int64_t m0, int64_t m1, OutputFn&& output) {
  const int64_t oy0 = tile * b.ty0, oy1 = std::min(g.OH, tile * b.ty1), plane = g.OH * g.OW;
  if (!io.blocked) {
    output(g, b, io.y + (b.n * g.M + m0) * plane, plane, m0, m1);
    if (!finish) return;
    const int64_t offset = (b.n * g.M + m0) * plane + oy0 * g.OW;
    BiasResidualActivate(act, nullptr, io.z ? io.z + offset : nullptr, plane, io.y + offset, plane, m1 - m0,
                         (oy1 - oy0) * g.OW);
    return;
  }
  Winograd3x3 rows = g;
  rows.OH = g.OH - oy0;
  const Block local{0, 0, b.ty1 - b.ty0};
  const int64_t pixels = (oy1 - oy0) * g.OW, floats = kLayoutBlock * pixels;
  float* planes = ChannelScratch(std::max<int64_t>(floats, 1));
  for (int64_t m = m0; m < m1; m += kLayoutBlock) {
    output(rows, local, planes, pixels, m, m + kLayoutBlock);
    const int64_t offset = (b.n * g.M + m) * plane + oy0 * g.OW * kLayoutBlock;  // blocked [n, m / 8, oy0, 0, 0]
    Interleave8(planes, pixels, io.y + offset);
    if (finish) BiasResidualActivate(act, nullptr, io.z ? io.z + offset : nullptr, floats, io.y + offset, floats, 1, floats);
  }
}
#endif  // NEE_WINOGRAD_COMMON_X86

}  // namespace nee::cpu::winograd_common
