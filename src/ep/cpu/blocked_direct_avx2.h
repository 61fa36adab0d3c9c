// BlockedConv's k x k convolutions on AVX2 (no AVX-512), computed directly in
// the blocked layout (ops/blocked_conv.h), so that ResNet's stage-start 3x3
// stride-2 convs stay blocked between their blocked neighbours instead of
// going to NCHW and back (a FromBlocked and a ToBlocked around each).
//
// The AVX-512 direct kernel's scheme (blocked_direct_avx512.h) on ymm: a ymm
// holds one pixel's eight channels of one output block; tiles of up to 6
// pixels of one output row x 2 output blocks (twelve accumulators; 12 x 1
// for a lone last block), weights packed once as [Mb][Cb][KH][KW][8][8]. Per
// input block, tap and lane, each pixel of the tile is broadcast from where it
// lies (stride apart) and meets the blocks' weight vectors (on narrow images,
// rows of 7 outputs, the tiles run along a band's pixels across row ends,
// each pixel's window at its own offset in a zero-padded copy). Each output is
// one FMA chain over (input block, tap row, tap column, lane) in that order,
// started at the bias: the AVX-512 kernel's order, so the same bits as it,
// whatever the tiling or the thread count.
#pragma once
#include <cstdint>

#include "ops/blocked_conv.h"

namespace nee {
class KernelContext;
}

namespace nee::cpu {

// Whether the AVX2 direct kernel takes this geometry on this machine now (AVX2
// + FMA active, AVX-512 not: there blocked_direct_avx512 runs): group 1,
// dilation 1, equal strides of 1 or 2, pads below the kernel, a kernel wider
// than 1x1, an activation the tiles finish (none, Relu, Clip, SiLU, HardSwish).
bool BlockedDirectAvx2Applies(const BlockedConvGeometry& g);

// The conv, with its bias, residual and activation, for a geometry it takes.
// `drop_weights`: the caller never takes another path for this node, whatever
// later runs' input shapes, so the raw weights may be dropped once packed
// (PackedOnce's `drop`).
void RunBlockedDirectAvx2(KernelContext& ctx, const BlockedConvGeometry& g, bool drop_weights = false);

}  // namespace nee::cpu
