// BlockedConv's 5x5 and 7x7 depthwise convolutions, stride 1 or 2 (AVX2 with
// FMA): what blocked_conv_fast.cc's RunDepthwise calls for a strip of output
// rows of one channel block. See depthwise_blocked_kxk.cc.
#pragma once

#include "ep/cpu/depthwise_blocked_avx512.h"  // BlockedDepthwiseRows
#include "ops/blocked_conv.h"

namespace nee::cpu {

// Whether g is a geometry these kernels take: depthwise, square 5x5 or 7x7,
// dilation 1, equal strides of 1 or 2, pads (the begin ones and those the
// output size implies) of at most half the kernel.
bool BlockedDepthwiseKxKShape(const BlockedConvGeometry& g);

// The kernel for g on this machine now (null fn where the shape or the CPU
// does not fit); its rows finished in registers for the cheap activations.
BlockedDepthwiseRows BlockedDepthwiseKxKFor(const BlockedConvGeometry& g);

}  // namespace nee::cpu
