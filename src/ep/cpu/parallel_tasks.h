// Dynamic task distribution for the CPU provider's kernels.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

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

}  // namespace nee::cpu
