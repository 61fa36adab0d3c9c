// BlockedConv's pointwise convolutions on AVX-512 (blocked_conv_fast.cc runs
// them; the layout is ops/blocked_conv.h's, eight channels a block).
//
// One zmm holds a pixel's sixteen output channels: two consecutive output
// blocks, their weights packed once as pairs of blocks [pairs][C][16]. The
// tiles are up to 12 pixels x 2 pairs (24 accumulators of AVX-512's 32
// registers; 16 x 1 and 8 x 3 for odd pair counts), started at the bias, one
// FMA chain per output over the input channels in order: the same operations
// as the AVX2 tiles (6 pixels x 2 blocks), so the same bits. A finished
// vector's two halves go to their two blocks' planes, or, for a channels-last
// output (BlockedConv's output_layout = "nhwc"), all sixteen lanes to the
// pixel's row, masked past M (rows whose length is not a multiple of 16 are
// built a few pixels at a time in aligned rows, then copied: RangeStaged).
#pragma once
#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "ops/blocked_conv.h"

namespace nee::cpu {

// Whether this machine runs the AVX-512 tiles now (AVX-512F, not limited
// below it by SgemmLimitIsa, not forced portable).
bool BlockedPointwiseAvx512();

// The weights and the bias as pairs of output blocks: w16 [pairs][C][16]
// (lanes 0-7 block 2p, 8-15 block 2p + 1), bias16 [pairs * 16]; channels past
// M zero.
struct PointwisePairs {
  HugePageVector<float> w16;  // read end to end by every run: huge pages (base/huge_pages.h)
  std::vector<float> bias16;
};
void PackPointwisePairs(const BlockedConvGeometry& g, PointwisePairs* out);

// Pixels [p0, p1) of image n, output blocks [ob0, ob1) (ob0 even), into g.y
// in its layout (blocked or channels last): with
// `finish`, the residual (g.z) added and the activation applied as each
// vector is stored (only None, Relu and Clip: the caller checks); without,
// the sums (bias included) only.
void PointwiseRangeAvx512(const BlockedConvGeometry& g, const PointwisePairs& pw, bool finish, int64_t n, int64_t p0,
                          int64_t p1, int64_t ob0, int64_t ob1);

// Where PointwiseRowsToAvx512 writes (blocked): output block ob's pixel p
// at y + (ob * plane + p - first) * 8; z, the residual, laid
// out as y (or null).
struct PointwiseOut {
  float* y;
  const float* z;
  int64_t plane, first;
};

// The same for pixels [p0, p1) of image n and output blocks [ob0, ob1) (ob0
// even), written where `out` says instead of g.y (BlockedExpandDepthwise's
// rows of its expanded tensor in a buffer, its projection's rows of the
// output); with `finish`, the residual out.z added and the activation applied
// as each vector is stored (only None, Relu, Clip and SiLU).
void PointwiseRowsToAvx512(const BlockedConvGeometry& g, const PointwisePairs& pw, bool finish, int64_t n, int64_t p0,
                           int64_t p1, int64_t ob0, int64_t ob1, const PointwiseOut& out);

}  // namespace nee::cpu
