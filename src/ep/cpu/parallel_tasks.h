// Task distribution for the CPU provider's kernels.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "ops/op_schema.h"

namespace nee::cpu {

// The number of threads the context's pool runs (1 without a pool).
inline int NumThreads(const KernelContext& ctx) { return ctx.pool() ? ctx.pool()->num_threads() : 1; }

// Runs fn(task) for every task in [0, n) on the context's threads, one task
// per pool chunk where there are few, consecutive tasks per chunk where there
// are many. The pool gives each thread a contiguous share of the chunks and
// lets a thread that finishes its share claim what is left of the others'
// (base/thread_pool.h): tasks over an output's pixels in order (image, then
// rows or runs of pixels) thus leave each thread the pixels it wrote in the
// previous layer, in its own caches, rather than handing half of them to the
// other core (at 2 threads: MobileNetV2's blocked 112x112 and 56x56 layers
// 22-30% faster, YOLO's 160x160 convs 7-17%; a 3x3 stride-2 conv over
// 256 channels cut by output channels 2.20 -> 1.54 ms with the vCPUs far
// apart, 1.57 -> 1.42 near), and a thread that starts late (the other core
// busy) does less instead of holding the layer up. Which thread runs a task
// never changes what it computes, so kernels whose tasks write disjoint
// outputs stay bitwise deterministic.
template <typename Fn>
void ParallelTasks(const KernelContext& ctx, int64_t n, Fn&& fn) {
  if (n <= 0) return;
  if (NumThreads(ctx) <= 1 || n == 1) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  ctx.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  });
}

// Where part i of `parts` of a run of `length` items starts when the run is
// processed in tiles of `tile` items: on a whole tile, the tiles shared out
// evenly, so the parts together run no more tiles than the run alone (a
// pixel-major conv's tile costs about as much with one pixel as with six: it
// streams the weights once; 196 pixels in 8 parts of 24 or 25 ran 36 tiles of
// six, not 33).
inline int64_t TileAlignedStart(int64_t i, int64_t parts, int64_t length, int64_t tile) {
  const int64_t tiles = (length + tile - 1) / tile;
  return std::min(length, i * tiles / parts * tile);
}

// How many ranges to cut each image's pixels (or rows) into for
// ParallelImageRanges: one per `min_work` of an image's work, at least one,
// at most four a thread.
inline int64_t RangesPerImage(const KernelContext& ctx, int64_t work, int64_t min_work) {
  return std::clamp<int64_t>(work / std::max<int64_t>(min_work, 1), 1, 4 * NumThreads(ctx));
}

// Runs fn(image, begin, end) over `parts` ranges of [0, extent) in each of
// `images` images, one task each, each range starting on a whole tile
// (TileAlignedStart; tile 1: any item). The blocked layout's kernels cut their
// pixels so, every channel block in each task, as the blocked convs do: each
// thread then handles the pixels it wrote in the previous layer.
template <typename Fn>
void ParallelImageRanges(const KernelContext& ctx, int64_t images, int64_t parts, int64_t extent, int64_t tile,
                         Fn&& fn) {
  ParallelTasks(ctx, images * parts, [&](int64_t t) {
    const int64_t n = t / parts, part = t % parts;
    fn(n, TileAlignedStart(part, parts, extent, tile), TileAlignedStart(part + 1, parts, extent, tile));
  });
}

}  // namespace nee::cpu
