// BlockedConv's k x k convolutions on AVX-512, computed directly in the
// blocked layout (ops/blocked_conv.h): no im2col, and the convs around it
// stay blocked (no reorders between them), as ONNX Runtime's NCHWc convs do.
//
// As the pointwise pair tiles (blocked_pointwise_avx512.h): one zmm holds a
// pixel's sixteen output channels (two output blocks), tiles of up to 12
// pixels of one output row x 2 pairs, weights packed once as
// [pairs][Cb][KH][KW][8][16]. Per input block, tap and lane, each of the
// tile's pixels is broadcast from where it lies in the input (stride apart)
// and meets the pairs' weight vectors. Pixels whose window reaches into the
// padding run one at a time over the taps inside the image; rows likewise
// skip the taps above or below it. Each output is one FMA chain over (input
// block, tap row, tap column, lane) in that order, started at the bias, the
// same whatever the tiling or the thread count.
#pragma once
#include <cstdint>

#include "ops/blocked_conv.h"

namespace nee {
class KernelContext;
}

namespace nee::cpu {

// Whether the direct kernel runs convs on this machine now (AVX-512F active).
bool BlockedDirectAvailable();

// Whether it takes this geometry: group 1, dilation 1, equal strides of 1 or
// 2, pads below the kernel, not a plain pointwise conv (the pair tiles' job),
// an activation the tiles finish (none, Relu, Clip, SiLU, HardSwish).
bool BlockedDirectApplies(const BlockedConvGeometry& g);

// The conv, with its bias, residual and activation, for a geometry it takes.
void RunBlockedDirect(KernelContext& ctx, const BlockedConvGeometry& g);

// What the AVX-512 and AVX2 (blocked_direct_avx2.h) direct kernels share:
// whether one-pixel border tiles would be more than an eighth of each output
// row (small images), and then the input with its padding written out as
// zeros into the calling thread's scratch, `padded` the same conv without
// pads over it (a padded tap adds 0 * w where the border path skips it: the
// same sums, up to a zero's sign).
bool BlockedDirectBorderHeavy(const BlockedConvGeometry& g);
void BlockedDirectPadInput(KernelContext& ctx, const BlockedConvGeometry& g, BlockedConvGeometry* padded);

}  // namespace nee::cpu
