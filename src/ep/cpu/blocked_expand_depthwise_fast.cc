// ai.nee BlockedExpandDepthwise on float32 for the CPU provider: a pointwise
// conv expanding C channels to E, then a depthwise conv on its result
// (ops/blocked_conv.h; MobileNetV2's inverted residual blocks, fused by
// opt/fuse_blocked_expand_depthwise.cc).
//
// Unfused, the expanded tensor (6x the block's channels: 96 x 112 x 112 is
// 4.8 MB an image) is written to memory by the first conv and read back by
// the second. Here each task takes one image (a group of its channels, where
// images are fewer than threads) and goes down its depthwise conv's output
// rows a band at a time: it computes the expanded rows the band reads (the
// pointwise pair tiles, blocked_pointwise_avx512.h) into a per-thread buffer
// sized to stay in L2, and runs the depthwise rows (BlockedConv's own
// kernels, blocked_conv_parts.h) from it. Bands overlap by the window's extra
// rows (two for a 3x3 stride-1 conv), which are kept from one band to the next.
//
// The same operations as the two BlockedConvs' fast kernels, each output a
// single chain in a fixed order computed by one task: bitwise those kernels'
// result, at any thread count and band size.
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
// band's output and the two convs' weights, within a Zen 4 core's 1 MiB L2.
constexpr int64_t kBandBytes = 256 * 1024;
std::atomic<int64_t> band_bytes{kBandBytes};

struct ExpandDepthwiseWeights {
  PointwisePairs expand;
  BlockedDepthwiseWeights depthwise;
};

// The input rows [lo, hi) output rows [oh0, oh1) of the depthwise conv read.
struct RowSpan {
  int64_t lo, hi;
};
RowSpan InputRows(const BlockedConvGeometry& d, int64_t oh0, int64_t oh1) {
  return {std::max<int64_t>(0, oh0 * d.sh - d.pt), std::min(d.H, (oh1 - 1) * d.sh - d.pt + d.KH)};
}

bool FastPathApplies(const BlockedExpandDepthwiseGeometry& g, const BlockedDepthwiseRows& rows) {
  const BlockedConvGeometry& e = g.expand;
  const BlockedConvGeometry& d = g.depthwise;
  return rows.fn && BlockedPointwiseAvx512() && e.pointwise() && e.C % kB == 0 && d.dh == 1 && d.N > 0 &&
         d.OH > 0 && d.OW > 0;
}

// One image's expanded channel blocks [ob0, ob1), every output row, a band
// of rows at a time. A band's first input rows are often the previous band's
// last ones (the window's overlap: two rows at stride 1, one at stride 2);
// those are moved to the buffer's top rather than computed again
// (recomputing them cost a third more of a 56x56 expand conv's
// multiply-adds with 256 KiB bands).
struct Group {
  const BlockedExpandDepthwiseGeometry& g;
  const ExpandDepthwiseWeights& wts;
  const BlockedDepthwiseRows& rows;
  int64_t band;      // output rows a band
  int64_t rows_max;  // input rows a band reads at most: each block's rows in the buffer
  bool expand_in_tiles;
  BlockedFinishFn expand_finish, depthwise_finish;

  void Run(int64_t n, int64_t ob0, int64_t ob1, float* buffer) const {
    const BlockedConvGeometry& e = g.expand;
    const BlockedConvGeometry& d = g.depthwise;
    const int64_t W = d.W, block = rows_max * W * kB, out_plane = d.OH * d.OW * kB;
    RowSpan have{0, 0};  // the input rows the buffer holds, from its top
    for (int64_t oh0 = 0; oh0 < d.OH; oh0 += band) {
      const int64_t oh1 = std::min(d.OH, oh0 + band);
      const RowSpan in = InputRows(d, oh0, oh1);
      const int64_t kept = std::max<int64_t>(0, have.hi - in.lo);
      if (kept > 0 && in.lo > have.lo)
        for (int64_t cb = ob0; cb < ob1; ++cb) {
          float* top = buffer + (cb - ob0) * block;
          std::memmove(top, top + (in.lo - have.lo) * W * kB, static_cast<size_t>(kept * W * kB) * sizeof(float));
        }
      float* fresh = buffer + kept * W * kB;
      PointwiseRowsIntoAvx512(e, wts.expand, expand_in_tiles, n, (in.lo + kept) * W, in.hi * W, ob0, ob1, fresh,
                              rows_max * W);
      if (expand_finish)
        for (int64_t cb = ob0; cb < ob1; ++cb)
          expand_finish(e.act, nullptr, fresh + (cb - ob0) * block, (in.hi - in.lo - kept) * W * kB);
      have = in;
      // The depthwise conv over the buffer's rows as if they were the whole
      // input: rows past either end are never read (InputRows), and output
      // row oh reads buffer row oh * sh - pt - in.lo + kh.
      BlockedConvGeometry over_band = d;
      over_band.H = in.hi - in.lo;
      over_band.pt = d.pt + in.lo;
      for (int64_t cb = ob0; cb < ob1; ++cb) {
        float* y = d.y + (n * d.Cb() + cb) * out_plane;
        rows.fn(over_band, buffer + (cb - ob0) * block, wts.depthwise.w.data() + cb * d.KH * d.KW * kB,
                wts.depthwise.bias.data() + cb * kB, y, nullptr, oh0, oh1);
        if (depthwise_finish) depthwise_finish(d.act, nullptr, y + oh0 * d.OW * kB, (oh1 - oh0) * d.OW * kB);
      }
    }
  }
};

// How a run's work is cut. Images are shared out whole; where there are
// fewer than threads, each image's expanded channels in groups of block
// pairs, one a thread: the depthwise conv is per channel, so the groups share
// no work (strips of rows would compute each strip's first rows twice).
struct BandPlan {
  int64_t pairs = 0, groups = 0;
  int64_t group_blocks = 0;   // the largest group's blocks
  int64_t band = 0;           // output rows a band
  int64_t rows_max = 0;       // input rows a band reads at most
  int64_t buffer_floats = 0;  // a task's buffer: group_blocks x rows_max rows
};

BandPlan PlanBands(const BlockedConvGeometry& d, int threads) {
  BandPlan p;
  p.pairs = (d.Cb() + 1) / 2;
  p.groups = d.N >= threads ? 1 : std::min<int64_t>(p.pairs, (threads + d.N - 1) / d.N);
  p.group_blocks = std::min(d.Cb(), 2 * ((p.pairs + p.groups - 1) / p.groups));
  // As many output rows as keep the band's input rows within the band bytes (at least one).
  const int64_t row_bytes = std::max<int64_t>(1, p.group_blocks * kB * d.W * static_cast<int64_t>(sizeof(float)));
  const int64_t extra = d.KH - d.sh;  // input rows a band reads beyond sh per output row
  p.band = std::clamp<int64_t>((band_bytes.load(std::memory_order_relaxed) / row_bytes - extra) / d.sh, 1, d.OH);
  p.rows_max = std::min(d.H, p.band * d.sh + extra);
  p.buffer_floats = p.group_blocks * p.rows_max * d.W * kB;
  return p;
}

// The buffers are allocated by the threads that run the tasks, where a
// failed allocation could not be reported: a band whose rows are wider than
// this (a 3x3 window's rows over ~170,000 pixels of 8 channels) runs
// unfused instead (RunUnfused), which allocates on the calling thread.
constexpr int64_t kMaxBufferBytes = 16 << 20;

void Run(KernelContext& ctx, const BlockedExpandDepthwiseGeometry& g, const ExpandDepthwiseWeights& wts,
         const BlockedDepthwiseRows& rows, const BandPlan& plan) {
  const BlockedConvGeometry& e = g.expand;
  const BlockedConvGeometry& d = g.depthwise;
  const Group group{g,
                    wts,
                    rows,
                    plan.band,
                    plan.rows_max,
                    blocked_tile::InRegisters(e.act.kind),
                    blocked_tile::InRegisters(e.act.kind) ? nullptr : BlockedFinishFor(e),
                    rows.finishes ? nullptr : BlockedFinishFor(d)};
  ParallelTasks(ctx, d.N * plan.groups, [&](int64_t t) {
    const int64_t n = t / plan.groups, k = t % plan.groups;
    const int64_t ob0 = 2 * (k * plan.pairs / plan.groups);
    const int64_t ob1 = std::min(d.Cb(), 2 * ((k + 1) * plan.pairs / plan.groups));
    thread_local SgemmScratch scratch;
    group.Run(n, ob0, ob1, scratch.Get(plan.buffer_floats));
  });
}

// Where the bands do not apply: the two convs one after the other, as
// BlockedConv's fast kernel runs them, through the whole expanded tensor
// (allocated here, on the calling thread; the same bits as the bands).
Status RunUnfused(KernelContext& ctx, BlockedExpandDepthwiseGeometry g) {
  const std::vector<int64_t> dims = g.expand.OutputDims();
  const int64_t floats = dims[0] * dims[1] * dims[2] * dims[3] * dims[4];
  std::unique_ptr<float[]> expanded(new float[static_cast<size_t>(std::max<int64_t>(1, floats))]);
  g.expand.y = expanded.get();
  g.depthwise.x = expanded.get();
  RunBlockedPointwiseOrDepthwise(ctx, g.expand, 1);
  RunBlockedPointwiseOrDepthwise(ctx, g.depthwise, 3);
  return Status::Ok();
}

}  // namespace

void BlockedExpandDepthwiseBandBytes(int64_t bytes) { band_bytes = bytes > 0 ? bytes : kBandBytes; }

Status BlockedExpandDepthwiseFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedExpandDepthwiseGeometry g, PlanBlockedExpandDepthwise(ctx));
  const BlockedDepthwiseRows rows = BlockedDepthwiseKernelFor(g.depthwise);
  const bool fast = FastPathApplies(g, rows);
  const BandPlan plan = fast ? PlanBands(g.depthwise, NumThreads(ctx)) : BandPlan{};
  if (!fast || plan.buffer_floats * static_cast<int64_t>(sizeof(float)) > kMaxBufferBytes) return RunUnfused(ctx, g);
  const BlockedConvGeometry& e = g.expand;
  const BlockedConvGeometry& d = g.depthwise;
  auto packed = PackedOnce<ExpandDepthwiseWeights>(ctx, {e.C, e.M, d.KH, d.KW}, {1, 2, 3, 4}, [&] {
    auto p = std::make_shared<ExpandDepthwiseWeights>();
    PackPointwisePairs(e, &p->expand);
    PackBlockedDepthwise(d, &p->depthwise);
    return std::shared_ptr<const ExpandDepthwiseWeights>(std::move(p));
  });
  Run(ctx, g, *packed, rows, plan);
  return Status::Ok();
}

}  // namespace nee::cpu
