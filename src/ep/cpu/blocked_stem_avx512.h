// BlockedConv with an NCHW input (input_layout = "nchw": a CNN's first conv,
// 3 input channels) on AVX-512: the output written straight into the blocked
// layout, so no ToBlocked follows the stem (ONNX Runtime's MLAS computes such
// a conv with its "NCHW in, NCHWc out" kernel the same way).
//
// As the direct blocked tiles (blocked_direct_avx512.h): one zmm holds a
// pixel's sixteen output channels (two output blocks), tiles of up to 12
// pixels of one output row x 1 or 2 pairs, weights packed once as
// [pairs][C][KH][KW][16]. Per input channel and tap, each of the tile's pixels
// is broadcast as a scalar from its NCHW plane (the stride is just the step
// between them) and meets the pairs' weight vectors. A row's first and last
// tiles, where windows reach into the left or right padding, read a small
// zero-padded copy of their input columns instead; rows skip the taps above
// or below the image. Each output is one FMA chain over (input channel, tap
// row, tap column) in that order, started at the bias, fixed by the pixel's
// place in the row: the same whatever the thread count.
#pragma once

#include "ops/blocked_conv.h"

namespace nee {
class KernelContext;
}

namespace nee::cpu {

// Whether the stem kernel takes this geometry on this machine now: AVX-512F
// active, NCHW input, group 1, dilation 1, equal strides of 1 or 2, an
// activation the tiles finish (none, Relu, Clip, SiLU, HardSwish).
bool BlockedStemApplies(const BlockedConvGeometry& g);

// The conv, with its bias, residual and activation, for a geometry it takes.
void RunBlockedStem(KernelContext& ctx, const BlockedConvGeometry& g);

}  // namespace nee::cpu
