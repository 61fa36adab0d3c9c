// The SGEMM driver: cuts C into tasks, packs what is not packed yet, and runs
// the micro-kernel (sgemm_kernels.cc) over each task's tiles.
//
// Loop structure, outermost first:
//  - column blocks of nc columns: B's panels for the block, all of k, are
//    packed once (in parallel) unless B came packed, or, where FusePackB
//    says so, packed by the micro-kernel as the first row panel reads B;
//  - tasks: mc rows x a few B panels, claimed by threads one at a time. A task
//    packs its mc rows of A for all of k (or uses A's packed panels), reusing
//    them when the same thread's next task covers the same rows;
//  - within a task, k-blocks of kSgemmDepthBlock; for each, every 12-row A
//    panel (kc x 12, broadcast from L1) meets every B panel of the task
//    (kc x 32 as two runs of kc x 16, streamed from L2 by vector loads).
// Tasks split rows and columns only, so a C element is always summed over
// the same k-blocks in the same order; the thread count changes who computes
// it, never how.
#include "ep/cpu/sgemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <unistd.h>
#include <vector>

#include "ep/cpu/sgemm_kernels.h"
#include "ep/cpu/sgemm_pack.h"

namespace nee::cpu {

using sgemm_internal::MicroKernel;

namespace {

constexpr int64_t kRows = kSgemmTileRows;
constexpr int64_t kCols = kSgemmPanelWidth;
constexpr int64_t kKc = kSgemmDepthBlock;
constexpr int64_t kMaxTaskRows = 144;      // rows of A a task keeps packed (x k: its L2 share)
// Up to this many rows (17 panels) stay one row block: cut in two (ViT's 197
// tokens as 108 + 89), each block read all of B again, from L3 or memory,
// and paid again for its first row panel's reads of B from there; one block
// reads B once and re-reads its panels from L2 (A streams through a panel at
// a time). AVX2, 1 thread, thread CPU time, weights cold, 6 alternations:
// 197x2304x768 89.4 -> 92.8 GFLOP/s, 197x3072x768 89.0 -> 91.0, 197x768x3072
// about even.
constexpr int64_t kMaxOneBlockRows = 204;
constexpr int64_t kPackBudget = 2 << 20;   // floats of B packed per call at once (8 MiB)
constexpr int64_t kRetainedScratch = 4 << 20;  // per-thread scratch kept between calls, floats
// Calls deeper than this run as consecutive depth ranges (the same k-blocks in
// the same order, so the same bits), which bounds the per-call buffers.
constexpr int64_t kMaxDepth = 8192;
static_assert(kMaxDepth % kKc == 0, "depth ranges hold whole k-blocks");
// Below both, waking threads costs more than it gains. Few rows (a GEMV) do
// few flops but still stream all of B, which two cores do faster than one.
constexpr double kParallelFlops = 4e6;
constexpr double kParallelBElements = 1 << 18;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

thread_local SgemmScratch t_a_scratch;  // a task's rows of A
thread_local SgemmScratch t_b_scratch;  // a column block of B (the calling thread's)
thread_local SgemmScratch t_a_shared;   // all of A, packed by all threads for all (the calling thread's)

// Panels of one operand: k-block p0 (depth kc) starts at base + p0 * stride,
// and the panels wanted start `first` panels of `width` floats x kc into it.
struct Panels {
  const float* base;
  int64_t stride;
  int64_t first;
  const float* At(int64_t p0, int64_t kc, int64_t width) const { return base + p0 * stride + first * kc * width; }
};

// Everything the tasks of one column block share.
struct Block {
  int64_t m, k0, k, j0, nc;  // rows [0, m), depth [k0, k0 + k), columns [j0, j0 + nc)
  const SgemmA* a;
  const float* a_shared;          // all of A packed for this call (depth range), or null
  Panels b;                       // B's packed panels, unless read in place:
  const float* const* b_rows;     // B's rows k0.. (else null), read from column b_col
  int64_t b_col;
  // Non-null when B is packed by the kernel as it first reads it (FusePackB):
  // b's panels, which the first row panel fills from b_rows and the others read.
  float* b_fill;
  float beta;
  float* c;
  int64_t ldc;
  MicroKernel micro;
  const SgemmEpilogueFn* epilogue;  // null, or applied after the last k-block
  bool b_weights;                   // b's panels were packed beforehand (SgemmPackedB): likely not in cache
  int64_t task_rows, panel_groups, row_blocks;
  bool columns_major;  // tasks ordered column group first (see ColumnsMajor)
};

void ScaleC(float* c, int64_t ldc, int64_t rows, int64_t cols, float beta) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.f) std::fill(row, row + cols, 0.f);
    else
      for (int64_t j = 0; j < cols; ++j) row[j] *= beta;
  }
}

// Rows [i0, i0+mc) x panels [q0, q1) of the block, over all of k.
void RunTile(const Block& x, const Panels& a, int64_t i0, int64_t mc, int64_t q0, int64_t q1) {
  float* c0 = x.c + i0 * x.ldc + x.j0;
  const int64_t col_begin = q0 * kCols, col_end = std::min(q1 * kCols, x.nc);
  if (x.beta != 0.f && x.beta != 1.f) ScaleC(c0 + col_begin, x.ldc, mc, col_end - col_begin, x.beta);
  for (int64_t p0 = 0; p0 < x.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, x.k - p0);
    const bool accumulate = p0 > 0 || x.beta != 0.f;  // beta == 0: the first block overwrites C
    const bool last = p0 + kc == x.k;
    const float* a_block = a.At(p0, kc, kRows);
    const bool read_rows = x.b_rows && !x.b_fill;  // in place for every row panel
    const float* b_block = read_rows ? nullptr : x.b.At(p0, kc, kCols);
    // The first row panel reads each B panel first (from memory, for weights
    // too large for the caches): it has the kernel fetch the next panel into
    // L2 meanwhile, the last one the next k-block's first.
    const int64_t next_kc = std::min(kKc, x.k - p0 - kc);
    const float* next_block = read_rows || next_kc == 0 ? nullptr : x.b.At(p0 + kc, next_kc, kCols);
    // Weights packed beforehand come from memory (a transformer's do), and
    // the first row panel reads each k-block of them alone, a line every six
    // cycles on AVX2, faster than one core draws from memory: so the row
    // panels after the first ask for the next k-block of this task's panels
    // (after the last, the next panel group's first k-block: as a rule this
    // thread's next task), a share per tile (BSource::fetch; only the AVX2
    // assembly sub-tile acts on it). With the C tile fetched late, Zen 3, one
    // thread, thread CPU time, 9 in-process alternations: BERT/GPT-2/ViT
    // shapes +1.3% to +3.9% with the weights in L3, +2.3% to +3.8% from
    // memory (A/A within 0.3%, one case 1%).
    constexpr int64_t kLineFloats = 16;
    const float* fetch = nullptr;
    int64_t fetch_per_tile = 0, fetch_lines = 0;
    const int64_t later_tiles = (CeilDiv(mc, kRows) - 1) * (q1 - q0);
    if (x.b_weights && later_tiles > 0) {
      const int64_t block_panels = CeilDiv(x.nc, kCols);
      if (next_kc > 0) {
        fetch = next_block + q0 * next_kc * kCols;
        fetch_lines = (q1 - q0) * next_kc * kCols / kLineFloats;
      } else if (q1 < block_panels) {
        const int64_t first_kc = std::min(kKc, x.k);
        fetch = x.b.At(0, first_kc, kCols) + q1 * first_kc * kCols;
        fetch_lines = std::min(q1 - q0, block_panels - q1) * first_kc * kCols / kLineFloats;
      }
      fetch_per_tile = CeilDiv(fetch_lines, later_tiles);
    }
    for (int64_t ib = 0; ib < mc; ib += kRows) {
      const float* ai = a_block + ib * kc;
      const int64_t rows = std::min(kRows, mc - ib);
      for (int64_t q = q0; q < q1; ++q) {
        float* tile = c0 + ib * x.ldc + q * kCols;
        const int64_t cols = std::min(kCols, x.nc - q * kCols);
        sgemm_internal::BSource b;
        if (read_rows || (x.b_fill && i0 == 0 && ib == 0)) {
          b.rows = x.b_rows + p0, b.col = x.b_col + q * kCols;
          if (x.b_fill) b.pack_to = x.b_fill + (b_block - x.b.base) + q * kc * kCols;
        } else {
          b.panel = b_block + q * kc * kCols;
          if (ib == 0 && q + 1 < q1) b.next = b.panel + kc * kCols, b.next_kc = kc;
          else if (ib == 0 && next_block) b.next = next_block + q0 * next_kc * kCols, b.next_kc = next_kc;
          if (ib > 0 && fetch) {
            const int64_t first = ((ib / kRows - 1) * (q1 - q0) + (q - q0)) * fetch_per_tile;
            if (first < fetch_lines)
              b.fetch = fetch + first * kLineFloats, b.fetch_lines = std::min(fetch_per_tile, fetch_lines - first);
          }
        }
        x.micro(kc, ai, b, tile, x.ldc, rows, cols, accumulate);
      }
      // The epilogue over this row block's columns at once: at most 12 rows
      // of 16 panels (24 KiB), still in L1, in one call rather than a call
      // per panel (a bias-and-Clip pass took 6% of MobileNetV2 so).
      if (last && x.epilogue)
        (*x.epilogue)(i0 + ib, x.j0 + col_begin, rows, col_end - col_begin, c0 + ib * x.ldc + col_begin, x.ldc);
    }
  }
}

// B panels per task at most (16: 512 columns): one k-block of them takes
// about half of this core's L2, the rest holding the task's rows of A and
// C's lines. (Which columns a task covers never changes a result.)
int64_t MaxTaskPanels() {
  static const int64_t panels = [] {
    long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0) l2 = 1 << 20;
    const int64_t panel_bytes = kKc * kCols * static_cast<int64_t>(sizeof(float));
    return std::clamp<int64_t>(l2 / 2 / panel_bytes, 4, 16);
  }();
  return panels;
}

// Tasks are (row block, panel group), row-block major unless columns_major.
// The pool shares them out (base/thread_pool.h): one contiguous share per
// thread, cut into chunks that get smaller towards its end, each thread
// running its own share first and then what is left of the others'. A
// share covers whole row blocks where there are enough of them, so each
// thread packs only its own rows of A (claimed one at a time from one
// counter, both threads worked on the same row block at once and each packed
// all of A: 1024^3 at 2 threads ran at 1.82x one thread, where ORT's 2.0x).
// A chunk's consecutive groups of one row block run as one range of panels
// (RunRowBlockPanels), so groups can be single panels (SgemmDepthRange)
// without narrowing what a tile range covers, while a share's last chunks
// are a panel or two that the thread done first can take.
//
// The rows of A a thread last packed for a call, kept across its chunks of
// that call, in every column block (each call its own id).
struct PackedRows {
  uint64_t call = 0;
  int64_t i0 = -1;
  const float* buffer = nullptr;  // where (a grown scratch moves)
};
thread_local PackedRows t_packed_rows;
std::atomic<uint64_t> g_sgemm_calls{0};

// Panels [q0, q1) of row block `row_block`, in ranges of at most MaxTaskPanels.
void RunRowBlockPanels(const Block& x, uint64_t call, int64_t row_block, int64_t q0, int64_t q1) {
  const int64_t i0 = row_block * x.task_rows, mc = std::min(x.task_rows, x.m - i0);
  const int64_t padded_rows = RoundUp(x.task_rows, kRows);
  Panels a;
  if (x.a->packed) {
    a = {x.a->packed->block(x.k0), RoundUp(x.m, kRows), i0 / kRows};
  } else if (x.a_shared) {
    a = {x.a_shared, RoundUp(x.m, kRows), i0 / kRows};
  } else {
    // A very large buffer left by an earlier call is dropped here, before this call packs into its scratch.
    if (t_packed_rows.call != call) t_a_scratch.Trim(kRetainedScratch);
    float* buffer = t_a_scratch.Get(padded_rows * x.k);
    if (t_packed_rows.call != call || t_packed_rows.i0 != i0 || t_packed_rows.buffer != buffer) {
      for (int64_t p0 = 0; p0 < x.k; p0 += kKc)
        sgemm_internal::PackA(x.a->view, x.a->alpha, i0, mc, x.k0 + p0, std::min(kKc, x.k - p0),
                              buffer + p0 * padded_rows);
      t_packed_rows = {call, i0, buffer};
    }
    a = {buffer, padded_rows, 0};
  }
  const int64_t ranges = CeilDiv(q1 - q0, MaxTaskPanels());
  for (int64_t r = 0; r < ranges; ++r)
    RunTile(x, a, i0, mc, q0 + r * (q1 - q0) / ranges, q0 + (r + 1) * (q1 - q0) / ranges);
}

// Runs tasks [begin, end), each run of consecutive groups of one row block at once.
void RunTaskRange(const Block& x, uint64_t call, int64_t begin, int64_t end) {
  const int64_t panels = CeilDiv(x.nc, kCols);
  // Groups of nearly equal width (differing by at most one panel).
  auto group_start = [&](int64_t group) { return group * panels / x.panel_groups; };
  for (int64_t t = begin; t < end;) {
    const int64_t row_block = x.columns_major ? t % x.row_blocks : t / x.panel_groups;
    const int64_t group = x.columns_major ? t / x.row_blocks : t % x.panel_groups;
    // Column-major: the next task is the next row block's.
    const int64_t groups = x.columns_major ? 1 : std::min(end - t, x.panel_groups - group);
    RunRowBlockPanels(x, call, row_block, group_start(group), group_start(group + groups));
    t += groups;
  }
}

// Runs fn(unit) for units [0, n) on up to `threads` threads, claimed one at a time.
template <typename Fn>
void Parallel(ThreadPool* pool, int threads, int64_t n, Fn&& fn) {
  std::atomic<int64_t> next{0};
  auto work = [&](int64_t, int64_t) { fn(next); };
  if (threads > 1 && n > 1) pool->ParallelFor(std::min<int64_t>(threads, n), 1, work);
  else work(0, 1);
}

// Packs B's columns [j0, j0+nc), rows [k0, k0+k), into `out` (k-block p0 at p0 * padded nc).
void PackBlockOfB(const SgemmB& b, int64_t k0, int64_t k, int64_t j0, int64_t nc, float* out, ThreadPool* pool,
                  int threads) {
  const int64_t padded = RoundUp(nc, kCols);
  if (b.pack && threads == 1) {  // one call per k-block
    for (int64_t p0 = 0; p0 < k; p0 += kKc) (*b.pack)(k0 + p0, std::min(kKc, k - p0), j0, nc, out + p0 * padded);
    return;
  }
  if (b.rows) {  // rows not read in place: copied into the panels
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0);
      for (int64_t p = 0; p < kc; ++p) SgemmPackBRow(b.rows[k0 + p0 + p] + j0, nc, kc, p, out + p0 * padded);
    }
    return;
  }
  // Units of eight panels of one k-block, shared out among the threads.
  constexpr int64_t kUnitPanels = 8;
  const int64_t groups = CeilDiv(padded / kCols, kUnitPanels), units = CeilDiv(k, kKc) * groups;
  Parallel(pool, threads, units, [&](std::atomic<int64_t>& next) {
    for (int64_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
      const int64_t p0 = u / groups * kKc, kc = std::min(kKc, k - p0);
      const int64_t jb = u % groups * kUnitPanels * kCols;
      const int64_t cols = std::min(kUnitPanels * kCols, nc - jb);
      float* unit_out = out + p0 * padded + jb * kc;
      // A packer (a convolution's im2col) runs on every thread too: packing
      // all of B on the calling thread left the other idle (magika's 1-D conv,
      // 1280 x 508 im2col, scaled 1.63x at 2 threads).
      if (b.pack) (*b.pack)(k0 + p0, kc, j0 + jb, cols, unit_out);
      else sgemm_internal::PackB(b.view, k0 + p0, kc, j0 + jb, cols, unit_out);
    }
  });
}

// Whether the micro-kernel reads a plain B where it lies instead of packing
// it first. Packing costs a pass over B, which pays when B is reused by
// many row panels of A; the in-place read only needs B's rows contiguous
// (row-major), which a pointwise convolution's input and most activations are.
// Measured on pointwise convs (AVX-512, 1 thread; AVX2 alike): in place was 20% faster
// with 32 rows of A or 49 columns, and 5-9% slower with 255 rows of A over
// 6400 columns, where each k-block of a panel spans that many distant rows
// (pages, L1 sets) and is read 22 times.
// Rows of B a multiple of 4 KiB apart (a 128x128 or 160x160 image's
// channels) all fall in the same few sets of L1, which holds only 8 lines per
// set: read in place, the kernel's kc rows evict each other on every pass
// (2.5x slower measured on a 32-channel 128x128 pointwise conv). Such a B is
// packed instead. True when consecutive rows fall in fewer than 16 distinct
// 64-byte positions modulo 4 KiB.
bool RowsAlias(int64_t row_stride_floats) {
  const int64_t offset = row_stride_floats * static_cast<int64_t>(sizeof(float)) % 4096;
  if (offset == 0) return true;
  int64_t a = offset, b = 4096;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return 4096 / std::max<int64_t>(a, 64) < 16;  // a = gcd(offset, 4096)
}

bool ReadBInPlace(int64_t m, int64_t n, int64_t k, const SgemmB& b) {
  constexpr int64_t kFewRows = 4 * kRows;    // B read by at most four row panels
  constexpr int64_t kSmallSpan = 64 * 1024;  // floats: B's rows span at most 256 KiB
  if (!SgemmReadsBInPlace()) return false;
  if (b.rows) return m <= kFewRows;  // scattered rows: packed once they are read many times
  // Rows that overlap (a broadcast B, row stride 0) are packed as before.
  if (b.packed || b.panels || b.pack || b.view.col_stride != 1 || b.view.row_stride < n) return false;
  if (k > 1 && RowsAlias(b.view.row_stride)) return false;
  // A small B read by many row panels pays only where L1 is large and one
  // load is one cache line (AVX-512); AVX2 reads in place for few rows only.
  const bool small_span = SgemmActiveIsa() == SgemmIsa::kAvx512 && k * b.view.row_stride <= kSmallSpan;
  return m <= kFewRows || small_span;
}

// A (rows [0, m), depth [k0, k0 + k)) packed into `out` by all threads, laid
// out as SgemmPackedA lays out its blocks (k-block p0 at p0 * RoundUp(m, 12)).
void PackAllOfA(const SgemmA& a, int64_t m, int64_t k0, int64_t k, float* out, ThreadPool* pool, int threads) {
  const int64_t padded = RoundUp(m, kRows), panels = padded / kRows, units = CeilDiv(k, kKc) * panels;
  Parallel(pool, threads, units, [&](std::atomic<int64_t>& next) {
    for (int64_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
      const int64_t p0 = u / panels * kKc, kc = std::min(kKc, k - p0), i0 = u % panels * kRows;
      sgemm_internal::PackA(a.view, a.alpha, i0, std::min(kRows, m - i0), k0 + p0, kc, out + p0 * padded + i0 * kc);
    }
  });
}

// Whether A is packed once for all threads before the tasks run. A task packs
// its rows of A itself (right before using them, while they are in L2), so
// when a row block's tasks (its column groups) go to several threads, each
// packs the same rows: with fewer row blocks than threads (BERT's 128 tokens
// are one) every thread packed all of A. Packed up front instead, a
// 128x3072x768 GEMM at 2 threads ran 1-3% faster; with a row block or more
// per thread, the shares keep each block on one thread and nothing is shared.
// Whether all of A (rows [0, m), depth k) is small enough to pack once for all threads.
bool FitsSharedA(int64_t m, int64_t k) {
  constexpr int64_t kMaxSharedFloats = 4 << 20;  // 16 MiB
  return RoundUp(m, kRows) * k <= kMaxSharedFloats;
}

bool ShareA(const SgemmA& a, int64_t m, int64_t k, int threads, int64_t row_blocks, bool columns_major) {
  return !a.packed && threads > 1 && (row_blocks < threads || columns_major) && FitsSharedA(m, k);
}

// Whether the tasks go column group first, so that each thread's share is a
// run of whole columns over all rows, instead of row block first. With a few
// row blocks of unequal height (ViT's 197 rows: 108 + 89) a row-major share
// was one thread's block, so the threads' shares differed by a fifth and each
// read all of B, the large operand; the thread done first then took the
// other's last task, packing its rows of A again. Column-major shares are
// equal and each reads its half of B. A is then packed once for all threads
// (ShareA), since a thread's tasks take every row block in turn.
bool ColumnsMajor(const SgemmA& a, int64_t m, int64_t k, int threads, int64_t row_blocks, bool rows_first) {
  return threads > 1 && !rows_first && row_blocks >= 2 && row_blocks < 2 * threads && (a.packed || FitsSharedA(m, k));
}

// Whether the micro-kernel packs B as the first row panel reads it (B's
// rows read in place, BSource::pack_to) instead of in a packing pass before
// the tasks, which wrote the column block of B out and had the tasks read it
// back. Only where the first row block's tasks run before the others' (one
// thread: tasks go row block first) or there is one row block (each panel of
// a k-block belongs to one task): the thread that reads a panel packed has
// packed it, or did so in an earlier task. And only for a block
// of B that can sit in L2 (1 MiB: a pointwise conv's 128-256 channels x 800
// pixels): the in-place reads take one line from each of kc rows, which from
// L3 cost more than the pass's sequential copy. AVX2, 1 thread, thread CPU
// time, B's rows 6400 floats apart as YOLO's 80x80 maps (fused vs pass,
// 15 alternations): 32x912x128 +10%, 64x800x128 +7%, 64x800x256 +9%,
// 128x800x128 +2.5%, 128x400x256 +4%; 64x3136x576 (7 MiB of B) was -18%.
constexpr int64_t kMaxFusedFloats = 1 << 18;

bool FusePackB(int threads, int64_t row_blocks, int64_t k, int64_t block_cols) {
  return (threads == 1 || row_blocks == 1) && k * block_cols <= kMaxFusedFloats;
}

// Whether B that ReadBInPlace would have every row panel read in place is
// better packed by the first (FusePackB): it is, on AVX2, from three row
// panels on. 1 thread, thread CPU time, 15 alternations, fused vs in place:
// 30x800x128 +6%, 36x800x256 +9%, 48x800x256 +12%, 48x400x512 +24%; with two
// row panels 16x800x256 +7%, 24x800x256 +4%, but attention's small products
// (24x64x48: GPT-2's causal blocks times V) were as often slower: left in place.
// (Only where the fused path then applies: one row block, which rows cut
// first at several threads, for n < m, would not leave.)
bool FuseRatherThanReadInPlace(int64_t m, int64_t n, int64_t k, int threads) {
  return sgemm_internal::PacksWhileReading(SgemmActiveIsa()) && m > 2 * kRows && k * n <= kMaxFusedFloats &&
         m <= kMaxTaskRows && (threads == 1 || n >= m);
}

// C = A[:, k0:k0+k] B[k0:k0+k, :] + beta C.
void SgemmDepthRange(int64_t m, int64_t n, int64_t k0, int64_t k, const SgemmA& a, const SgemmB& b, float beta,
                     float* c, int64_t ldc, ThreadPool* pool, const SgemmEpilogueFn* epilogue) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool worth_threads = flops >= kParallelFlops || static_cast<double>(n) * static_cast<double>(k) >= kParallelBElements;
  const int threads = pool && worth_threads ? pool->num_threads() : 1;
  const bool row_major_b = b.rows || (!b.packed && !b.panels && !b.pack && b.view.col_stride == 1);
  const bool in_place = ReadBInPlace(m, n, k, b) && !FuseRatherThanReadInPlace(m, n, k, threads);
  // Column blocks bound the B packed per call; B packed beforehand (or not at all) needs none.
  const int64_t block_cols = b.packed || b.panels || in_place
                                 ? n
                                 : std::min(n, std::max<int64_t>(8 * kCols, kPackBudget / k / kCols * kCols));
  Block x{};
  x.m = m;
  x.k0 = k0;
  x.k = k;
  x.a = &a;
  x.beta = beta;
  x.c = c;
  x.ldc = ldc;
  x.micro = sgemm_internal::KernelFor(SgemmActiveIsa());
  x.epilogue = epilogue;
  // Tasks are blocks of rows (a task's rows of A packed in its share of L2),
  // then groups of columns when rows alone give too few. Where B is the
  // smaller operand (fewer columns than rows: weights times a small image's
  // pixels, 576 x 196), rows are cut finer first, down to one panel a task:
  // split by columns, every thread would read nearly all of A, the large
  // operand, where split by rows the threads share B.
  const bool rows_first = threads > 1 && block_cols < m;
  int64_t row_blocks = m <= kMaxOneBlockRows ? 1 : CeilDiv(m, kMaxTaskRows);
  if (rows_first) row_blocks = std::max(row_blocks, std::min<int64_t>(4 * threads, CeilDiv(m, kRows)));
  x.task_rows = std::min(m, RoundUp(CeilDiv(m, row_blocks), kRows));
  row_blocks = CeilDiv(m, x.task_rows);  // rounding up to whole panels may leave fewer
  x.row_blocks = row_blocks;
  const bool fuse_pack = !in_place && row_major_b && sgemm_internal::PacksWhileReading(SgemmActiveIsa()) &&
                         FusePackB(threads, row_blocks, k, block_cols);
  // A strided B read in place gets a table of its row pointers, as SgemmB::Rows has.
  thread_local std::vector<const float*> t_rows;
  const float* const* row_table = b.rows;
  if ((in_place || fuse_pack) && !b.rows) {
    t_rows.resize(static_cast<size_t>(k0 + k));
    for (int64_t p = k0; p < k0 + k; ++p) t_rows[p] = b.view.data + p * b.view.row_stride;
    row_table = t_rows.data();
  }
  x.columns_major = ColumnsMajor(a, m, k, threads, row_blocks, rows_first);
  x.a_shared = nullptr;
  if (ShareA(a, m, k, threads, row_blocks, x.columns_major)) {
    float* shared = t_a_shared.Get(RoundUp(m, kRows) * k);
    PackAllOfA(a, m, k0, k, shared, pool, threads);
    x.a_shared = shared;
  }
  // One id for every column block: the rows of A a thread packs do not depend on the columns.
  const uint64_t call = g_sgemm_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  for (int64_t j0 = 0; j0 < n; j0 += block_cols) {
    x.j0 = j0;
    x.nc = std::min(block_cols, n - j0);
    const int64_t panels = CeilDiv(x.nc, kCols);
    if (in_place) {
      x.b_rows = row_table + k0;
      x.b_col = j0;
    } else if (b.packed) {
      x.b = {b.packed->block(k0), RoundUp(n, kCols), j0 / kCols};
      x.b_weights = true;
    } else if (b.panels) {
      x.b = {b.panels + k0 * RoundUp(n, kCols), RoundUp(n, kCols), j0 / kCols};
    } else {
      float* buffer = t_b_scratch.Get(RoundUp(x.nc, kCols) * k);
      if (fuse_pack) {
        x.b_rows = row_table + k0;
        x.b_col = j0;
        x.b_fill = buffer;
      } else {
        PackBlockOfB(b, k0, k, j0, x.nc, buffer, pool, threads);
      }
      x.b = {buffer, RoundUp(x.nc, kCols), 0};
    }
    // Panel groups: on one thread, or where rows alone give the threads
    // enough tasks, as few as keep a task's panels in L2. Row-block major on
    // several threads, single panels, which the pool's chunks gather
    // (RunTaskRange). Column-major shares hold whole column groups (every row
    // block of them), about four a thread, as many as a multiple of the
    // threads so that the shares are equal: ViT's qkv (72 panels) made 5
    // groups of 2 row blocks (108 + 89 rows), and the thread with three
    // 108-row tasks ran 4% longer than the other, which then idled; the
    // groups' widths differ by at most one panel (72 panels as 10 groups of 7
    // or 8: a fixed width of ceil(72 / 10) = 8 would leave 9 groups again).
    const bool rows_suffice = rows_first && row_blocks >= 2 * threads;
    const int64_t fewest_groups = CeilDiv(panels, MaxTaskPanels());
    int64_t groups = fewest_groups;
    if (threads > 1 && !rows_suffice && !x.columns_major) {
      groups = panels;
    } else if (threads > 1 && !rows_suffice) {
      groups = std::clamp(CeilDiv(4 * threads, row_blocks), fewest_groups, panels);
      groups = std::min(RoundUp(groups, threads), panels);
    }
    x.panel_groups = groups;
    const int64_t tasks = row_blocks * x.panel_groups;
    if (threads > 1 && tasks > 1) {
      pool->ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) { RunTaskRange(x, call, begin, end); });
    } else {
      RunTaskRange(x, call, 0, tasks);
    }
  }
  t_b_scratch.Trim(kRetainedScratch);
  t_a_shared.Trim(kRetainedScratch);
}

}  // namespace

void Sgemm(int64_t m, int64_t n, int64_t k, const SgemmA& a, const SgemmB& b, float beta, float* c, int64_t ldc,
           ThreadPool* pool, const SgemmEpilogueFn* epilogue) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || (!a.packed && a.alpha == 0.f)) {
    if (beta != 1.f) ScaleC(c, ldc, m, n, beta);
    if (epilogue) (*epilogue)(0, 0, m, n, c, ldc);
    return;
  }
  for (int64_t k0 = 0; k0 < k; k0 += kMaxDepth) {
    const int64_t depth = std::min(kMaxDepth, k - k0);
    const bool last_range = k0 + depth == k;
    SgemmDepthRange(m, n, k0, depth, a, b, k0 == 0 ? beta : 1.f, c, ldc, pool, last_range ? epilogue : nullptr);
  }
}

}  // namespace nee::cpu
