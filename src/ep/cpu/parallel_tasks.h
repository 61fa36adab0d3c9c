// Dynamic task distribution for the CPU provider's kernels.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "ops/op_schema.h"

namespace nee::cpu {

// Runs fn(task) for every task in [0, n) on the context's threads. Each
// thread claims the next unclaimed task when it finishes one, so a thread
// that starts late (on a busy machine) or runs slowly simply does fewer
// tasks instead of holding up the others with a fixed share. Which thread
// runs a task never changes what it computes, so kernels whose tasks write
// disjoint outputs stay bitwise deterministic.
// The number of threads the context's pool runs (1 without a pool).
inline int NumThreads(const KernelContext& ctx) { return ctx.pool() ? ctx.pool()->num_threads() : 1; }

template <typename Fn>
void ParallelTasks(const KernelContext& ctx, int64_t n, Fn&& fn) {
  const int threads = NumThreads(ctx);
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  std::atomic<int64_t> next{0};
  ctx.ParallelFor(std::min<int64_t>(threads, n), 1, [&](int64_t, int64_t) {
    for (int64_t t = next.fetch_add(1, std::memory_order_relaxed); t < n; t = next.fetch_add(1, std::memory_order_relaxed))
      fn(t);
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

// ParallelTasks for a kernel whose tasks run over its output's pixels in
// order (pixel-major: image, then rows or runs of pixels): each thread takes
// one contiguous share of the tasks, in order, instead of claiming them one
// at a time, so consecutive such layers leave a thread the pixels it wrote
// last, in its own caches, rather than handing half of them to the other
// core (at 2 threads: MobileNetV2's blocked 112x112 and 56x56 layers 22-30%
// faster, YOLO's 160x160 convs 7-17%). This holds for small layers too: on
// this VM the host places the two vCPUs near (a cache line's round trip
// ~100 ns) or far apart (~450 ns) for minutes at a time, and far apart every
// line the other core wrote is slow to fetch (with contiguous shares for
// every size, not only from 512 KiB of output: MobileNetV2 2 threads -4 to
// -8% far apart, -2% near; YOLO -3% / -1%; ResNet-50 level). A thread that
// finishes its share then claims what is left of the others', front first,
// so a thread that starts late (the other core busy) does less instead of
// holding the layer up. Which thread runs a task never changes what it
// computes.
template <typename Fn>
void PixelMajorTasks(const KernelContext& ctx, int64_t n, Fn&& fn) {
  const int threads = NumThreads(ctx);
  if (threads <= 1 || n <= 1) return ParallelTasks(ctx, n, fn);
  auto next = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(threads));
  for (int s = 0; s < threads; ++s) next[s].store(s * n / threads, std::memory_order_relaxed);
  ctx.ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t share = begin; share < end; ++share)
      for (int64_t k = 0; k < threads; ++k) {
        const int64_t s = (share + k) % threads, stop = (s + 1) * n / threads;
        for (int64_t t = next[s].fetch_add(1, std::memory_order_relaxed); t < stop;
             t = next[s].fetch_add(1, std::memory_order_relaxed))
          fn(t);
      }
  });
}

}  // namespace nee::cpu
