// BlockedConv with an NCHW input (input_layout = "nchw": a CNN's first conv,
// 3 input channels) on AVX2 (no AVX-512: there blocked_stem_avx512 runs): the
// output written straight into the blocked layout, so no ToBlocked follows
// the stem, and ResNet's MaxPool after it runs blocked too.
//
// Tiles of up to 6 pixels of one output row x 2 output blocks (twelve ymm
// accumulators; 1 block for a lone last one), weights packed once as
// [units][C][KH][KW][16] (a unit two output blocks, as the AVX-512 stem's
// pairs). Per input channel and tap, each of the tile's pixels is broadcast
// as a scalar from its NCHW plane (the stride is the step between them) and
// meets the two blocks' weight vectors. Where only a row's first and last
// pixels' windows reach past the left and right edges (a left pad of at most
// the stride: YOLO's 6x6 s2 p2, MobileNet's 3x3 s2 p1) the input is read
// where it lies: the edge tiles skip those pixels' taps outside, every tile
// the tap rows above and below the image; otherwise from a zero-padded copy
// (ResNet's 7x7 p3), so every window lies inside it. Each output
// is one FMA chain over (input channel, tap row, tap column), started at the
// bias: the same whatever the tiling or the thread count.
#pragma once

#include "ops/blocked_conv.h"

namespace nee {
class KernelContext;
}

namespace nee::cpu {

// Whether the AVX2 stem kernel takes this geometry on this machine now (AVX2 +
// FMA active, AVX-512 not): NCHW input of at most 16 channels, group 1,
// dilation 1, equal strides of 1 or 2, pads below the kernel, no residual, an
// activation the tiles finish (none, Relu, Clip, SiLU, HardSwish).
bool BlockedStemAvx2Applies(const BlockedConvGeometry& g);

// The conv, with its bias and activation, for a geometry it takes.
void RunBlockedStemAvx2(KernelContext& ctx, const BlockedConvGeometry& g);

}  // namespace nee::cpu
