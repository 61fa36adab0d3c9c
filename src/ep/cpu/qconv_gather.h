// QLinearConv's panels of X (qconv_fast.cc): the pixels of one tile gathered from the image (or its
// zero-point-padded copy) into the layout the tiles read, [k quads][kCols pixels][4 bytes], rows past K and
// pixels past P reading as the (flipped) input zero point.
#pragma once

#include <cstdint>

#include "ep/cpu/qconv_common.h"

namespace nee::cpu::qconv {

constexpr int64_t kPanelQuadBytes = kCols * 4;  // one k quad of a panel

// vpermb's index from four rows' sixteen bytes side by side (row t in bytes 16t .. 16t + 15) to sixteen pixels'
// quads (byte 4p + t = row t's byte p): the panels' layout, and the direct path's copy (qconv_direct.cc).
alignas(64) inline constexpr uint8_t kQuadTranspose[64] = {
    0,  16, 32, 48, 1,  17, 33, 49, 2,  18, 34, 50, 3,  19, 35, 51, 4,  20, 36, 52, 5,  21,
    37, 53, 6,  22, 38, 54, 7,  23, 39, 55, 8,  24, 40, 56, 9,  25, 41, 57, 10, 26, 42, 58,
    11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};

// One panel's rows of X: row k = (c, i, j) holds the tap (i, j) of channel c
// at the panel's kCols pixels [p0, p0 + kCols) (pixels past P read the
// padding: their outputs are not stored). `rows` is K x kCols bytes plus
// kCols of slack.
void GatherPanelRows(const QConvGeometry& g, const uint8_t* padded, int64_t p0, uint8_t pad, uint8_t* rows);

// Rows (K x kCols, row-major, `ld` bytes apart) into the panel layout
// [k quads][kCols][4]; rows past K read as `pad` (their weights are 0).
void PackPanelPortable(const uint8_t* rows, int64_t ld, int64_t K, uint8_t pad, uint8_t* dst);

#if defined(__x86_64__) || defined(__i386__)
// Where a panel's bytes are read from: channel 0 of the image's group, either the zero-point-padded copy
// (flipped already) or x itself when no tap leaves the image (flipped here, as it is read).
struct PanelSource {
  const uint8_t* image;
  const uint8_t* end;  // one past the last byte whole-vector reads may touch
  int64_t plane, row;  // bytes between channels, between rows
  uint8_t flip;
  const int64_t* taps;  // per row k of X (channel c, tap (i, j)): where its plane starts, from image
};

// One panel straight into the layout [k quads][kCols][4] (AVX2, with `vbmi` AVX-512 VBMI's byte permute for
// the transposition; see qconv_gather.cc). dst 64-byte aligned.
void GatherPackPanelAvx2(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad, uint8_t* dst,
                         bool vbmi);
// Two adjacent whole panels of a pointwise conv, pixels [p0, p0 + 2 kCols), at once into dst0 and dst1 (AVX2, each
// 64-byte aligned): the same bytes as GatherPackPanelAvx2 on each. False (nothing written) where it does not apply:
// not pointwise, output rows not the source's, fewer than two whole panels left, or reads past src.end.
bool GatherPackPanelPairAvx2(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad, uint8_t* dst0,
                             uint8_t* dst1);
// Four adjacent whole panels at once, panel j at dst + j * panel_bytes (AVX-512 VBMI; each 64-byte aligned): the
// same bytes as GatherPackPanelAvx2 on each, and false where it does not apply, as GatherPackPanelPairAvx2.
bool GatherPackFourPanelsVbmi(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad, uint8_t* dst,
                              int64_t panel_bytes);
#endif

}  // namespace nee::cpu::qconv
