// What the fast Conv, ConvTranspose and pooling kernels share: spatial dims
// normalized to three (depth, height, width; 1-D and 2-D pad on the left),
// and reading Conv-like operands.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/fused_conv.h"
#include "ops/op_schema.h"

namespace nee::cpu {

constexpr int kSpatialDims = 3;

// For copies of a few floats: plain loops, which GCC would otherwise turn
// into memset/memcpy calls, whose call overhead dominates at these sizes.
#if defined(__GNUC__) && !defined(__clang__)
#define NEE_NO_LIBCALL_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NEE_NO_LIBCALL_LOOPS
#endif

// One group-1 2-D convolution as the pixel-major (conv_pixel_gemm) and
// indirect (conv_indirect) paths see it: NCHW, dilation 1, equal strides on
// both axes; pads are begin pads (end pads follow from the output size).
struct Conv2D {
  int64_t N, C, H, W;  // input
  int64_t M;           // output channels
  int64_t OH, OW;      // output
  int64_t KH, KW;      // kernel
  int64_t stride;      // 1 or 2 on the paths that take it
  int64_t pt, pl;      // begin pads
  int64_t K() const { return C * KH * KW; }
  bool pointwise() const { return KH == 1 && KW == 1 && stride == 1 && pt == 0 && pl == 0; }
};

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

// What FusedConv does after the convolution: add the residual Z (shaped as
// the output), then the activation. The fast kernel applies it to each tile
// of the output while the tile is still in cache, instead of in another pass.
struct ConvEpilogue {
  FusedActivation activation;
  const Tensor* z = nullptr;  // null when absent
};

// y[r, j] = act(y[r, j] + bias[r] + z[r, j]) for rows [0, rows) and columns
// [0, cols), in place (leading dimensions ldy and ldz); bias and z may be
// null. (fused_conv_fast.cc: vectorized where the CPU allows; an element gets
// the same value wherever the run it is in starts.)
void BiasResidualActivate(const FusedActivation& act, const float* bias, const float* z, int64_t ldz, float* y,
                          int64_t ldy, int64_t rows, int64_t cols);

// Asks the caches for rows [0, rows) x columns [0, cols) of a matrix with
// leading dimension ld, one request per 64-byte line (a hint: never faults).
inline void PrefetchRows(const float* p, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; j += 16) __builtin_prefetch(p + r * ld + j, 0, 3);
}

// dst[i] = src[2 * i] for i in [0, n), reading nothing past src[2n - 2]
// (vectorized with AVX-512 or AVX2; conv_fast.cc): stride-2 input rows.
void CopyEvens(const float* src, float* dst, int64_t n);

// Scratch reused across calls on the same thread (conv_fast.cc): an im2col
// row, a padded depthwise plane, a ConvTranspose's col buffer; grows to the
// largest request seen. Its contents last until the thread's next call.
float* ThreadScratch(size_t n);

// The fast float Conv with `epilogue` applied (null: a plain Conv). Nodes it
// does not handle go to the reference kernel of the node's own op (Conv, or
// FusedConv, which applies its epilogue itself).
Status ConvFloatWithEpilogue(KernelContext& ctx, const ConvEpilogue* epilogue);

// [N, M, spatial...] for a shape whose `out` holds kSpatialDims normalized dims,
// keeping only the last `spatial_rank` of them.
template <typename Shape>
std::vector<int64_t> ConvOutputDims(const Shape& s, int64_t spatial_rank) {
  std::vector<int64_t> dims{s.N, s.M};
  for (int d = kSpatialDims - static_cast<int>(spatial_rank); d < kSpatialDims; ++d) dims.push_back(s.out[d]);
  return dims;
}

}  // namespace nee::cpu
