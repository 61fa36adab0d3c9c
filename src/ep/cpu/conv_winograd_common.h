// What the two Winograd convolutions share (internal to conv_winograd.cc,
// F(2x2, 3x3), and conv_winograd43.cc, F(4x4, 3x3)): the block of tile rows a
// task takes, the transformed input's layout in SGEMM's packed B panels, the
// per-thread scratch and the way a phase is shared out among threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

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
// columns it never stores).
inline void ZeroPanelPadding(const PackedV& pv, int elems) {
  const int64_t padded = PackedV::RoundUp32(pv.cols);
  if (padded == pv.cols) return;
  for (int e = 0; e < elems; ++e)
    for (int64_t c = 0; c < pv.c; ++c)
      for (int64_t j = pv.cols; j < padded;) {  // one run of the last panel at a time
        const int64_t run_end = std::min(padded, (j / kSgemmPanelRun + 1) * kSgemmPanelRun);
        float* at = pv.matrix(e) + SgemmPackedBIndex(pv.c, pv.cols, c, j);
        std::fill(at, at + (run_end - j), 0.f);
        j = run_end;
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

}  // namespace nee::cpu::winograd_common
