// Pointwise (1x1, stride 1, no padding) convolution on AVX-512 in NCHW
// (conv_pointwise_avx512.cc): output pixels sixteen to a vector, the
// weights, packed once, broadcast, the bias, residual and activation applied
// as each tile is stored. The AVX2 counterpart is conv_pointwise_small.h.
#pragma once

#include "ep/cpu/conv_pointwise_small.h"

namespace nee::cpu {

// Whether ConvPointwiseAvx512 runs this geometry: AVX-512 is active (not
// limited below it, not forced portable) and the kernel measured faster than
// the other paths for such convs.
bool ConvPointwiseAvx512Applies(const Pointwise& g);

// y = w x + bias, then the optional FusedConv epilogue (`z`: the residual,
// shaped as y, or null). Each output sums its C products in channel order,
// then adds the bias, then the residual, then applies the activation,
// whatever the tiling or the thread count.
Status ConvPointwiseAvx512(KernelContext& ctx, const Pointwise& g, const float* x, const float* w, const float* bias,
                           const ConvEpilogue* epilogue, const float* z, float* y);

}  // namespace nee::cpu
