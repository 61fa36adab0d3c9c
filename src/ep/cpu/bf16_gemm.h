// bfloat16 GEMM on AVX512-BF16 (bf16_gemm.cc): Y = round_bf16(alpha * A B [+ beta * C]).
//
// vdpbf16ps multiplies pairs of bfloat16 values and adds both products to a
// float32 lane: 32 multiply-adds per 512-bit instruction where a float32 FMA
// does 16, at the same issue rate (measured on this project's AMD EPYC VM: one
// of either per cycle, so twice the multiply-adds per second). B is packed
// into its pair layout once (weights: once per session); A is read where it
// lies, each k pair of a row being one 32-bit word, broadcast as it is.
// Sums are float32 and the output is rounded once to bfloat16 (round to
// nearest even, as FloatToBFloat16), as the reference kernels compute
// bfloat16 ops in float32 and round each output once.
//
// Differences from the reference: the order of the float32 sums (each
// output's order is fixed, so results do not depend on the thread count),
// and vdpbf16ps ignores MXCSR: it treats denormal inputs as zero and flushes
// denormal results (and partial sums) to zero. bfloat16 has float32's
// exponent range, so this only touches values below 1.2e-38 in magnitude.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include "base/thread_pool.h"

namespace nee::cpu {

// 64-byte aligned arrays, as the bfloat16 kernels' packed operands and
// scratch want them (aligned zmm loads); shared by bf16_gemm.cc and conv_bf16.cc.
struct AlignedFree {
  void operator()(void* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
template <typename T>
using AlignedArray = std::unique_ptr<T[], AlignedFree>;
template <typename T>
AlignedArray<T> MakeAlignedArray(size_t n) {
  return AlignedArray<T>(static_cast<T*>(::operator new[](std::max<size_t>(n, 1) * sizeof(T), std::align_val_t(64))));
}

// Whether this CPU runs the kernel: AVX512-BF16 (CPUID leaf 7, sub-leaf 1,
// EAX bit 5) with AVX512F/BW/VL, whose check finds the OS saving the state.
bool CpuHasAvx512Bf16();

// Columns per packed panel of B and rows per register tile of A.
constexpr int64_t kBf16PanelWidth = 32;
constexpr int64_t kBf16TileRows = 12;

// B (k x n bfloat16) in the kernel's layout: panels of 32 columns, each, pair
// of rows p after pair p, 32 words holding (B[2p][j], B[2p+1][j]) (the lower
// k in the low half). An odd k's last pair has a zero upper half; columns
// past n are zero.
class Bf16PackedB {
 public:
  // Element (r, j) of B lies at b[r * row_stride + j * col_stride]
  // (bfloat16 bits): row-major B is (n, 1), a transposed one (1, k).
  Bf16PackedB(int64_t k, int64_t n, const uint16_t* b, int64_t row_stride, int64_t col_stride);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t pairs() const { return (k_ + 1) / 2; }
  int64_t panels() const { return (n_ + kBf16PanelWidth - 1) / kBf16PanelWidth; }
  const uint32_t* panel(int64_t p) const { return data_.get() + p * pairs() * kBf16PanelWidth; }

 private:
  int64_t k_, n_;
  AlignedArray<uint32_t> data_;
};

// One product: Y[i][j] = round_bf16(alpha * sum_k A[i][k] B[k][j] + beta * C(i, j)).
struct Bf16GemmArgs {
  int64_t m = 0;
  const uint16_t* a = nullptr;  // m x k, row-major, row stride lda
  int64_t lda = 0;
  const Bf16PackedB* b = nullptr;
  float alpha = 1.f;
  // Optional C (bfloat16): C(i, j) = c[i * c_row_stride + j * c_col_stride]
  // (a stride 0 broadcasts); added as beta * C(i, j) after alpha's product,
  // each rounded to float32 as the reference Gemm does.
  const uint16_t* c = nullptr;
  int64_t c_row_stride = 0, c_col_stride = 0;
  float beta = 1.f;
  uint16_t* y = nullptr;  // m x n, row stride ldy
  int64_t ldy = 0;
};

// Runs on the pool's threads (one thread without a pool); each output is
// computed the same way whichever thread takes it. Call only when
// CpuHasAvx512Bf16().
void Bf16Gemm(const Bf16GemmArgs& args, ThreadPool* pool);

}  // namespace nee::cpu
