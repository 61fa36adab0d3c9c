// nee's FusedMatMul (domain ai.nee, since version 1), which the optimizer
// (opt/fuse_matmul_bias.cc) writes for a MatMul by a constant matrix whose
// product only a bias Add, BiasGelu or FastGelu reads:
//
//   inputs  0 A [..., M, K] (rank >= 2), 1 B [K, N], 2 bias [N] (optional); float32
//   attrs   activation: "" (none, the default), "Gelu" (0.5 x (1 + erf(x / sqrt 2))),
//           "FastGelu" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))
//   output  [..., M, N] = activation(A B + bias)
//
// The fast kernel (ep/cpu/fused_matmul_fast.cc) applies the bias and the
// activation to each tile of the product while it is still in cache.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee {

enum class FusedActivation { kNone, kGelu, kFastGelu };

struct FusedMatMulGeometry {
  int64_t rows = 0, k = 0, n = 0;  // A viewed as [rows, K]
  std::vector<int64_t> out_dims;
  FusedActivation activation = FusedActivation::kNone;
  const float* a = nullptr;
  const float* b = nullptr;
  const float* bias = nullptr;  // nullptr without a bias
};

// Validates inputs and attributes; a Status error for anything else.
Result<FusedMatMulGeometry> FusedMatMulGeometryOf(const KernelContext& ctx);

}  // namespace nee
