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

// Which micro-kernel Sgemm uses on this machine ("avx2-fma" or "portable").
const char* SgemmKernelName();

// Forces the portable kernel (for differential tests of the two paths).
void SgemmForcePortable(bool force);

}  // namespace nee::cpu
