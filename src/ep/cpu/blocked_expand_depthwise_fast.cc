// ai.nee BlockedExpandDepthwise on float32 for the CPU provider: a pointwise
// conv expanding C channels to E, then a depthwise conv on its result, and
// optionally a pointwise projection of that (ops/blocked_conv.h;
// MobileNetV2's inverted residual blocks, fused by
// opt/fuse_blocked_expand_depthwise.cc).
//
// Unfused, the expanded tensor (6x the block's channels: 96 x 112 x 112 is
// 4.8 MB an image) is written to memory by the first conv and read back by
// the second, and the depthwise conv's output by the projection. Here each
// task takes one image (a strip of its rows, where images are fewer than
// threads) and goes down its depthwise conv's output rows a band at a time:
// it computes the expanded rows the band reads
// (the pointwise tiles BlockedConv would run: the AVX-512 pair tiles,
// blocked_pointwise_avx512.h, or the AVX2 ones) into a per-thread buffer
// sized to stay in L2, runs the depthwise rows (BlockedConv's own
// kernels, blocked_conv_parts.h) from it, and with a projection writes them
// to a second buffer from which the pointwise tiles compute the band's
// output rows. Bands overlap by the window's extra rows (two for a 3x3 stride-1
// conv), which are kept from one band to the next (and computed twice where
// two strips meet).
//
// The same operations as the BlockedConvs' fast kernels, each output a
// single chain in a fixed order computed by one task: bitwise those kernels'
// result, at any thread count and band size. Where the bands do not apply
// (below AVX2; rows too wide for a band) the kernel runs those convs
// themselves, one after the other (RunUnfused).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/cpu/blocked_conv_parts.h"
#include "ep/cpu/blocked_pointwise_avx512.h"
#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/packed_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/blocked_conv.h"

namespace nee::cpu {
namespace {

constexpr int64_t kB = kChannelBlock;

// The expanded rows a band holds at most, in bytes: with the depthwise
// band's output and the convs' weights, within a Zen 4 core's 1 MiB L2.
// Also the best of 64-384 KiB on a Zen 3 core's 512 KiB (MobileNetV2
// batch 8: 128 KiB 3% slower, 384 KiB within 1%).
constexpr int64_t kBandBytes = 256 * 1024;
std::atomic<int64_t> band_bytes{kBandBytes};

struct ExpandDepthwiseWeights {
  PointwisePairs expand;  // empty where expand_avx2 holds it
  // The expansion where BlockedConv runs it on its AVX2 tiles (hosts without
  // AVX-512, and M = 24 on those with it).
  BlockedPointwiseWeights expand_avx2;
  BlockedDepthwiseWeights depthwise;
  PointwisePairs project;  // empty without the projection, or where project_avx2 holds it
  // The projection where BlockedConv runs it on its AVX2 tiles (M = 24: the
  // pair tiles would leave a quarter of their lanes idle; ~20% faster there).
  BlockedPointwiseWeights project_avx2;
};

// The input rows [lo, hi) output rows [oh0, oh1) of the depthwise conv read.
struct RowSpan {
  int64_t lo, hi;
};
RowSpan InputRows(const BlockedConvGeometry& d, int64_t oh0, int64_t oh1) {
  return {std::max<int64_t>(0, oh0 * d.sh - d.pt), std::min(d.H, (oh1 - 1) * d.sh - d.pt + d.KH)};
}

// rows.fn set means BlockedConv's fast path takes the depthwise conv: 3x3,
// dilation 1, E (the projection's input channels too) whole blocks, on AVX2
// or AVX-512; the expansion then takes the tiles BlockedConv would run it on.
bool FastPathApplies(const BlockedExpandDepthwiseGeometry& g, const BlockedDepthwiseRows& rows) {
  const BlockedConvGeometry& d = g.depthwise;
  return rows.fn && (BlockedPointwiseAvx512() || BlockedPointwiseOnAvx2(g.expand)) && g.expand.C % kB == 0 &&
         d.N > 0 && d.OH > 0 && d.OW > 0;
}

// A pointwise conv's finish where its tiles do not apply it: none when they do.
BlockedFinishFn FinishAfterTiles(const BlockedConvGeometry& g) {
  return blocked_tile::InRegisters(g.act.kind) ? nullptr : BlockedFinishFor(g);
}

// One image's output rows [s0, s1), a band of rows at a time, every
// channel. A band's first input rows are often the previous band's
// last ones (the window's overlap: two rows at stride 1, one at stride 2);
// those are moved to the buffer's top rather than computed again
// (recomputing them cost a third more of a 56x56 expand conv's
// multiply-adds with 256 KiB bands).
struct Bands {
  const BlockedExpandDepthwiseGeometry& g;
  const ExpandDepthwiseWeights& wts;
  const BlockedDepthwiseRows& rows;
  int64_t band;      // output rows a band
  int64_t rows_max;  // input rows a band reads at most: each block's rows in the buffer
  float* filtered_out;  // where the depthwise conv writes without the projection: [N, Eb, OH, OW, 8]
  // What finishes each conv's outputs after its kernel, where the kernel does not: null otherwise
  // (a pointwise conv on the AVX2 tiles, PointwiseRowsToAvx2, finishes its rows itself).
  BlockedFinishFn expand_finish = wts.expand_avx2.w.empty() ? FinishAfterTiles(g.expand) : nullptr;
  BlockedFinishFn depthwise_finish = rows.finishes ? nullptr : BlockedFinishFor(g.depthwise);
  BlockedFinishFn project_finish =
      g.projects && wts.project_avx2.w.empty() ? FinishAfterTiles(g.project) : nullptr;

  // `buffer`: rows_max rows of every expanded block; `filtered`: a band of
  // the depthwise conv's output, every block (only with the projection).
  void Run(int64_t n, int64_t s0, int64_t s1, float* buffer, float* filtered) const {
    const BlockedConvGeometry& e = g.expand;
    const BlockedConvGeometry& d = g.depthwise;
    const int64_t W = d.W, block = rows_max * W * kB, Eb = d.Cb();
    RowSpan have{0, 0};  // the input rows the buffer holds, from its top
    for (int64_t oh0 = s0; oh0 < s1; oh0 += band) {
      const int64_t oh1 = std::min(s1, oh0 + band);
      const RowSpan in = InputRows(d, oh0, oh1);
      const int64_t kept = std::max<int64_t>(0, have.hi - in.lo);
      if (kept > 0 && in.lo > have.lo)
        for (int64_t cb = 0; cb < Eb; ++cb) {
          float* top = buffer + cb * block;
          std::memmove(top, top + (in.lo - have.lo) * W * kB, static_cast<size_t>(kept * W * kB) * sizeof(float));
        }
      float* fresh = buffer + kept * W * kB;
      const PointwiseOut out{fresh, nullptr, rows_max * W, (in.lo + kept) * W};
      if (!wts.expand_avx2.w.empty())
        PointwiseRowsToAvx2(e, wts.expand_avx2, n, (in.lo + kept) * W, in.hi * W, out);
      else
        PointwiseRowsToAvx512(e, wts.expand, !expand_finish, n, (in.lo + kept) * W, in.hi * W, 0, Eb, out);
      if (expand_finish)
        for (int64_t cb = 0; cb < Eb; ++cb)
          expand_finish(e.act, nullptr, fresh + cb * block, (in.hi - in.lo - kept) * W * kB);
      have = in;
      Depthwise(n, in, oh0, oh1, buffer, filtered);
      if (g.projects) Project(n, oh0, oh1, filtered);
    }
  }

  // The depthwise conv over the buffer's rows as if they were the whole
  // input: rows past either end are never read (InputRows), and output row
  // oh reads buffer row oh * sh - pt - in.lo + kh. With the projection the
  // band's rows go to `filtered` (output row oh0 its first), else to the
  // depthwise output's planes.
  void Depthwise(int64_t n, RowSpan in, int64_t oh0, int64_t oh1, const float* buffer, float* filtered) const {
    const BlockedConvGeometry& d = g.depthwise;
    const int64_t block = rows_max * d.W * kB, rows_out = oh1 - oh0;
    BlockedConvGeometry over_band = d;
    over_band.H = in.hi - in.lo;
    over_band.pt = d.pt + in.lo - (g.projects ? oh0 * d.sh : 0);
    const int64_t first = g.projects ? 0 : oh0;  // the band's first row as the kernel numbers it
    for (int64_t cb = 0; cb < d.Cb(); ++cb) {
      float* y = g.projects ? filtered + cb * rows_out * d.OW * kB
                            : filtered_out + (n * d.Cb() + cb) * d.OH * d.OW * kB;
      rows.fn(over_band, buffer + cb * block, wts.depthwise.w.data() + cb * d.KH * d.KW * kB,
              wts.depthwise.bias.data() + cb * kB, y, nullptr, first, first + rows_out);
      if (depthwise_finish) depthwise_finish(d.act, nullptr, y + first * d.OW * kB, rows_out * d.OW * kB);
    }
  }

  // The projection of the band's rows (`filtered`, every block) into the
  // node's output rows [oh0, oh1).
  void Project(int64_t n, int64_t oh0, int64_t oh1, const float* filtered) const {
    const BlockedConvGeometry& p = g.project;
    BlockedConvGeometry over_band = p;
    over_band.x = filtered;
    over_band.H = oh1 - oh0;
    const int64_t pixels = (oh1 - oh0) * p.W, plane = p.OH * p.OW * kB;
    const int64_t at = n * p.Mb() * plane + oh0 * p.OW * kB;
    const PointwiseOut out{p.y + at, p.z ? p.z + at : nullptr, p.OH * p.OW, 0};
    if (!wts.project_avx2.w.empty()) return PointwiseRowsToAvx2(over_band, wts.project_avx2, 0, 0, pixels, out);
    PointwiseRowsToAvx512(over_band, wts.project, !project_finish, 0, 0, pixels, 0, p.Mb(), out);
    if (project_finish)
      for (int64_t ob = 0; ob < p.Mb(); ++ob)
        project_finish(p.act, p.z ? p.z + at + ob * plane : nullptr, p.y + at + ob * plane, pixels * kB);
  }
};

// How a run's work is cut. Images are shared out whole; where there are
// fewer than threads, each image's rows in strips, one a thread, whose first
// band's rows are computed anew (the expanded rows a strip's window shares
// with the strip before it: 3.6% of a 56x56 expand conv's rows at 2
// threads). Channel groups instead, which share no rows, measured 3-5%
// slower on MobileNetV2 at 2 threads: the projection needs every channel of
// a pixel, so they wrote the whole depthwise output and projected after
// it, and each thread then read half its next layer's input from the
// other core.
struct BandPlan {
  int64_t strips = 1;           // per image
  int64_t band = 0;             // output rows a band
  int64_t rows_max = 0;         // input rows a band reads at most
  int64_t buffer_floats = 0;    // a task's expanded rows: rows_max rows of every block
  int64_t filtered_floats = 0;  // a task's band of depthwise output (with the projection)

  int64_t Bytes() const { return (buffer_floats + filtered_floats) * static_cast<int64_t>(sizeof(float)); }
};

BandPlan PlanBands(const BlockedExpandDepthwiseGeometry& g, int threads) {
  const BlockedConvGeometry& d = g.depthwise;
  BandPlan p;
  if (d.N < threads) p.strips = std::min<int64_t>(d.OH, (threads + d.N - 1) / d.N);
  // As many output rows as keep the band's input rows within the band bytes (at least one).
  const int64_t row_bytes = std::max<int64_t>(1, d.Cb() * kB * d.W * static_cast<int64_t>(sizeof(float)));
  const int64_t extra = d.KH - d.sh;  // input rows a band reads beyond sh per output row
  p.band = std::clamp<int64_t>((band_bytes.load(std::memory_order_relaxed) / row_bytes - extra) / d.sh, 1, d.OH);
  p.rows_max = std::min(d.H, p.band * d.sh + extra);
  p.buffer_floats = d.Cb() * p.rows_max * d.W * kB;
  if (g.projects) p.filtered_floats = d.Cb() * p.band * d.OW * kB;
  return p;
}

// The buffers are allocated by the threads that run the tasks, where a
// failed allocation could not be reported: a band whose rows are wider than
// this (a 3x3 window's rows over ~170,000 pixels of 8 channels) runs
// unfused instead (RunUnfused), which allocates on the calling thread.
constexpr int64_t kMaxBufferBytes = 16 << 20;

// The bands, writing the depthwise output to `filtered_out` unless they project.
void RunBands(KernelContext& ctx, const BlockedExpandDepthwiseGeometry& g, const ExpandDepthwiseWeights& wts,
              const BlockedDepthwiseRows& rows, const BandPlan& plan, float* filtered_out) {
  const BlockedConvGeometry& d = g.depthwise;
  const Bands bands{g, wts, rows, plan.band, plan.rows_max, filtered_out};
  ParallelTasks(ctx, d.N * plan.strips, [&](int64_t t) {
    const int64_t n = t / plan.strips, strip = t % plan.strips;
    thread_local SgemmScratch scratch;
    float* buffer = scratch.Get(plan.buffer_floats + plan.filtered_floats);
    bands.Run(n, strip * d.OH / plan.strips, (strip + 1) * d.OH / plan.strips, buffer, buffer + plan.buffer_floats);
  });
}

// The elements of a conv's output.
int64_t OutputFloats(const BlockedConvGeometry& conv) {
  int64_t n = 1;
  for (int64_t dim : conv.OutputDims()) n *= dim;
  return n;
}

// Where the bands do not apply: the convs one after the other, as
// BlockedConv's fast kernel runs them, through whole intermediate tensors
// (allocated here, on the calling thread; the same bits as the bands).
Status RunUnfused(KernelContext& ctx, BlockedExpandDepthwiseGeometry g) {
  thread_local SgemmScratch scratch;  // the calling thread's, kept from run to run
  const int64_t expanded = OutputFloats(g.expand), filtered = g.projects ? OutputFloats(g.depthwise) : 0;
  float* buffer = scratch.Get(std::max<int64_t>(1, expanded + filtered));
  g.expand.y = buffer;
  g.depthwise.x = buffer;
  if (g.projects) {
    g.depthwise.y = buffer + expanded;
    g.project.x = buffer + expanded;
  }
  RunBlockedPointwiseOrDepthwise(ctx, g.expand, 1);
  RunBlockedPointwiseOrDepthwise(ctx, g.depthwise, 3);
  if (g.projects) RunBlockedPointwiseOrDepthwise(ctx, g.project, 5);
  return Status::Ok();
}

}  // namespace

void BlockedExpandDepthwiseBandBytes(int64_t bytes) { band_bytes = bytes > 0 ? bytes : kBandBytes; }

Status BlockedExpandDepthwiseFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedExpandDepthwiseGeometry g, PlanBlockedExpandDepthwise(ctx));
  const BlockedDepthwiseRows rows = BlockedDepthwiseKernelFor(g.depthwise);
  const bool fast = FastPathApplies(g, rows);
  const BandPlan plan = fast ? PlanBands(g, NumThreads(ctx)) : BandPlan{};
  if (!fast || plan.Bytes() > kMaxBufferBytes) return RunUnfused(ctx, g);
  const BlockedConvGeometry& e = g.expand;
  const BlockedConvGeometry& d = g.depthwise;
  const int64_t P = g.projects ? g.project.M : 0;
  // The layouts depend on the ISA (tests change it at run time): part of the key.
  const int64_t layouts =
      (BlockedPointwiseOnAvx2(e) ? 1 : 0) + (g.projects && BlockedPointwiseOnAvx2(g.project) ? 2 : 0);
  auto packed = PackedOnce<ExpandDepthwiseWeights>(ctx, {e.C, e.M, d.KH, d.KW, P, layouts}, {1, 2, 3, 4, 5, 6}, [&] {
    auto p = std::make_shared<ExpandDepthwiseWeights>();
    if (BlockedPointwiseOnAvx2(e)) PackBlockedPointwise(e, &p->expand_avx2);
    else PackPointwisePairs(e, &p->expand);
    PackBlockedDepthwise(d, &p->depthwise);
    if (g.projects && BlockedPointwiseOnAvx2(g.project)) PackBlockedPointwise(g.project, &p->project_avx2);
    else if (g.projects) PackPointwisePairs(g.project, &p->project);
    return std::shared_ptr<const ExpandDepthwiseWeights>(std::move(p));
  });
  RunBands(ctx, g, *packed, rows, plan, d.y);
  return Status::Ok();
}

}  // namespace nee::cpu
