// Single-precision matrix multiply for the CPU provider:
//   C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]
// with A and B given by row/column strides (so transposes are free).
//
// The kernel is chosen at run time by CPU feature detection: an AVX2+FMA
// micro-kernel where the processor has it, a portable one otherwise; release
// builds never assume an ISA at compile time. Results do not depend on the
// thread count: work is split over blocks of C, and each element's sum over k
// runs in the same order whichever thread computes it.
#pragma once
#include <cstdint>
#include <functional>

#include "base/thread_pool.h"

namespace nee::cpu {

struct MatrixView {
  const float* data;
  int64_t row_stride;  // elements between (i, k) and (i+1, k)
  int64_t col_stride;  // elements between (i, k) and (i, k+1)
};

// C is row-major with leading dimension ldc. When beta == 0, C is not read.
void Sgemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, MatrixView b, float beta, float* c,
           int64_t ldc, ThreadPool* pool);

// Sgemm with B supplied by the caller already in the packed panel layout,
// so a producer of B (e.g. convolution's im2col) can write it there directly
// instead of materializing B and having it copied. pack_b(p0, kc, j0, nc, out)
// writes rows [p0, p0+kc) x columns [j0, j0+nc) of B as ceil(nc / 16)
// panels, one after another; panel q holds columns [j0+16q, j0+16q+16) as kc
// rows of 16 floats (out[q*kc*16 + (p-p0)*16 + j]), columns past nc zero.
// It is called from the calling thread only.
constexpr int64_t kSgemmPanelWidth = 16;
using PackBFn = std::function<void(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out)>;
void SgemmWithPackedB(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, const PackBFn& pack_b, float beta,
                      float* c, int64_t ldc, ThreadPool* pool);

// Which micro-kernel Sgemm uses on this machine ("avx2-fma" or "portable").
const char* SgemmKernelName();

// Forces the portable kernel (for differential tests of the two paths).
void SgemmForcePortable(bool force);

}  // namespace nee::cpu
