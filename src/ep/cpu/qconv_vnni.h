// QLinearConv's tiles on AVX-512 VNNI (qconv_fast.cc runs them when the CPU has it and no test lowered the
// ISA limit below AVX-512). vpdpbusd adds the four u8 x s8 products of a lane straight into int32 without
// saturating, so the weights are packed as they are (no clamped pairs, no remainders: the AVX2 tiles'
// vpmaddubsw needs those) and every sum is exact, modulo 2^32 like vpaddd.
//
// Operands are qconv_fast.cc's packed panels: weights in row panels of kRowsPerPanel rows, [k quads][6][4]
// bytes, signed; X in panels of kCols pixels, [k quads][kCols][4] bytes, unsigned. A tile spans up to two row
// panels (12 output channels) and up to two pixel panels (32 pixels): 24 zmm accumulators of the 32, each
// k quad two vector loads of X and twelve broadcast weight quads for 24 vpdpbusd (the 6 x 16 tile of
// igemm.cc does one load per six). Sums land as [pixel panel][kVnniRows][kCols] int32.
#pragma once

#include <cstdint>
#include <vector>

#include "ep/cpu/qconv_common.h"

namespace nee::cpu::qconv {

constexpr int64_t kRowsPerPanel = 6;                 // rows of a packed weight panel
constexpr int64_t kVnniRows = 2 * kRowsPerPanel;    // rows of a VNNI tile: two weight panels
constexpr int64_t kVnniPanels = 2;                   // pixel panels of a VNNI tile
constexpr int64_t kVnniSums = kVnniPanels * kVnniRows * kCols;  // int32 sums a tile writes at most

// Whether the VNNI tiles run now: AVX-512 F/BW/VL and VNNI, the ISA limit at AVX-512, not forced portable.
bool QConvVnniActive();
// Whether the CPU has AVX-512 VBMI (vpermb) and BW/VL (masked byte reads), for the panel packing beside the
// VNNI tiles.
bool QConvHasVbmi();

#if defined(__x86_64__) || defined(__i386__)
// Raw sums of `rows` (1..kVnniRows) output channels from the weight panel at w (the second, for rows past
// kRowsPerPanel, w_panel bytes further) times `panels` (1 or 2) pixel panels from x (x_panel bytes apart),
// all kCols pixels of each, over kquads k quads, into s[panel][row][pixel].
using VnniTileFn = void (*)(const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t x_panel, int64_t kquads,
                            int32_t* s);
VnniTileFn VnniTile(int64_t rows, int64_t panels);
// Where a whole tile's output bytes go: rows m0 .. m0 + kVnniRows - 1 of q (no weight zero points, small
// multipliers), stored at out, rows ld bytes apart.
struct VnniTileOut {
  const Requant* q;
  int64_t m0;
  uint8_t* out;
  int64_t ld;
};
// A whole tile, kVnniRows rows by one full pixel panel, as VnniTile's sums then FinishTilesAvx512, but
// requantized in registers: the same bytes.
void WholeTileVnni(const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t kquads, const VnniTileOut& out);
// The same for one pixel panel's first eight pixels only (a last panel of at most eight: half the work).
VnniTileFn VnniHalfTile(int64_t rows);
// The same for a last panel of `pixels` (1..kVnniFewPixels) pixels, its quads side by side in x
// ([kquads][pixels][4], CompactFewPixels): each pixel's quads against a row panel's weights, two k quads of six
// rows per vpdpbusd (the last ones by masked loads: nothing past a panel).
using VnniPixelTileFn = void (*)(int64_t rows, const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t kquads,
                                 int32_t* s);
VnniPixelTileFn VnniPixelTile(int64_t pixels);
// Up to five: per two k quads and twelve rows, 2 * pixels vpdpbusd where the half tile takes twenty-four (ymm).
constexpr int64_t kVnniFewPixels = 5;

// PadImage (qconv_common.h) on AVX-512: each plane filled with the pad at once, each row's bytes copied
// (flipped) by masked 64-byte loads and stores, where PadImage makes two memset and one memcpy calls a row
// (call overhead: 14-byte rows of a 14x14 image).
void PadImageAvx512(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* dst);

// Depthwise convs (qconv_depthwise_vnni.cc). PackDepthwiseQuads: per channel its taps W' - zw (W' as
// QLinearConv packs them, shifted to signed; `taps` [M][kh * kw]) as signed byte quads, kernel row by kernel row
// ([M][kh][ceil(kw / 4)] int32), once per session; empty where the conv is not depthwise, the geometry does
// not suit, or some W' - zw does not fit a signed byte. RunDepthwiseQConvVnni runs a conv with such quads
// (needs VNNI, VBMI and small multipliers; q's per-channel values as the GEMM path's).
std::vector<int32_t> PackDepthwiseQuads(const QConvGeometry& g, const std::vector<int16_t>& taps, const int32_t* zw);
void RunDepthwiseQConvVnni(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                           const std::vector<int32_t>& quads, const Requant& q, uint8_t* y);

// FinishTileAvx2's bytes on AVX-512, sixteen lanes at a time, by the float shortcut qconv_depthwise.cc proves
// exact for small multipliers, the double arithmetic where it cannot tell (rows `ld` bytes apart, count
// pixels each).
void FinishTileAvx512(const int32_t* sums, int64_t rows, int64_t count, const int32_t* constant, const double* mult,
                      const float* mult_f, const Requant& q, uint8_t* out, int64_t ld);
// The same for a two-panel tile's sums at once (VnniTile's [panel][kVnniRows][kCols]): the first panel's count
// pixels stored at out, the second's second_count kCols further, in one loop (their chains overlap).
void FinishTilesAvx512(const int32_t* sums, int64_t rows, int64_t count, bool pair, int64_t second_count,
                       const int32_t* constant, const double* mult, const float* mult_f, const Requant& q,
                       uint8_t* out, int64_t ld);
#endif

}  // namespace nee::cpu::qconv
