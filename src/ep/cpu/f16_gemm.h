// float16 GEMM with float16 weights (f16_gemm.cc):
//   Y = round_f16(alpha * A B [+ beta * C]), A, B, C and Y float16.
//
// B (a model's weights) is packed once into panels that stay float16, half
// the bytes of a float32 copy; the micro-kernel widens each B row as it loads
// it (vcvtph2ps: AVX-512F on 32 columns, F16C on AVX2 hosts on 16, a table in
// the portable one) and multiplies in float32. A (activations) is widened to
// float32 once per call while it is packed. Sums are float32 over k in order,
// and each output is rounded once to float16 (round to nearest even), as the
// reference kernels compute float16 ops in float32 and round each output once;
// so the results are the reference's up to float32 accumulation order, and
// each output is summed the same way whichever thread computes it.
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "ep/cpu/bf16_gemm.h"  // AlignedArray

namespace nee::cpu {

// Columns per packed panel of B, and the run of columns one AVX2 pass reads.
constexpr int64_t kF16PanelWidth = 32;
constexpr int64_t kF16PanelRun = 16;
// Rows per packed block of A (the AVX-512 tile; AVX2 takes it as two of 6).
constexpr int64_t kF16TileRows = 12;

// B (k x n float16) in the kernel's layout: panels of 32 columns, each two
// runs of 16 columns, each run k rows of 16 float16 values (columns past n
// zero): the AVX2 kernel streams one run at a time, the AVX-512 one both.
class F16PackedB {
 public:
  // Element (r, j) of B lies at b[r * row_stride + j * col_stride] (float16
  // bits): row-major B is (n, 1), a transposed one (1, k).
  F16PackedB(int64_t k, int64_t n, const uint16_t* b, int64_t row_stride, int64_t col_stride);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kF16PanelWidth - 1) / kF16PanelWidth; }
  // Run `half` (0 or 1) of panel `p`: k rows of 16 values.
  const uint16_t* run(int64_t p, int64_t half) const {
    return data_.get() + (2 * p + half) * k_ * kF16PanelRun;
  }
  int64_t bytes() const { return panels() * k_ * kF16PanelWidth * 2; }

 private:
  int64_t k_, n_;
  AlignedArray<uint16_t> data_;
};

// One product: Y[i][j] = round_f16(alpha * sum_p A(i, p) B[p][j] + beta * C(i, j)).
struct F16GemmArgs {
  int64_t m = 0;
  // A (float16): A(i, p) = a[i * a_row_stride + p * a_col_stride] (transposed A: swap the strides).
  const uint16_t* a = nullptr;
  int64_t a_row_stride = 0, a_col_stride = 1;
  const F16PackedB* b = nullptr;
  float alpha = 1.f;
  // Optional C (float16): C(i, j) = c[i * c_row_stride + j * c_col_stride]
  // with c_col_stride 0 or 1 (a stride 0 broadcasts); added as beta * C(i, j)
  // after alpha's product, each rounded to float32 as the reference Gemm does.
  const uint16_t* c = nullptr;
  int64_t c_row_stride = 0, c_col_stride = 0;
  float beta = 1.f;
  uint16_t* y = nullptr;  // m x n, row stride ldy
  int64_t ldy = 0;
};

// The micro-kernel F16Gemm uses now: SGEMM's active ISA (NEE_MAX_ISA and the
// tests' SgemmLimitIsa lower it), AVX2 and AVX-512 only with F16C.
enum class F16GemmIsa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
F16GemmIsa F16GemmActiveIsa();

// Runs on the pool's threads (one thread without a pool); any ISA.
void F16Gemm(const F16GemmArgs& args, ThreadPool* pool);

}  // namespace nee::cpu
