// QLinearConv's GEMM tile on AVX2 (qconv_fast.cc) with its requantization in registers: up to six output
// channels x sixteen pixels, the sums never stored. For whole pixel panels, zero weight zero points and small
// multipliers (Requant::small_multipliers); the others keep igemm's tile and FinishTileAvx2. Bitwise the
// reference.
#pragma once

#include <cstdint>

#include "ep/cpu/qconv_common.h"

namespace nee::cpu::qconv {

// A row's clamped weights in one k quad (qconv_weights.cc's PackWeights): the remainders W[m][k] minus the packed
// value at the quad's bytes 1 and 3, or with kEvenBytes set in the offset at its bytes 0 and 2.
struct TileRemainder {
  int32_t offset;  // of its quad in a panel of X: k / 4 * 64, | kEvenBytes
  int32_t pair;    // int16 (remainder at byte 1 or 0, at byte 3 or 2): vpmaddwd's operand
};
constexpr int32_t kEvenBytes = 1;


#if defined(__x86_64__) || defined(__i386__)
// w: a row panel of six channels [kquads][6][4] (signed; with `paired`, the four weights of each vpmaddubsw lane
// in quads 2i and 2i + 1 have positive and negative parts summing to at most 128 each: qconv_weights.cc), of
// which `rows` (1-6) are computed; x: npanels whole pixel panels [kquads][16][4] (unsigned), panel_bytes apart;
// row r's remainders rem[rem_begin[r], rem_begin[r + 1]), those at bytes 0 and 2 (kEvenBytes) before rem_odd[r],
// those at bytes 1 and 3 from it; channels m0 .. m0 + rows - 1 of q; out: channel m0's
// first pixel of the first panel, rows ld bytes apart (panel b's pixels at out + 16 b).
// With `paired`, the remainders again as the panel's two passes' slots (QConvWeights::pass_slots): pass p's
// entries slots[slot_begin[p], slot_begin[p + 1]).
void WholeTilesRequantAvx2(int64_t rows, bool paired, const int8_t* w, const uint8_t* x, int64_t panel_bytes,
                           int64_t npanels, int64_t kquads, const TileRemainder* rem, const int64_t* rem_begin,
                           const int64_t* rem_odd, const TileRemainder* slots, const int64_t* slot_begin,
                           const Requant& q, int64_t m0, uint8_t* out, int64_t ld);

// The narrower tiles of a last panel (qconv_fast.cc), their raw sums (no constants, no remainders) stored at s,
// rows kCols apart; `paired`: the weights packed paired (two k quads' pair sums added in int16, as the whole
// tile does). Same sums as the whole tile's for the pixels they compute.
// Pixels 0-7 only (a last panel of at most eight), rows (1-6) of the row panel.
void HalfTileAvx2(int64_t rows, bool paired, const int8_t* w, const uint8_t* x, int64_t kquads, int32_t* s);
// Pixels 0 .. pixels - 1 only (1 to kMaxPixelTile), each pixel's quads broadcast and the row panel's quads the
// vector; x holds those pixels' quads side by side (CompactFewPixels, qconv_common.h), not the panel.
constexpr int64_t kMaxPixelTile = 3;
void PixelTileAvx2(int64_t pixels, bool paired, int64_t rows, const int8_t* w, const uint8_t* x, int64_t kquads,
                   int32_t* s);
#endif

}  // namespace nee::cpu::qconv
