// What the fast Conv, ConvTranspose and pooling kernels share: spatial dims
// normalized to three (depth, height, width; 1-D and 2-D pad on the left),
// and reading Conv-like operands.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee::cpu {

constexpr int kSpatialDims = 3;

// X, W and the optional bias B of a Conv or ConvTranspose node.
struct ConvOperands {
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;  // null when omitted
};

// False when the bias is present but not a tensor: the reference kernel then
// reports the problem.
inline Result<bool> ReadConvOperands(const KernelContext& ctx, ConvOperands* in) {
  NEE_ASSIGN_OR_RETURN(in->x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(in->w, ctx.InputTensor(1));
  in->bias = nullptr;
  if (ctx.has_input(2)) {
    if (!ctx.input(2)->is_tensor()) return false;
    in->bias = &ctx.input(2)->tensor();
  }
  return true;
}

// [N, M, spatial...] for a shape whose `out` holds kSpatialDims normalized dims,
// keeping only the last `spatial_rank` of them.
template <typename Shape>
std::vector<int64_t> ConvOutputDims(const Shape& s, int64_t spatial_rank) {
  std::vector<int64_t> dims{s.N, s.M};
  for (int d = kSpatialDims - static_cast<int>(spatial_rank); d < kSpatialDims; ++d) dims.push_back(s.out[d]);
  return dims;
}

}  // namespace nee::cpu
