// Depthwise 2-D convolution (one input channel per group, one output channel
// each) computed sixteen channels at a time with AVX-512: the layout ONNX
// Runtime and OpenVINO use for their blocked kernels, built here only inside
// the kernel so the graph stays NCHW. See depthwise_blocked.cc.
#pragma once
#include <cstdint>

#include "ep/cpu/conv_common.h"

namespace nee::cpu {

// The geometry of a depthwise 2-D conv, NCHW; pads are begin pads (the end
// pads follow from the output size).
struct Depthwise2D {
  int64_t N, C, H, W;      // input
  int64_t OH, OW;          // output
  int64_t KH, KW;          // kernel
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t ph, pw;          // begin pads
};

// Whether this CPU runs the blocked kernel (it needs AVX-512F or AVX2).
bool DepthwiseBlockedAvailable();

// y = depthwise conv of x with weights w ([C, 1, KH, KW]) and optional bias,
// then the optional FusedConv epilogue (`z`: the residual, shaped as y, or
// null). Each output is bias + its taps in (kh, kw) order, computed by one
// task, so results do not depend on the thread count.
void DepthwiseBlocked(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                      const ConvEpilogue* epilogue, const float* z, float* y);

// The same convolution on NCHW planes, sixteen output columns per AVX-512
// vector or eight per AVX2 one, with no transposes (depthwise_planar.cc):
// for 3x3 and 5x5 kernels with stride 1 or 2, with AVX-512 when the output
// rows are at least 12 wide, with AVX2 on any plane (it beats the blocked
// kernel on all of MobileNetV2's).
bool DepthwisePlanarApplies(const Depthwise2D& g);
void DepthwisePlanar(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                     const ConvEpilogue* epilogue, const float* z, float* y);

// Small planes, AVX2 only, reading the input where it lies
// (depthwise_small.cc). Flat: stride 1 on planes whose output rows are as
// wide as the input's and under 16 wide (7x7 and 14x14 with "same" padding), the plane
// as one run of outputs, eight per vector across row ends, each tap one load
// with the padding lanes masked. Narrow: 3x3 stride 2 with pads of 1 and
// output rows of at most 8, one vector per output row, each input row split
// into even and odd columns in registers.
bool DepthwiseFlatApplies(const Depthwise2D& g);
void DepthwiseFlat(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                   const ConvEpilogue* epilogue, const float* z, float* y);
bool DepthwiseNarrowApplies(const Depthwise2D& g);
void DepthwiseNarrow(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                     const ConvEpilogue* epilogue, const float* z, float* y);

}  // namespace nee::cpu
