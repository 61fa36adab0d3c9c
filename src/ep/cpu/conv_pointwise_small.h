// Pointwise (1x1, stride 1, no padding) convolution with output pixels as the
// vector dimension and the weights broadcast (conv_pointwise_small.cc): no
// packing of the input, the bias, residual and activation applied in
// registers, each output written once, straight into NCHW.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/cpu/conv_common.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// One group-1 pointwise conv: N images of C channels by `pixels`, M outputs.
struct Pointwise {
  int64_t N, C, M, pixels;
};

// The weights [M, C] as blocks of `rows` output channels, each C rows of
// `rows` floats ([block][c][r]; channels past M zero), so that a tile's
// broadcasts for one input channel are adjacent: the layout both NCHW
// pointwise kernels (4 rows here, 8 in conv_pointwise_avx512.cc) read.
struct PointwiseRowBlocks {
  std::vector<float> w;
  int64_t rows = 0, blocks = 0;
};
// Packed once per session when the weights are a constant, else for this run.
std::shared_ptr<const PointwiseRowBlocks> PointwiseRowBlocksFor(KernelContext& ctx, const float* w, int64_t M,
                                                                int64_t C, int64_t rows);

// Whether ConvPointwiseSmall runs this geometry: the AVX2 kernel is active
// and it measured faster than the SGEMM path for such convs.
bool ConvPointwiseSmallApplies(const Pointwise& g);

// y = w x + bias, then the optional FusedConv epilogue (`z`: the residual,
// shaped as y, or null). Each output sums its C products in channel order,
// whatever the tiling or the thread count.
Status ConvPointwiseSmall(KernelContext& ctx, const Pointwise& g, const float* x, const float* w, const float* bias,
                          const ConvEpilogue* epilogue, const float* z, float* y);

}  // namespace nee::cpu
