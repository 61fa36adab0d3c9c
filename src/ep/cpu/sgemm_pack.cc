// Packing A and B into SGEMM's panel layout (sgemm.h), per call or once.
#include "ep/cpu/sgemm_pack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "base/populated_memory.h"
#include "ep/cpu/simd_x86.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nee::cpu {

void SgemmAlignedDelete::operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }

SgemmBuffer SgemmAllocate(int64_t floats) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(floats, 1));
  return SgemmBuffer(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t(64))));
}

namespace sgemm_internal {

namespace {

constexpr int64_t kRows = kSgemmTileRows;
constexpr int64_t kCols = kSgemmPanelWidth;

// One A panel from a matrix whose rows are contiguous (col_stride 1): a
// transpose of `rows` x kc. Eight steps of p at a time, so each row is read
// in runs the hardware prefetcher follows and the writes stay sequential.
void PackAPanelRowMajor(const float* const* row, int64_t rows, int64_t kc, float* out) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    float* o = out + p * kRows;
    for (int64_t r = 0; r < kRows; ++r) {
      const float* src = row[r] + p;
      for (int64_t q = 0; q < 8; ++q) o[q * kRows + r] = r < rows ? src[q] : 0.f;
    }
  }
  for (; p < kc; ++p)
    for (int64_t r = 0; r < kRows; ++r) out[p * kRows + r] = r < rows ? row[r][p] : 0.f;
}

#if defined(__x86_64__) || defined(__i386__)
// The same for a full panel with AVX: eight steps of p at a time, rows 0-7 by
// an 8x8 transpose in registers and rows 8-11 by two 4x4 ones.
__attribute__((target("avx2"))) void PackAPanelRowMajorAvx2(const float* const* row, int64_t kc, float* out) {
  static_assert(kRows == 12, "written for 12-row panels");
  int64_t p = 0;
  // Every loop over the register arrays is unrolled: otherwise GCC keeps
  // them on the stack.
  for (; p + 8 <= kc; p += 8, out += 8 * kRows) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(row[i] + p);
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // rows 0-3, then rows 4-7
      s[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
      s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
      s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
      s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      _mm256_storeu_ps(out + q * kRows, _mm256_permute2f128_ps(s[q], s[q + 4], 0x20));
      _mm256_storeu_ps(out + (q + 4) * kRows, _mm256_permute2f128_ps(s[q], s[q + 4], 0x31));
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m128 v0 = _mm_loadu_ps(row[8] + p + 4 * half), v1 = _mm_loadu_ps(row[9] + p + 4 * half);
      __m128 v2 = _mm_loadu_ps(row[10] + p + 4 * half), v3 = _mm_loadu_ps(row[11] + p + 4 * half);
      _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
      float* o = out + 4 * half * kRows + 8;
      _mm_storeu_ps(o, v0);
      _mm_storeu_ps(o + kRows, v1);
      _mm_storeu_ps(o + 2 * kRows, v2);
      _mm_storeu_ps(o + 3 * kRows, v3);
    }
  }
  for (; p < kc; ++p, out += kRows)
    for (int64_t r = 0; r < kRows; ++r) out[r] = row[r][p];
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// One B panel (`cols` columns, kc deep) from a B whose columns are contiguous
// (row_stride 1, column j at base + j * ld): eight columns at a time through
// register transposes, the columns past the last whole eight one at a time.
__attribute__((target("avx2"))) void PackBPanelColumnMajorAvx2(const float* base, int64_t ld, int64_t cols,
                                                               int64_t kc, float* out) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8)  // eight columns never straddle a run of 16
    TransposeColumns8Avx2(base + j * ld, ld, kc, out + SgemmPanelOffset(kc, 0, j), kSgemmPanelRun);
  for (; j < cols; ++j) {
    float* dst = out + SgemmPanelOffset(kc, 0, j);
    for (int64_t p = 0; p < kc; ++p) dst[p * kSgemmPanelRun] = base[j * ld + p];
  }
}
#endif

}  // namespace

void PackA(const MatrixView& a, float alpha, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  for (int64_t ib = 0; ib < mc; ib += kRows, out += kc * kRows) {
    const int64_t rows = std::min(kRows, mc - ib);
    const float* row[kRows];
    // Rows past the matrix point at its last row (never read: they pack as zeros).
    for (int64_t r = 0; r < kRows; ++r)
      row[r] = a.data + (i0 + ib + std::min(r, rows - 1)) * a.row_stride + p0 * a.col_stride;
    if (a.col_stride == 1) {
#if defined(__x86_64__) || defined(__i386__)
      if (rows == kRows && CpuHasAvx2()) PackAPanelRowMajorAvx2(row, kc, out);
      else PackAPanelRowMajor(row, rows, kc, out);
#else
      PackAPanelRowMajor(row, rows, kc, out);
#endif
    } else if (a.row_stride == 1 && rows == kRows) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * kRows, row[0] + p * a.col_stride, sizeof(float) * kRows);
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t r = 0; r < kRows; ++r) out[p * kRows + r] = r < rows ? row[r][p * a.col_stride] : 0.f;
    }
    if (alpha != 1.f)
      for (int64_t i = 0; i < kc * kRows; ++i) out[i] *= alpha;
  }
}

void PackB(const MatrixView& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
  if (b.col_stride == 1) {
    // Row by row: each row of B is read as one run of nc floats (which the
    // hardware prefetcher follows) and dealt out to the panels; reading a
    // panel's worth of every row first would touch kc rows far apart per panel.
    for (int64_t p = 0; p < kc; ++p) SgemmPackBRow(b.data + (p0 + p) * b.row_stride + j0, nc, kc, p, out);
    return;
  }
  for (int64_t jb = 0; jb < nc; jb += kCols, out += kc * kCols) {
    const int64_t cols = std::min(kCols, nc - jb);
    const float* base = b.data + p0 * b.row_stride + (j0 + jb) * b.col_stride;
    // B transposed (or strided): read each column of the panel as a run over
    // p and scatter it into the panel, which is small enough to stay in L1.
    if (cols < kCols) std::fill(out, out + kc * kCols, 0.f);
#if defined(__x86_64__) || defined(__i386__)
    if (b.row_stride == 1 && CpuHasAvx2()) {
      PackBPanelColumnMajorAvx2(base, b.col_stride, cols, kc, out);
      continue;
    }
#endif
    for (int64_t j = 0; j < cols; ++j) {
      const float* src = base + j * b.col_stride;
      float* dst = out + SgemmPanelOffset(kc, 0, j);
      for (int64_t p = 0; p < kc; ++p) dst[p * kSgemmPanelRun] = src[p * b.row_stride];
    }
  }
}

}  // namespace sgemm_internal

// A panel is two runs of kSgemmPanelRun columns, so the runs of all panels
// are simply consecutive, each kc x kSgemmPanelRun floats.
void SgemmPackBRow(const float* row, int64_t cols, int64_t kc, int64_t p, float* panels) {
  constexpr int64_t kRun = kSgemmPanelRun;
  const int64_t runs = (cols + kSgemmPanelWidth - 1) / kSgemmPanelWidth * (kSgemmPanelWidth / kRun);
  float* dst = panels + p * kRun;
  for (int64_t r = 0; r < runs; ++r, dst += kc * kRun) {
    const int64_t j = r * kRun;
    if (j + kRun <= cols) {
      std::memcpy(dst, row + j, sizeof(float) * kRun);  // constant size: vector moves
    } else {
      const int64_t n = std::max<int64_t>(0, cols - j);
      if (n > 0) std::memcpy(dst, row + j, sizeof(float) * static_cast<size_t>(n));
      std::fill(dst + n, dst + kRun, 0.f);
    }
  }
}

SgemmPackedB::SgemmPackedB(int64_t k, int64_t n, MatrixView b)
    : k_(k), n_(n), padded_n_((n + kSgemmPanelWidth - 1) / kSgemmPanelWidth * kSgemmPanelWidth) {
  storage_ = AllocatePopulated(static_cast<size_t>(std::max<int64_t>(k * padded_n_, 1)) * sizeof(float));
  if (!storage_) throw std::bad_alloc();
  data_ = static_cast<float*>(storage_.get());
  for (int64_t p0 = 0; p0 < k; p0 += kSgemmDepthBlock)
    sgemm_internal::PackB(b, p0, std::min(kSgemmDepthBlock, k - p0), 0, n, data_ + p0 * padded_n_);
}

SgemmPackedB::SgemmPackedB(int64_t k, int64_t n, float* b, std::shared_ptr<void> owner)
    : k_(k), n_(n), padded_n_(n), storage_(std::move(owner)), data_(b) {
  if (!PacksInPlace(n, b)) throw std::invalid_argument("SgemmPackedB: in-place packing needs whole panels");
  // A k-block's panels fill exactly the rows they are packed from, so each
  // block is copied aside and packed back over itself.
  std::unique_ptr<float[]> rows(new (std::nothrow) float[static_cast<size_t>(std::min(kSgemmDepthBlock, k) * n)]);
  if (!rows) {  // no room aside: packed into new memory, B left as it is
    *this = SgemmPackedB(k, n, MatrixView{b, n, 1});
    return;
  }
  for (int64_t p0 = 0; p0 < k; p0 += kSgemmDepthBlock) {
    const int64_t kc = std::min(kSgemmDepthBlock, k - p0);
    float* block = data_ + p0 * n;
    std::memcpy(rows.get(), block, sizeof(float) * static_cast<size_t>(kc * n));
    sgemm_internal::PackB(MatrixView{rows.get(), n, 1}, 0, kc, 0, n, block);
  }
}

SgemmPackedA::SgemmPackedA(int64_t m, int64_t k)
    : m_(m), k_(k), padded_m_((m + kSgemmTileRows - 1) / kSgemmTileRows * kSgemmTileRows),
      data_(SgemmAllocate(k * padded_m_)) {}

SgemmPackedA::SgemmPackedA(int64_t m, int64_t k, float alpha, MatrixView a) : SgemmPackedA(m, k) {
  PackRows(0, m, alpha, a);
}

void SgemmPackedA::PackRows(int64_t m0, int64_t rows, float alpha, MatrixView a) {
  for (int64_t p0 = 0; p0 < k_; p0 += kSgemmDepthBlock) {
    const int64_t kc = std::min(kSgemmDepthBlock, k_ - p0);
    // A k-block holds its row panels one after another, kc x kSgemmTileRows floats each.
    sgemm_internal::PackA(a, alpha, 0, rows, p0, kc, data_.get() + p0 * padded_m_ + m0 * kc);
  }
}

}  // namespace nee::cpu
