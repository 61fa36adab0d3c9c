// What the float32 and bfloat16 Gemm kernels (matmul_fast.cc,
// bf16_matmul_fast.cc) both read first: the attributes, the product's shape
// and C's broadcast, checked with errors naming the input.
#pragma once
#include <cstdint>

#include "ops/op_schema.h"

namespace nee::cpu {

struct GemmPlan {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  int64_t m = 0, k = 0, n = 0;  // A (after transA) is m x k, B (after transB) k x n
  int64_t c_rows = 1, c_cols = 1;  // C's dims as [rows, cols], leading 1s added
};

// A and B 2-D, C of rank <= 2 or null (then c_rows = c_cols = 1).
Result<GemmPlan> PlanGemm(const KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor* c);
// C's unidirectional broadcast to [m, n], for a kernel that reads C.
Status CheckGemmC(const KernelContext& ctx, const GemmPlan& plan, const Tensor& c);

}  // namespace nee::cpu
