// nee's channel-blocked convolution layout (domain ai.nee), written by the
// optimizer's layout pass (opt/layout_blocked.cc), never by exporters.
//
// A blocked tensor holds an NCHW tensor as [N, ceil(C/8), H, W, 8]: channel c
// of pixel (h, w) sits in block c / 8, lane c % 8, so the eight channels of a
// pixel are one AVX2 vector and a block's pixels are contiguous. Lanes past C
// are padding: written as 0 and never read as data.
//   ToBlocked(X [N, C, H, W]) -> [N, Cb, H, W, 8]
//   FromBlocked(X [N, Cb, H, W, 8]; channels = C) -> [N, C, H, W]
//   BlockedConv(X blocked, W [M, C/group, KH, KW], B [M]?, Z blocked?; channels = C,
//               kernel_shape, strides, pads, dilations, group, activation, activation_params)
//     -> Y [N, Mb, OH, OW, 8]: com.microsoft FusedConv's result (conv, + B, + Z,
//        then the activation), blocked.
//     With input_layout = "nchw" X is a plain [N, C, H, W] tensor with any C (a
//     CNN's stem: 3 channels), so the first conv writes the blocked layout
//     directly and no ToBlocked follows it.
//     With output_layout = "nhwc" Y is a plain channels-last [N, OH, OW, M]
//     tensor with any M (a detector head's 255 channels), for a reader that
//     wants channels last (the Transpose after a head, opt/layout_blocked.cc):
//     the same values as the blocked Y, stored pixel by pixel.
//   BlockedExpandDepthwise(X blocked, W [E, C, 1, 1], B [E], DW [E, 1, KH, KW], DB [E],
//                          PW [P, E, 1, 1]?, PB [P]?, Z blocked?;
//                          channels = C, expand_activation, expand_activation_params,
//                          kernel_shape, strides, pads, dilations, activation, activation_params,
//                          project_activation, project_activation_params)
//     -> Y [N, Eb, OH, OW, 8], or [N, Pb, OH, OW, 8] with PW: a pointwise
//        BlockedConv (W, B, the expand_ activation) expanding C channels to E,
//        then a depthwise one (DW, DB, the window attributes and the
//        activation) on its result, then with PW (and PB) a pointwise one
//        (the project_ activation, residual Z) on that: MobileNetV2's inverted
//        residual block, written by opt/fuse_blocked_expand_depthwise.cc so
//        that the fast kernel computes the intermediate tensors a band of rows
//        at a time into buffers the cache keeps, never all of them.
//   BlockedMaxPool(X blocked; channels = C, kernel_shape, strides, pads)
//     -> Y [N, Cb, OH, OW, 8]: MaxPool's result (2-D, no dilation or ceil_mode),
//        blocked: each output the first tap inside the image, then replaced by
//        every later tap (row-major) that is greater, as the MaxPool reference.
//   BlockedGlobalAveragePool(X blocked; channels = C) -> Y [N, C, 1, 1]:
//     GlobalAveragePool's result, plain NCHW (a CNN's last conv output read
//     where it lies, without a FromBlocked before the pool): each channel's
//     pixels summed in order in float, then divided by H * W, as the
//     GlobalAveragePool reference.
// What the reference kernels (ops/blocked_conv.cc) and the fast ones
// (ep/cpu/blocked_conv_fast.cc) share is the geometry below.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/fused_conv.h"
#include "ops/op_schema.h"

namespace nee {

constexpr int64_t kChannelBlock = 8;
inline int64_t ChannelBlocks(int64_t channels) { return (channels + kChannelBlock - 1) / kChannelBlock; }

// A BlockedConv node's inputs, validated, and its allocated output.
struct BlockedConvGeometry {
  int64_t N = 0, C = 0, M = 0, group = 1;  // images, input and output channels
  int64_t H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 0, KW = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0;  // padding before the first row and column
  FusedActivation act;
  bool nchw_input = false;      // input_layout = "nchw": x is [N, C, H, W]
  bool nhwc_output = false;     // output_layout = "nhwc": y (and z) are [N, OH, OW, M]
  const float* x = nullptr;     // [N, Cb, H, W, 8], or [N, C, H, W] with nchw_input
  const float* w = nullptr;     // [M, C / group, KH, KW]
  const float* bias = nullptr;  // [M] or null
  const float* z = nullptr;     // [N, Mb, OH, OW, 8] (or as y with nhwc_output) or null
  float* y = nullptr;           // [N, Mb, OH, OW, 8], or [N, OH, OW, M] with nhwc_output

  int64_t Cb() const { return ChannelBlocks(C); }
  int64_t Mb() const { return ChannelBlocks(M); }
  // Y's dims (and Z's): blocked, or channels last with nhwc_output.
  std::vector<int64_t> OutputDims() const {
    if (nhwc_output) return {N, OH, OW, M};
    return {N, Mb(), OH, OW, kChannelBlock};
  }
  // Where output channel m of pixel p (of OH x OW) of image n lies in y.
  int64_t OutputIndex(int64_t n, int64_t m, int64_t p) const {
    if (nhwc_output) return (n * OH * OW + p) * M + m;
    return ((n * Mb() + m / kChannelBlock) * OH * OW + p) * kChannelBlock + m % kChannelBlock;
  }
  bool depthwise() const { return !nchw_input && !nhwc_output && group == C && group == M; }
  bool pointwise() const {
    return !nchw_input && group == 1 && KH == 1 && KW == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && OH == H &&
           OW == W;
  }
};

// Reads and checks the inputs and attributes, and allocates the output.
Result<BlockedConvGeometry> PlanBlockedConv(KernelContext& ctx);

// The input whose bytes a BlockedConv node's output may be planned onto when
// nothing reads that input after the node, or -1: its residual (input 3), as
// ONNX Runtime lets a conv's Sum input be overwritten, where the conv is 1x1
// (weights' shape from `input_shape`; any stride, no pads, one group,
// blocked input and output) and its activation is none, Relu or Clip (the
// tiles also finish HardSwish and SiLU as they store, but no measured model
// puts those before a residual, so the rule leaves them). The tiles read
// each residual vector just before they store the output vector in its
// place; every other path moves the residual aside first (ResidualApart), so
// the plan is safe whichever kernel runs. `input_shape(i)`: input i's shape, null if unknown.
int BlockedConvOverwritableInput(const Node& node, const std::function<const Shape*(size_t)>& input_shape);

// g.z, or, where the output lies on the residual (planned in place) and the
// caller's path does not read each residual vector just before storing over
// it (`read_in_place` false), a copy of the residual in a per-thread buffer.
const float* ResidualApart(const BlockedConvGeometry& g, bool read_in_place);

// The reference computation of a planned BlockedConv (every output, padding
// lanes 0): sums in double, in the order of the input channels and taps.
void BlockedConvReference(const KernelContext& ctx, const BlockedConvGeometry& g);

// A BlockedExpandDepthwise node as its convs: `expand` (pointwise, its y
// null: the expanded tensor is wherever the kernel puts it) and `depthwise`
// (its x null, its y the node's allocated output unless it projects).
struct BlockedExpandDepthwiseGeometry {
  BlockedConvGeometry expand;
  BlockedConvGeometry depthwise;
  // With the projection (PW given): a pointwise conv over the depthwise
  // conv's output (its x null; the depthwise conv's y then null too) that
  // writes the node's output.
  bool projects = false;
  BlockedConvGeometry project;
};

// Reads and checks the inputs and attributes, and allocates the output.
Result<BlockedExpandDepthwiseGeometry> PlanBlockedExpandDepthwise(KernelContext& ctx);

// The reference: the convs' reference kernels one after the other, through
// whole intermediate tensors (allocated here).
void BlockedExpandDepthwiseReference(const KernelContext& ctx, BlockedExpandDepthwiseGeometry g);

// A BlockedMaxPool node's input, validated, and its allocated output.
struct BlockedPoolGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 0, KW = 0, sh = 1, sw = 1, pt = 0, pl = 0;
  const float* x = nullptr;  // [N, Cb, H, W, 8]
  float* y = nullptr;        // [N, Cb, OH, OW, 8]
  int64_t Cb() const { return ChannelBlocks(C); }
};

Result<BlockedPoolGeometry> PlanBlockedMaxPool(KernelContext& ctx);

// The reference BlockedMaxPool (padding lanes 0; a window with no tap inside
// the image gives 0, as the MaxPool reference).
void BlockedMaxPoolReference(const KernelContext& ctx, const BlockedPoolGeometry& g);

// A BlockedGlobalAveragePool node's input, validated, and its allocated output.
struct BlockedGlobalPoolGeometry {
  int64_t N = 0, C = 0, pixels = 0;  // pixels: H * W
  const float* x = nullptr;           // [N, Cb, H, W, 8]
  float* y = nullptr;                 // [N, C, 1, 1]
  int64_t Cb() const { return ChannelBlocks(C); }
};

Result<BlockedGlobalPoolGeometry> PlanBlockedGlobalAveragePool(KernelContext& ctx);

}  // namespace nee
