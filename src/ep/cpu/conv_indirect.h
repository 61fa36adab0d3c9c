// 2-D convolution as a GEMM whose B rows are read straight from a padded
// copy of the input, without an im2col matrix (conv_indirect.cc).
#pragma once
#include <cstdint>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/sgemm.h"

namespace nee::cpu {

// Whether ConvIndirect runs this geometry here: the SGEMM kernel must read B
// in place (AVX-512), with few output channels (so it does), stride 1 or 2,
// and the padded copy of the input within a few times the input's and
// output's sizes.
bool ConvIndirectApplies(const Conv2D& g);

// y = conv(x, w) + bias, then the optional FusedConv epilogue (`z`: the
// residual, shaped as y, or null). `packed_w`: the weights packed as SGEMM's
// A (M x C*KH*KW), or null to read `w` as given. Same sums, in the same
// order, as the im2col path, so the same bits, for any thread count.
Status ConvIndirect(KernelContext& ctx, const Conv2D& g, const float* x, const float* w,
                    const SgemmPackedA* packed_w, const float* bias, const ConvEpilogue* epilogue, const float* z,
                    float* y);

}  // namespace nee::cpu
