// What the float32 Conv's driver (conv_fast.cc: planning, im2col, the batched
// path) and its direct depthwise kernel over padded planes (depthwise_padded.cc)
// share: the normalized geometry and the depthwise kernel's entry points, which
// conv_fast.cc calls per plane. Internal to ep/cpu.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/cpu/conv_common.h"

namespace nee::cpu::conv_fast {

// Spatial dims are normalized to three (depth, height, width); a 1-D or 2-D
// conv gets leading unit dims with kernel 1, stride 1 and no padding.
constexpr int kDims = kSpatialDims;

struct ConvShape {
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  int64_t in[kDims] = {1, 1, 1};
  int64_t out[kDims] = {1, 1, 1};
  int64_t kernel[kDims] = {1, 1, 1};
  int64_t stride[kDims] = {1, 1, 1};
  int64_t dilation[kDims] = {1, 1, 1};
  int64_t pad[kDims] = {0, 0, 0};      // begin pads
  int64_t pad_end[kDims] = {0, 0, 0};  // end pads (the depthwise kernel pads its input copy)
  int64_t in_size = 1, out_size = 1, kernel_size = 1;

  int64_t rows() const { return Cg * kernel_size; }  // GEMM depth per group
  bool pointwise() const {
    for (int d = 0; d < kDims; ++d)
      if (kernel[d] != 1 || stride[d] != 1 || pad[d] != 0 || in[d] != out[d]) return false;
    return true;
  }
  bool depthwise() const { return Cg == 1 && group > 1; }
};

// ---- The direct depthwise kernel (depthwise_padded.cc) ----------------------------

// Floats after the padded plane that vector loads may touch but never use
// (stride-2 loads read one column past the window; narrow rows compute a full
// vector of eight and keep only the real columns).
constexpr int64_t kPlaneSlack = 64;

// The geometry of the padded plane: input dims grown by the pads, no padding.
ConvShape PaddedGeometry(const ConvShape& s);

// What one output row reads: the padded-plane row of each (kd, kh) tap and the
// matching kw weights, in (kd, kh) order.
struct DepthwiseRows {
  std::vector<const float*> src, weights;
};

// A block of consecutive output rows: row i reads the input rows of row 0
// shifted by i * row_shift and is written at y_row + i * y_step.
struct RowBlock {
  int64_t count, row_shift, y_step;
};

// Output columns [lo, hi) of every row of a block (geometry `p` of the padded plane).
using DepthwiseRowsFn = void (*)(const ConvShape& p, const DepthwiseRows& rows, const RowBlock& block, float bias,
                                 int64_t lo, int64_t hi, float* y_row);

// The AVX2 rows where the CPU has them (and SGEMM is not forced portable), else the portable ones.
DepthwiseRowsFn SelectDepthwiseRows();

// All Mg output channels of input channel plane `plane_index` (= n*C + c).
// `padded` holds p.in_size + kPlaneSlack floats; `rows` is the caller's scratch.
void DepthwisePlane(const ConvShape& s, const ConvShape& p, const float* x, const float* w, const float* bias,
                    float* y, int64_t plane_index, DepthwiseRowsFn rows_fn, float* padded,
                    DepthwiseRows& rows);

}  // namespace nee::cpu::conv_fast
