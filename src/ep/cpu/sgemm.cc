#include "ep/cpu/sgemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_X86 1
#endif

namespace nee::cpu {

namespace {

// Register tile: kRows rows of C by kCols columns; B is packed in kCols-wide
// panels, A in kRows-tall panels, so the inner loop reads both contiguously.
constexpr int64_t kRows = 6;
constexpr int64_t kCols = 16;
// Cache blocking: a kKc x kNc block of B (packed) stays in L2 while kMc rows of A stream.
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 72;   // multiple of kRows
constexpr int64_t kNc = 1024;  // multiple of kCols

using MicroKernel = void (*)(int64_t kc, const float* a_panel, const float* b_panel, float* c, int64_t ldc,
                             int64_t rows, int64_t cols, bool accumulate);

// Portable micro-kernel: the same order over k as the SIMD one, written for
// the auto-vectorizer (multiply and add are separate here: without FMA
// hardware, std::fma would be a slow library call).
void MicroPortable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t rows, int64_t cols,
                   bool accumulate) {
  float acc[kRows][kCols] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * kCols;
    const float* ap = a + p * kRows;
    for (int64_t r = 0; r < kRows; ++r) {
      float av = ap[r];
      for (int64_t j = 0; j < kCols; ++j) acc[r][j] += av * bp[j];
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = accumulate ? c[r * ldc + j] + acc[r][j] : acc[r][j];
}

#ifdef NEE_X86
// One row of the register tile: acc0/acc1 (columns 0-7, 8-15) += a * b.
// Always inlined with the accumulators as references, so all twelve stay in
// registers (an array of accumulators indexed in a loop is kept in memory at
// -O2, which costs several times the throughput).
__attribute__((target("avx2,fma"), always_inline)) inline void FmaRow(const float* a, __m256 b0, __m256 b1,
                                                                       __m256& acc0, __m256& acc1) {
  const __m256 av = _mm256_broadcast_ss(a);
  acc0 = _mm256_fmadd_ps(av, b0, acc0);
  acc1 = _mm256_fmadd_ps(av, b1, acc1);
}

// Writes (or adds) one accumulator row into C, the first `cols` columns.
__attribute__((target("avx2,fma"), always_inline)) inline void StoreRow(float* c, __m256 acc0, __m256 acc1,
                                                                         int64_t cols, bool accumulate) {
  if (cols == kCols) {
    if (accumulate) {
      acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(c));
      acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(c + 8));
    }
    _mm256_storeu_ps(c, acc0);
    _mm256_storeu_ps(c + 8, acc1);
    return;
  }
  alignas(32) float tile[kCols];
  _mm256_store_ps(tile, acc0);
  _mm256_store_ps(tile + 8, acc1);
  for (int64_t j = 0; j < cols; ++j) c[j] = accumulate ? c[j] + tile[j] : tile[j];
}

__attribute__((target("avx2,fma"))) void MicroAvx2(int64_t kc, const float* a, const float* b, float* c,
                                                     int64_t ldc, int64_t rows, int64_t cols, bool accumulate) {
  static_assert(kRows == 6 && kCols == 16, "the AVX2 micro-kernel is written for a 6x16 tile");
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * kCols);
    const __m256 b1 = _mm256_loadu_ps(b + p * kCols + 8);
    const float* ap = a + p * kRows;
    FmaRow(ap + 0, b0, b1, c00, c01);
    FmaRow(ap + 1, b0, b1, c10, c11);
    FmaRow(ap + 2, b0, b1, c20, c21);
    FmaRow(ap + 3, b0, b1, c30, c31);
    FmaRow(ap + 4, b0, b1, c40, c41);
    FmaRow(ap + 5, b0, b1, c50, c51);
  }
  const __m256 acc[kRows][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t r = 0; r < rows; ++r) StoreRow(c + r * ldc, acc[r][0], acc[r][1], cols, accumulate);
}
#endif

std::atomic<bool> g_force_portable{false};

MicroKernel SelectKernel() {
#ifdef NEE_X86
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2 && !g_force_portable.load()) return MicroAvx2;
#endif
  return MicroPortable;
}

// Packs rows [i0, i0+mc) x cols [p0, p0+kc) of alpha*A into kRows-tall panels (zero padded).
void PackA(const MatrixView& a, float alpha, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  for (int64_t ib = 0; ib < mc; ib += kRows) {
    const int64_t rows = std::min(kRows, mc - ib);
    const float* row[kRows];
    for (int64_t r = 0; r < kRows; ++r) row[r] = a.data + (i0 + ib + std::min(r, rows - 1)) * a.row_stride + p0 * a.col_stride;
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t off = p * a.col_stride;
      for (int64_t r = 0; r < kRows; ++r) out[p * kRows + r] = r < rows ? row[r][off] : 0.f;
    }
    if (alpha != 1.f)
      for (int64_t i = 0; i < kc * kRows; ++i) out[i] *= alpha;
    out += kc * kRows;
  }
}

// Packs rows [p0, p0+kc) x cols [j0, j0+nc) of B into kCols-wide panels (zero padded).
void PackB(const MatrixView& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
  for (int64_t jb = 0; jb < nc; jb += kCols) {
    const int64_t cols = std::min(kCols, nc - jb);
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (p0 + p) * b.row_stride + (j0 + jb) * b.col_stride;
      float* dst = out + p * kCols;
      if (b.col_stride == 1 && cols == kCols) {
        std::memcpy(dst, src, sizeof(float) * kCols);  // constant size: inlined as vector moves
      } else if (b.col_stride == 1) {
        std::memcpy(dst, src, sizeof(float) * cols);
        for (int64_t j = cols; j < kCols; ++j) dst[j] = 0.f;
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = src[j * b.col_stride];
        for (int64_t j = cols; j < kCols; ++j) dst[j] = 0.f;
      }
    }
    out += kc * kCols;
  }
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n)
      : p(static_cast<float*>(::operator new(std::max<size_t>(n, 1) * sizeof(float), std::align_val_t(64)))) {}
  ~AlignedBuffer() { ::operator delete(p, std::align_val_t(64)); }
  float* p;
};

}  // namespace

const char* SgemmKernelName() {
#ifdef NEE_X86
  if (SelectKernel() == MicroAvx2) return "avx2-fma";
#endif
  return "portable";
}

void SgemmForcePortable(bool force) { g_force_portable.store(force); }

void Sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, MatrixView b, float beta, float* c,
           int64_t ldc, ThreadPool* pool) {
  SgemmWithPackedB(
      m, n, k, alpha, a,
      [&b](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) { PackB(b, p0, kc, j0, nc, out); }, beta, c,
      ldc, pool);
}

void SgemmWithPackedB(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, const PackBFn& pack_b, float beta,
                      float* c, int64_t ldc, ThreadPool* pool) {
  static_assert(kCols == kSgemmPanelWidth, "sgemm.h documents the panel width");
  if (m <= 0 || n <= 0) return;
  // C = beta * C first; the blocks below then accumulate alpha*A*B into it.
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.f) std::fill(row, row + n, 0.f);
    else if (beta != 1.f)
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
  }
  if (k <= 0 || alpha == 0.f) return;
  MicroKernel micro = SelectKernel();
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    int64_t nc = std::min(kNc, n - j0);
    int64_t n_panels = (nc + kCols - 1) / kCols;
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      int64_t kc = std::min(kKc, k - p0);
      AlignedBuffer packed_b(static_cast<size_t>(n_panels * kCols * kc));
      pack_b(p0, kc, j0, nc, packed_b.p);
      // Tasks are tiles of C (kMc rows by kPanelsPerTask panels); each C
      // element belongs to exactly one task and sums over k in a fixed order,
      // so the result is the same whatever thread runs which task.
      constexpr int64_t kPanelsPerTask = 4;
      int64_t m_blocks = (m + kMc - 1) / kMc;
      int64_t n_groups = (n_panels + kPanelsPerTask - 1) / kPanelsPerTask;
      auto work = [&](int64_t begin, int64_t end) {
        AlignedBuffer packed_a(static_cast<size_t>(kMc * kc));
        int64_t packed_block = -1;
        for (int64_t task = begin; task < end; ++task) {
          int64_t blk = task / n_groups, group = task % n_groups;
          int64_t i0 = blk * kMc;
          int64_t mc = std::min(kMc, m - i0);
          if (blk != packed_block) {
            PackA(a, alpha, i0, mc, p0, kc, packed_a.p);
            packed_block = blk;
          }
          int64_t jp_end = std::min(n_panels, (group + 1) * kPanelsPerTask);
          for (int64_t ib = 0; ib < mc; ib += kRows) {
            int64_t rows = std::min(kRows, mc - ib);
            const float* ap = packed_a.p + (ib / kRows) * kc * kRows;
            for (int64_t jp = group * kPanelsPerTask; jp < jp_end; ++jp) {
              int64_t cols = std::min(kCols, nc - jp * kCols);
              micro(kc, ap, packed_b.p + jp * kc * kCols, c + (i0 + ib) * ldc + j0 + jp * kCols, ldc, rows, cols,
                    true);
            }
          }
        }
      };
      int64_t tasks = m_blocks * n_groups;
      double flops = 2.0 * static_cast<double>(m) * static_cast<double>(nc) * static_cast<double>(kc);
      if (pool && tasks > 1 && flops > 2e5) pool->ParallelFor(tasks, 1, work);
      else work(0, tasks);
    }
  }
}

}  // namespace nee::cpu
