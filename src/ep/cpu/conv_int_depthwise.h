// A depthwise ConvInteger (one input and one output channel a group: MobileNet's
// 3x3 convs) computed directly, plane by plane, instead of as one tiny GEMM
// per channel (K = kh * kw, a single row: the GEMM's packing and tiles cost
// far more than the few multiply-adds). Exact: the int32 sums of the
// reference, modulo 2^32 like its int64 sums cast to int32.
#pragma once
#include <cstdint>

#include "ep/cpu/conv_int_geometry.h"

namespace nee::cpu {

// Whether ConvIntDepthwise takes the geometry (2-D or 1-D, group = C = M).
bool IsConvIntDepthwise(const ConvInt2D& g);

// y[n][c] = sum over taps in the image of (x - zx) * (w[c] - zw[c]) (taps in
// the padding count as the zero point, adding nothing). x and w are 8-bit
// (signed or not), zw one zero point per channel; planes shared out over
// the context's threads. Each element is computed the same way whatever the
// thread count.
void ConvIntDepthwise(const KernelContext& ctx, const ConvInt2D& g, const uint8_t* x, bool x_signed, int32_t zx,
                      const uint8_t* w, bool w_signed, const int32_t* zw, int32_t* y);

}  // namespace nee::cpu
