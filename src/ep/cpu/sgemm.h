// Single-precision matrix multiply for the CPU provider:
//   C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]
// with A and B given by row/column strides (so transposes are free), or
// packed once beforehand (a constant operand: weights), or, for B, written
// straight into the packed layout by a producer (convolution's im2col).
//
// The micro-kernel is chosen at run time by CPU feature detection: AVX-512
// (a 12x32 register tile), AVX2+FMA, or portable C++; release builds never
// assume an ISA at compile time. All three read the same packed layout.
//
// Results do not depend on the thread count: threads split C into tiles
// (over rows and columns, never over k), and each element's sum over k runs
// in the same order, in fixed blocks of kSgemmDepthBlock, whichever thread
// computes it. Packing an operand beforehand does not change a result either.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "base/thread_pool.h"

namespace nee::cpu {

struct MatrixView {
  const float* data;
  int64_t row_stride;  // elements between (i, k) and (i+1, k)
  int64_t col_stride;  // elements between (i, k) and (i, k+1)
};

// The packed layout. The k dimension is cut into blocks of kSgemmDepthBlock
// (the last one shorter). Within a block of depth kc, B is a run of panels
// of kSgemmPanelWidth columns (columns past n zero), each stored as two runs
// of kSgemmPanelRun columns, each run kc rows of that many floats (see
// SgemmPanelOffset); A is a run of panels of kSgemmTileRows rows, each kc
// columns of that many floats (A[i, p] at p * kSgemmTileRows + i; rows past m
// zero).
// Why runs of 16: the AVX2 kernel reads a panel a 16-column half at a time
// (a 6x16 sub-tile). With the halves interleaved row by row it read every
// other cache line of the panel; with each half contiguous it streams one
// line after another (197x3072x768, 1 thread: 92.6 -> 96.0 GFLOP/s). The
// AVX-512 kernel reads both runs at once, as two streams.
constexpr int64_t kSgemmPanelWidth = 32;
constexpr int64_t kSgemmPanelRun = 16;
constexpr int64_t kSgemmTileRows = 12;
constexpr int64_t kSgemmDepthBlock = 256;

// Where (p, j) of a B panel of depth kc lies, in floats from the panel's
// start (p < kc, j < kSgemmPanelWidth).
inline int64_t SgemmPanelOffset(int64_t kc, int64_t p, int64_t j) {
  return (j / kSgemmPanelRun) * kc * kSgemmPanelRun + p * kSgemmPanelRun + j % kSgemmPanelRun;
}

// Deals row p of a k-block of depth kc, `cols` floats from `row`, out to
// the ceil(cols / kSgemmPanelWidth) panels starting at `panels`, zeroing the
// last panel's columns past `cols`. For producers of packed B (PackBFn).
void SgemmPackBRow(const float* row, int64_t cols, int64_t kc, int64_t p, float* panels);

// Frees what packed operands allocate (64-byte aligned floats).
struct SgemmAlignedDelete {
  void operator()(float* p) const;
};
using SgemmBuffer = std::unique_ptr<float[], SgemmAlignedDelete>;
SgemmBuffer SgemmAllocate(int64_t floats);

// Grow-only scratch, 64-byte aligned as packed panels must be: kept per
// thread (thread_local), so repeated calls allocate nothing.
class SgemmScratch {
 public:
  float* Get(int64_t floats) {
    if (floats > capacity_) {
      buffer_ = SgemmAllocate(floats);
      capacity_ = floats;
    }
    return buffer_.get();
  }
  // Drops the buffer if it grew past `keep` floats (a very large one is not held forever).
  void Trim(int64_t keep) {
    if (capacity_ > keep) {
      buffer_.reset();
      capacity_ = 0;
    }
  }

 private:
  SgemmBuffer buffer_;
  int64_t capacity_ = 0;
};

// B (k x n) packed once, e.g. a constant weight matrix; shared read-only.
// On ordinary pages, not transparent huge pages: huge pages made a
// transformer's runs 1-1.5% faster (fewer TLB walks over weights that come
// from memory every run: BERT-base 206.7 vs 209.9 ms, GPT-2 and ViT alike),
// but a fresh huge page costs this VM about 8 ms to fault in (0.8 ms as 512
// small pages, which the kernel mostly recycles), so BERT-base's first run
// took 2.4 s instead of 0.4 and GPT-2's 1.6-3.7 s instead of 0.6: more than
// a thousand runs' worth of the saving, paid by every process that starts.
class SgemmPackedB {
 public:
  SgemmPackedB(int64_t k, int64_t n, MatrixView b);
  // Packs the row-major k x n matrix at `b` over its own bytes (no fresh
  // pages: on some hosts a first touch costs more than the packing); n must
  // be a multiple of kSgemmPanelWidth, so the packed layout is the same size,
  // and b 64-byte aligned, as the kernels' panel loads are (PacksInPlace).
  // `owner` keeps the bytes alive.
  SgemmPackedB(int64_t k, int64_t n, float* b, std::shared_ptr<void> owner);
  // Whether the in-place constructor takes an n-column B at `b`.
  static bool PacksInPlace(int64_t n, const float* b) {
    return n % kSgemmPanelWidth == 0 && reinterpret_cast<uintptr_t>(b) % 64 == 0;
  }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // Panels of the k-block starting at row p0 (p0 a multiple of kSgemmDepthBlock).
  const float* block(int64_t p0) const { return data_ + p0 * padded_n_; }

 private:
  int64_t k_, n_, padded_n_;
  std::shared_ptr<void> storage_;  // base/populated_memory.h
  float* data_;
};

// alpha * A (m x k) packed once, e.g. convolution weights; shared read-only.
class SgemmPackedA {
 public:
  SgemmPackedA(int64_t m, int64_t k, float alpha, MatrixView a);
  // Room for an m x k A whose rows PackRows fills, a range at a time.
  SgemmPackedA(int64_t m, int64_t k);
  // Rows [m0, m0 + rows) of A, alpha times a's rows [0, rows); m0 a multiple
  // of kSgemmTileRows, and m0 + rows a multiple of it too or m.
  void PackRows(int64_t m0, int64_t rows, float alpha, MatrixView a);
  int64_t m() const { return m_; }
  int64_t k() const { return k_; }
  // Panels of the k-block starting at column p0 (p0 a multiple of kSgemmDepthBlock).
  const float* block(int64_t p0) const { return data_.get() + p0 * padded_m_; }

 private:
  int64_t m_, k_, padded_m_;
  SgemmBuffer data_;
};

// Sgemm with B supplied by the caller already in the packed panel layout,
// so a producer of B (e.g. convolution's im2col) can write it there directly
// instead of materializing B and having it copied. pack_b(p0, kc, j0, nc, out)
// writes rows [p0, p0+kc) x columns [j0, j0+nc) of B as
// ceil(nc / kSgemmPanelWidth) panels, one after another; panel q holds
// columns [j0+32q, j0+32q+32), B[p, j0+32q+j] at
// out[q*kc*32 + SgemmPanelOffset(kc, p-p0, j)], columns past nc zero
// (SgemmPackBRow writes a row so). p0 and kc follow the k-blocks above. With
// a thread pool it is called from the pool's threads, concurrently, for
// disjoint pieces of B (a k-block's columns in runs of a few panels): any
// scratch it uses must be per thread.
using PackBFn = std::function<void(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out)>;

// Applied to each finished row block of C (up to 12 rows by a task's
// columns) right after its last k-block, while it is still in L1: rows
// [i0, i0+rows) x columns [j0, j0+cols) of C (in the coordinates of the Sgemm
// call) start at `tile`, leading dimension ldc.
// A consumer's bias, residual and activation go here instead of another pass
// over C. Each element is visited exactly once and in the same state whatever
// the thread count, so a deterministic epilogue keeps results deterministic.
// It may run on any of the pool's threads, concurrently for different tiles.
using SgemmEpilogueFn =
    std::function<void(int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* tile, int64_t ldc)>;

// Where A comes from: a plain matrix times alpha (packed per call), or packed beforehand.
struct SgemmA {
  SgemmA(MatrixView view, float alpha = 1.f) : view(view), alpha(alpha) {}
  SgemmA(const SgemmPackedA& packed) : view{nullptr, 0, 0}, packed(&packed) {}
  MatrixView view;
  float alpha = 1.f;
  const SgemmPackedA* packed = nullptr;
};

// Where B[p, j] of a k x n matrix lies in the packed layout (in floats from
// the start), for producers that write B packed themselves (see SgemmB's
// Prepacked); the buffer holds k * RoundUp(n, kSgemmPanelWidth) floats.
inline int64_t SgemmPackedBIndex(int64_t k, int64_t n, int64_t p, int64_t j) {
  const int64_t padded_n = (n + kSgemmPanelWidth - 1) / kSgemmPanelWidth * kSgemmPanelWidth;
  const int64_t p0 = p / kSgemmDepthBlock * kSgemmDepthBlock;
  const int64_t kc = k - p0 < kSgemmDepthBlock ? k - p0 : kSgemmDepthBlock;
  return p0 * padded_n + (j / kSgemmPanelWidth) * kc * kSgemmPanelWidth +
         SgemmPanelOffset(kc, p - p0, j % kSgemmPanelWidth);
}

// Where B comes from: a plain matrix, a packer (PackBFn), packed beforehand
// (SgemmPackedB), a caller's buffer already in the packed layout, or a table
// of row pointers (B[p, j] = rows[p][j]: e.g. a convolution's taps, each row
// a shifted window of a padded input plane, so there is no im2col matrix).
struct SgemmB {
  SgemmB(MatrixView view) : view(view) {}
  SgemmB(const PackBFn& pack) : view{nullptr, 0, 0}, pack(&pack) {}
  SgemmB(const SgemmPackedB& packed) : view{nullptr, 0, 0}, packed(&packed) {}
  // `panels` laid out as SgemmPackedBIndex says, 64-byte aligned (e.g. from
  // SgemmAllocate); not copied, not owned.
  static SgemmB Prepacked(const float* panels) {
    SgemmB b(MatrixView{nullptr, 0, 0});
    b.panels = panels;
    return b;
  }
  // `rows` has k entries; each row readable for n floats; not copied, not owned.
  static SgemmB Rows(const float* const* rows) {
    SgemmB b(MatrixView{nullptr, 0, 0});
    b.rows = rows;
    return b;
  }
  MatrixView view;
  const PackBFn* pack = nullptr;
  const SgemmPackedB* packed = nullptr;
  const float* panels = nullptr;
  const float* const* rows = nullptr;
};

// C (row-major, leading dimension ldc) = A x B + beta * C, then `epilogue`
// (may be null) over every tile. When beta == 0, C is not read. A packed
// operand must have been packed with these m, n, k.
void Sgemm(int64_t m, int64_t n, int64_t k, const SgemmA& a, const SgemmB& b, float beta, float* c, int64_t ldc,
           ThreadPool* pool, const SgemmEpilogueFn* epilogue = nullptr);

// The plain spellings of the above.
inline void Sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, MatrixView b, float beta, float* c,
                  int64_t ldc, ThreadPool* pool) {
  Sgemm(m, n, k, SgemmA(a, alpha), SgemmB(b), beta, c, ldc, pool);
}
inline void SgemmWithPackedB(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, const PackBFn& pack_b,
                             float beta, float* c, int64_t ldc, ThreadPool* pool) {
  Sgemm(m, n, k, SgemmA(a, alpha), SgemmB(pack_b), beta, c, ldc, pool);
}

// The micro-kernel's instruction set. SgemmActiveIsa() is the best one this
// CPU has, unless tests lowered the limit with SgemmLimitIsa.
enum class SgemmIsa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
SgemmIsa SgemmActiveIsa();
void SgemmLimitIsa(SgemmIsa max);  // kAvx512: no limit

// Which micro-kernel Sgemm uses now ("avx512", "avx2-fma" or "portable").
const char* SgemmKernelName();

// Whether that kernel reads B where it lies (SgemmB::Rows, a row-major view)
// instead of packing it first; Sgemm gives the same bits either way.
bool SgemmReadsBInPlace();

// Forces the portable kernel (for differential tests of the SIMD and portable
// paths); other kernels follow SgemmPortableForced() so one switch selects
// the portable code everywhere.
void SgemmForcePortable(bool force);
bool SgemmPortableForced();

}  // namespace nee::cpu
