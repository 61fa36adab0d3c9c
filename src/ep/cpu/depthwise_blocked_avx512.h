// BlockedConv's 3x3 stride-1 depthwise convolutions (pads of at most 1) on
// AVX-512: what blocked_conv_fast.cc's RunDepthwise calls for a strip of
// output rows of one channel block (the layout is ops/blocked_conv.h's,
// eight channels a block). See depthwise_blocked_avx512.cc.
#pragma once
#include <cstdint>

#include "ops/blocked_conv.h"

namespace nee::cpu {

// Output rows [oh0, oh1) of one channel block: x its input plane [H][W][8],
// w9 the nine taps' weights [9][8], bias8 its eight biases, y its output
// plane [OH][OW][8], z the residual laid out as y (null: none; given only to
// a kernel that finishes its rows).
using BlockedDepthwiseRowsFn = void (*)(const BlockedConvGeometry& g, const float* x, const float* w9,
                                        const float* bias8, float* y, const float* z, int64_t oh0, int64_t oh1);

struct BlockedDepthwiseRows {
  BlockedDepthwiseRowsFn fn = nullptr;  // null: not taken here (no AVX-512, another geometry)
  // The rows are finished as they are stored, (sum + z) then g.act (None,
  // Relu, Clip, SiLU, HardSwish); otherwise they hold the sums (bias included) only.
  bool finishes = false;
};

// The kernel for g (a depthwise BlockedConv) on this machine now: AVX-512F
// active (SgemmActiveIsa) and not forced portable, 3x3, dilation 1, stride 1,
// pads (the begin ones and those the output size implies) of at most 1.
BlockedDepthwiseRows BlockedDepthwiseAvx512For(const BlockedConvGeometry& g);

}  // namespace nee::cpu
