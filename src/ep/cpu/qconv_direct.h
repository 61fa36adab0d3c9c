// QLinearConv without im2col on AVX-512 VNNI + VBMI: stride-1 and stride-2, undilated, ungrouped convs with a
// kernel wider than one tap (ResNet's 3x3 convs) over input channels in multiples of four.
//
// The GEMM path (qconv_fast.cc) packs each panel of 16 output pixels as [k quads][16][4] bytes, every tap of
// every channel: nine times the input for a 3x3 conv, written and read again per run. Here the input is copied
// once, zero-point padded, as [channel quads][hp][wp][4] bytes (four channels' bytes of a pixel side by side:
// vpdpbusd's quad). With k ordered tap-major (k = tap * C + c, the weights repacked so), the sixteen quads a
// tile reads for tap t and channel quad c are those of the panel's pixels shifted by t's offset in the padded
// plane: contiguous along an output row, so one masked 64-byte load per output row the panel touches (at most
// kDirectSegments: ResNet's 3x3 stride-1 convs at 56x56, 28x28 and 14x14). At column stride 2 the copy's rows
// hold their even columns, then their odd ones, so that a tap's pixels are contiguous again (CopyRows in
// qconv_direct.cc); a row stride of 2 only skips rows. The tiles are qconv_vnni.cc's
// 12 x 32 otherwise, and their sums go through the same requantization (FinishTilesAvx512): bitwise the GEMM
// path, which is bitwise the reference.
#pragma once

#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/qconv_common.h"
#include "ops/op_schema.h"

namespace nee::cpu::qconv {

// Output rows a panel of 16 pixels may touch on the direct path (where some panel touches more, the GEMM path
// runs: three masked loads per panel and k quad measured slower than its packing at 14x14).
constexpr int64_t kDirectSegments = 2;

// The weights in the direct path's order: per row panel of six output channels, [k quads][6][4] signed bytes
// with k = tap * C + c (the GEMM path's panels have k = c * taps + tap).
struct DirectQConvWeights {
  int64_t kquads = 0, panels = 0;
  HugePageVector<int8_t> data;
};

// Whether the direct path runs this conv: the CPU (VNNI, VBMI, ISA limit), the geometry, and a requantization
// by FinishTilesAvx512 (no weight zero points, small multipliers).
bool DirectQConvApplies(const QConvGeometry& g, const Requant& q, bool vnni, bool vbmi);

// The GEMM path's packed weights (`panels` row panels of [kquads][6][4], k = c * taps + tap, kquads * 4 >= K)
// reordered tap-major.
DirectQConvWeights RepackDirect(const QConvGeometry& g, const int8_t* gemm_packed, int64_t panels, int64_t kquads);

// y (N x M x oh x ow) from x (N x C x ih x iw, int8 when flip is 0x80), `pad` the (flipped) input zero point.
void RunDirectQConv(KernelContext& ctx, const QConvGeometry& g, const DirectQConvWeights& w, const Requant& q,
                    const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* y);

}  // namespace nee::cpu::qconv
