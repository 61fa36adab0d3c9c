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
#include "ep/cpu/blocked_pointwise_avx512.h"
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

// A pointwise conv's weights as BlockedConv's AVX2 tiles read them: w
// [Mb][C][8], bias [Mb * 8] (zero past M and without a bias). BlockedConv
// runs those tiles for M = 24 on AVX-512 hosts too (BlockedPointwiseOnAvx2),
// where the pair tiles would leave a quarter of their lanes idle.
struct BlockedPointwiseWeights {
  HugePageVector<float> w;
  std::vector<float> bias;
};
void PackBlockedPointwise(const BlockedConvGeometry& g, BlockedPointwiseWeights* out);
bool BlockedPointwiseOnAvx2(const BlockedConvGeometry& g);

// Pixels [p0, p1) of image n of the pointwise conv g, every output block,
// through the AVX2 tiles and finished (the residual out.z, the activation),
// written where `out` says (blocked_pointwise_avx512.h): the bits of
// BlockedConv's kernel for g.
void PointwiseRowsToAvx2(const BlockedConvGeometry& g, const BlockedPointwiseWeights& w, int64_t n, int64_t p0,
                         int64_t p1, const PointwiseOut& out);

// y[i] = g.act(y[i] + z[i]) over a run of n floats (z null: no residual):
// what finishes the sums a kernel stored; null when g has nothing to finish.
using BlockedFinishFn = void (*)(const FusedActivation& act, const float* z, float* y, int64_t n);
BlockedFinishFn BlockedFinishFor(const BlockedConvGeometry& g);

// A pointwise or depthwise conv g (its x, y and weights set) as BlockedConv's
// fast kernel runs it (the reference where that would): its weights packed
// once from node inputs `weights` and `weights` + 1 (the bias) when constant.
void RunBlockedPointwiseOrDepthwise(KernelContext& ctx, const BlockedConvGeometry& g, size_t weights);

}  // namespace nee::cpu
