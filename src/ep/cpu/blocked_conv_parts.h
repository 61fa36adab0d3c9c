// What the BlockedConv fast kernel (blocked_conv_fast.cc) lends the fused
// BlockedExpandDepthwise kernel (blocked_expand_depthwise_fast.cc): its
// depthwise rows, their packed weights, the pass that finishes outputs the
// kernels left as sums, and its whole pointwise and depthwise convs (what
// the fused kernel runs where its bands do not apply). The layout is
// ops/blocked_conv.h's.
#pragma once
#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/depthwise_blocked_avx512.h"
#include "ops/blocked_conv.h"

namespace nee::cpu {

// The rows kernel BlockedConv's fast path runs for the depthwise conv g on
// this machine now (AVX-512 stride 1, else AVX2), with the same calling
// contract as BlockedDepthwiseAvx512For's; fn null where that path would not
// take g (no AVX2, another geometry, channels not whole blocks).
BlockedDepthwiseRows BlockedDepthwiseKernelFor(const BlockedConvGeometry& g);

// A depthwise conv's weights as those kernels read them: w [Cb][KH * KW][8],
// bias [Cb * 8] (zero without a bias).
struct BlockedDepthwiseWeights {
  HugePageVector<float> w;
  std::vector<float> bias;
};
void PackBlockedDepthwise(const BlockedConvGeometry& g, BlockedDepthwiseWeights* out);

// y[i] = g.act(y[i] + z[i]) over a run of n floats (z null: no residual):
// what finishes the sums a kernel stored; null when g has nothing to finish.
using BlockedFinishFn = void (*)(const FusedActivation& act, const float* z, float* y, int64_t n);
BlockedFinishFn BlockedFinishFor(const BlockedConvGeometry& g);

// A pointwise or depthwise conv g (its x, y and weights set) as BlockedConv's
// fast kernel runs it (the reference where that would): its weights packed
// once from node inputs `weights` and `weights` + 1 (the bias) when constant.
void RunBlockedPointwiseOrDepthwise(KernelContext& ctx, const BlockedConvGeometry& g, size_t weights);

}  // namespace nee::cpu
