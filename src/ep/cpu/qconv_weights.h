// QLinearConv's GEMM weights (qconv_fast.cc), packed once per session: row panels of six output channels,
// [k quads][6][4] signed bytes (uint8 weights shifted down by 128). For the AVX2 tiles (vpmaddubsw, whose int16
// pair sums saturate) the weights are cut where a pair could saturate, and the cut parts (remainders) listed
// per row and k quad, multiplied by their quads of X and added to the tiles' sums, so that every sum is exact.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/qconv_common.h"
#include "ep/cpu/qconv_tile_avx2.h"

namespace nee::cpu::qconv {

struct QConvWeights {
  // A row's clamped weights in one k quad: the remainders W[m][k] minus the packed value, at the quad's bytes 1
  // and 3 (offset even) or 0 and 2 (offset | kEvenBytes).
  using Remainder = TileRemainder;  // offset: k / 4 * kQuadB
  int64_t K = 0, kquads = 0, panels_per_group = 0;
  // Clamped so that two k quads' vpmaddubsw pair sums add exactly in int16 (PackWeights), and the AVX2 whole
  // tile runs one vpmaddwd per two quads (qconv_tile_avx2.cc).
  bool paired = false;
  HugePageVector<int8_t> data;           // per group, its row panels: [kquads][6][4]
  std::vector<int32_t> row_sums;         // per output channel: sum_k W'[m][k] (shifted weights)
  std::vector<int32_t> row_abs_sums;     // per output channel: sum_k |W'[m][k]| (bounds the sums: Requant)
  std::vector<int16_t> taps;             // depthwise convs only: W' as [M][K]
  std::vector<int64_t> remainder_begin;  // per row of each row panel (all groups), into remainders
  // Per row as remainder_begin: where the row's entries at bytes 1 and 3 start. Each row lists its entries at
  // bytes 0 and 2 (kEvenBytes set) first, so that the AVX2 tile takes each kind in its own loop, without a
  // shift by a per-entry count.
  std::vector<int64_t> remainder_odd;
  std::vector<Remainder> remainders;
  // Paired packings only: each row panel's remainders again for the paired tile's two passes (rows 0-2, rows
  // 3-5, qconv_tile_avx2.cc), as slots of three entries, one per row of the pass (a zero entry where a row has
  // fewer), so that a pass adds them in one loop: twelve loops of a few entries a tile, one per row and kind,
  // mispredicted their exits. Pass p of row panel i: [pass_slot_begin[2 i + p], pass_slot_begin[2 i + p + 1]).
  std::vector<Remainder> pass_slots;
  std::vector<int64_t> pass_slot_begin;
};

// W' = W (int8) or W - 128 (uint8), so that every weight is a signed byte. `clamp`: for the AVX2 tiles, weights
// cut so that no vpmaddubsw pair sum saturates — with `paired`, so that the pair sums of two consecutive k quads
// (quads 2i and 2i + 1) add exactly in int16: the four weights of a lane in the two quads are cut together —,
// the remainders listed; otherwise (VNNI and the portable tile sum in int32) every weight as it is.
std::shared_ptr<QConvWeights> PackWeights(const QConvGeometry& g, const Tensor& w, bool clamp, bool paired);

// The AVX2 tiles' weights: paired where that leaves few remainders, else clamped pair by pair. Whether a conv
// over fewer k quads is paired depends on the image's size (g.P()); either packing is exact for any image, so a
// node's packing, made once, serves every later size.
std::shared_ptr<const QConvWeights> PackWeightsAvx2(const QConvGeometry& g, const Tensor& w);

}  // namespace nee::cpu::qconv
