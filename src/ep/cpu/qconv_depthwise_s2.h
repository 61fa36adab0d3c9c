// Depthwise QLinearConv at column stride 2 on AVX2 straight from a byte copy of each plane
// (qconv_depthwise_s2.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "ep/cpu/qconv_common.h"

namespace nee::cpu::qconv {

// A depthwise conv (one input and one output channel per group) with column stride 2, undilated
// columns and a kernel of at most 16 x 8: false (nothing written) when it does not apply. The CPU must
// have AVX2 (RunDepthwiseQConv checks before calling). Arguments as RunDepthwiseQConv's.
bool RunDepthwiseStride2(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                         const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                         const double* mult, const Requant& q, uint8_t* y);

}  // namespace nee::cpu::qconv
