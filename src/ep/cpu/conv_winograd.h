// 3x3 stride-1 convolutions by Winograd's minimal filtering, F(2x2, 3x3):
// each 2x2 block of outputs costs 16 multiplies per channel pair instead of
// 36, so ResNet's and YOLO's 3x3 layers do 2.25x fewer flops. See
// conv_winograd.cc.
#pragma once
#include <cstdint>

#include "ep/cpu/conv_common.h"

namespace nee::cpu {

// A 2-D conv that Winograd computes: 3x3 kernel, stride 1, dilation 1, one
// group, begin pads ph and pw (any end pads: they follow from OH and OW).
struct Winograd3x3 {
  int64_t N, C, H, W;  // input
  int64_t M;           // output channels
  int64_t OH, OW;      // output
  int64_t ph, pw;      // begin pads
};

// Whether Winograd is used for this geometry on this CPU (AVX-512, and
// channels enough for the GEMMs to pay). Constant weights are transformed
// once per session.
bool WinogradApplies(const KernelContext& ctx, const Winograd3x3& g);

// y = conv(x, w) + bias, then the FusedConv epilogue (may be null; z is its
// residual or null). Outputs differ from the direct sum by rounding only
// (the transforms add and subtract inputs first): within 1e-5 of the
// output's scale on these layers, measured by the tests. Deterministic for
// any thread count (tiles and GEMM blocks depend on the geometry only).
Status ConvWinograd(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w, const float* bias,
                    const ConvEpilogue* epilogue, const float* z, float* y);

// The same convolution on nee's channel-blocked layout (ops/blocked_conv.h):
// x, z and y are [N, C/8, H, W, 8] and [N, M/8, OH, OW, 8], C and M
// multiples of 8; act is BlockedConv's activation. The same tiles and sums as
// ConvWinograd, so the same bits, reordered per block of tile rows in cache
// instead of by a FromBlocked and a ToBlocked around an NCHW conv. AVX2 and
// AVX-512, where the layout pass makes such convs blocked.
bool WinogradBlockedApplies(const KernelContext& ctx, const Winograd3x3& g);
Status ConvWinogradBlocked(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w,
                           const float* bias, const FusedActivation& act, const float* z, float* y);

}  // namespace nee::cpu
