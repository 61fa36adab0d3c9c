// 2-D convolution as a GEMM whose B rows are read straight from a padded
// copy of the input, without an im2col matrix (conv_indirect.cc).
#pragma once
#include <cstdint>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/sgemm.h"

namespace nee::cpu {

// One group's geometry, NCHW; pads are begin pads (end pads follow from the
// output size). Strides are equal on both axes.
struct IndirectConv2D {
  int64_t N, C, H, W;  // input
  int64_t M;           // output channels
  int64_t OH, OW;      // output
  int64_t KH, KW;      // kernel
  int64_t stride;      // 1 or 2
  int64_t pt, pl;      // begin pads
};

// Whether ConvIndirect runs this geometry here: the SGEMM kernel must read B
// in place (AVX-512), with few output channels (so it does), stride 1 or 2,
// and the padded copy of the input within a few times the input's and
// output's sizes.
bool ConvIndirectApplies(const IndirectConv2D& g);

// y = conv(x, w) + bias, then the optional FusedConv epilogue (`z`: the
// residual, shaped as y, or null). `packed_w`: the weights packed as SGEMM's
// A (M x C*KH*KW), or null to read `w` as given. Same sums, in the same
// order, as the im2col path, so the same bits, for any thread count.
Status ConvIndirect(KernelContext& ctx, const IndirectConv2D& g, const float* x, const float* w,
                    const SgemmPackedA* packed_w, const float* bias, const ConvEpilogue* epilogue, const float* z,
                    float* y);

}  // namespace nee::cpu
