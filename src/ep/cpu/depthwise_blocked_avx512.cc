// 3x3 stride-1 depthwise convolution in the channel-blocked layout on AVX-512.
//
// A zmm holds two neighbouring output pixels of one block (2 x 8 channels),
// the taps' weight vectors broadcast to both halves, so a pair's tap is one
// load (its two input pixels are neighbours too). A tile is up to 7 such
// pairs of one or two output rows (up to 14 accumulators beside the nine
// weight vectors): each input row the tile reads is loaded once per tap
// column and meets every output row that uses it, so two output rows load
// four input rows where one row at a time loads six. The image border is
// handled by masks, not by a separate path: a row's first and last pairs
// leave the taps outside the image out of their lanes' sums (masked loads,
// masked FMAs), and input rows outside the image are skipped. (The AVX2
// kernel's border path, one pixel at a time with every tap checked, took half
// the outputs of a 7x7 or 14x14 plane.)
//
// Stride 2 stays with the AVX2 kernel: a pair's two pixels read input columns
// two apart, and recombining neighbouring loads by 256-bit shuffles made
// MobileNetV2's stride-2 layers 5-30% slower than it.
//
// Every output is bias + its taps in (kh, kw) order, whichever tile, row pair
// or task computes it, so results do not depend on the thread count or on how
// a strip of rows is cut.
#include "ep/cpu/depthwise_blocked_avx512.h"

#include <array>
#include <utility>

#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/blocked_tile_avx512.h"
#define NEE_DW_AVX512 1
#endif

namespace nee::cpu {

#ifdef NEE_DW_AVX512
namespace {

constexpr int64_t kB = kChannelBlock;  // 8 floats: one pixel of a block
constexpr int kMaxPairs = 7;           // pairs a tile covers at most (2 x 7 accumulators)

#define NEE_DW_TARGET __attribute__((target("avx512f,avx512dq")))
#define NEE_DW_INLINE __attribute__((always_inline)) inline

// What a tile needs to know of its plane and its place.
struct TileAt {
  const BlockedConvGeometry* g;
  const float* x;  // the input plane [H][W][8]
  float* y;        // the output plane [OH][OW][8]
  const float* z;  // the residual, as y (null: none)
  int64_t oh;      // the tile's first output row
  int64_t ow;      // its first output column (even: the first pixel of a pair)
};

// Which of a tile's pairs may reach outside the plane. With pads of at most 1
// on every side (the kernel's condition), only a row's first pair reads a
// column left of the image and only its last pair one right of it (or has a
// single pixel).
constexpr int kLeft = 1, kRight = 2;

// Lanes 0-7 when pixel `lo` is inside [0, W), 8-15 when `hi` exists and is.
NEE_DW_INLINE __mmask16 PixelLanes(int64_t lo, int64_t hi, int64_t W, bool hi_exists) {
  const unsigned lo_in = static_cast<uint64_t>(lo) < static_cast<uint64_t>(W);
  const unsigned hi_in = hi_exists & (static_cast<uint64_t>(hi) < static_cast<uint64_t>(W));
  return static_cast<__mmask16>((0x00FFu * lo_in) | (0xFF00u * hi_in));
}

// The lanes an edge pair keeps per tap column: for the load and the FMA.
struct PairMasks {
  __mmask16 tap[3];
};

// The masks of the pair whose first output pixel is ow.
NEE_DW_INLINE PairMasks MasksOf(const BlockedConvGeometry& g, int64_t ow) {
  PairMasks m;
  const int64_t iw = ow - g.pl;
  for (int kw = 0; kw < 3; ++kw) m.tap[kw] = PixelLanes(iw + kw, iw + 1 + kw, g.W, ow + 1 < g.OW);
  return m;
}

// A tile's edge pairs' masks (those it has not, unset).
struct TileMasks {
  PairMasks left, right;
};

template <int kEdges, int P>
NEE_DW_INLINE bool Masked(int j) {
  return ((kEdges & kLeft) && j == 0) || ((kEdges & kRight) && j == P - 1);
}

// acc[i][j] += the taps of the tile's input row r (kernel row r - i of output
// row i: a constant, so the weight vectors stay in registers) for pairs j:
// tap column kw of pair j is the two pixels at ow + 2j - pl + kw, one load.
// `row` points at the row's column ow - pl. An edge pair's taps outside the
// image are left out of its lanes' sums.
template <int r, int R, int P, int kEdges>
NEE_DW_TARGET NEE_DW_INLINE void RowTaps(const float* row, const __m512 wv[9], const TileMasks& tm,
                                         __m512 (&acc)[R][P]) {
#pragma GCC unroll 3
  for (int kw = 0; kw < 3; ++kw) {
#pragma GCC unroll 7
    for (int j = 0; j < P; ++j) {
      const float* at = row + (2 * j + kw) * kB;
      const bool masked = Masked<kEdges, P>(j);
      const __mmask16 m = !masked ? 0xFFFF : (kEdges & kLeft) && j == 0 ? tm.left.tap[kw] : tm.right.tap[kw];
      const __m512 v = masked ? _mm512_maskz_loadu_ps(m, at) : _mm512_loadu_ps(at);
#pragma GCC unroll 2
      for (int i = 0; i < R; ++i) {
        const int kh = r - i;
        if (kh < 0 || kh > 2) continue;
        acc[i][j] = masked ? _mm512_mask3_fmadd_ps(v, wv[kh * 3 + kw], acc[i][j], m)
                           : _mm512_fmadd_ps(v, wv[kh * 3 + kw], acc[i][j]);
      }
    }
  }
}

// The tile's input rows r = 0, 1, ... in order (r a constant in each step),
// those outside the image skipped. `col0`: the first column the tile reads,
// in row 0 of the plane; `first`: the plane row of the tile's row 0.
template <int R, int P, int kEdges, int r = 0>
NEE_DW_TARGET NEE_DW_INLINE void InputRows(const float* col0, int64_t first, int64_t H, int64_t W,
                                           const __m512 wv[9], const TileMasks& tm, __m512 (&acc)[R][P]) {
  if constexpr (r < R + 2) {
    if (first + r >= 0 && first + r < H) RowTaps<r, R, P, kEdges>(col0 + (first + r) * W * kB, wv, tm, acc);
    InputRows<R, P, kEdges, r + 1>(col0, first, H, W, wv, tm, acc);
  }
}

// R output rows x P pairs from t.oh, t.ow: the input rows they read, then
// each finished pair stored (residual, activation), its high half only when
// that pixel exists.
template <int R, int P, int kEdges>
NEE_DW_TARGET void Tile(const TileAt& t, const __m512 wv[9], __m512 bias, const FusedActivation& act) {
  const BlockedConvGeometry& g = *t.g;
  __m512 acc[R][P];
#pragma GCC unroll 2
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 7
    for (int j = 0; j < P; ++j) acc[i][j] = bias;
  TileMasks tm;
  if (kEdges & kLeft) tm.left = MasksOf(g, t.ow);
  if (kEdges & kRight) tm.right = MasksOf(g, t.ow + 2 * (P - 1));
  const int64_t OW = g.OW;
  InputRows<R, P, kEdges>(t.x + (t.ow - g.pl) * kB, t.oh - g.pt, g.H, g.W, wv, tm, acc);
  float* y = t.y;
  const float* z = t.z;
  blocked_tile::WithActivation(act.kind, [&](auto kind) NEE_TILE_STORES {
#pragma GCC unroll 2
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 7
      for (int j = 0; j < P; ++j) {
        const int64_t at = ((t.oh + i) * OW + t.ow + 2 * j) * kB;
        const __mmask16 m = t.ow + 2 * j + 1 < OW ? 0xFFFF : 0x00FF;
        __m512 v = acc[i][j];
        if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, z + at));
        _mm512_mask_storeu_ps(y + at, m, blocked_tile::Activate<decltype(kind)::value>(act, v));
      }
  });
}

// A function pointer type with __m512 parameters as a template argument: GCC
// warns that the vector type's alignment attribute is dropped there, which is
// harmless for a pointer's type.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
using TileFn = void (*)(const TileAt&, const __m512*, __m512, const FusedActivation&);

template <int R, int kEdges, int... P>
constexpr std::array<TileFn, sizeof...(P)> TilesOf(std::integer_sequence<int, P...>) {
  return {Tile<R, P + 1, kEdges>...};
}

// The tiles by [edges][rows - 1][pairs - 1].
constexpr auto kPairs = std::make_integer_sequence<int, kMaxPairs>{};
constexpr std::array<TileFn, kMaxPairs> kTiles[4][2] = {
    {TilesOf<1, 0>(kPairs), TilesOf<2, 0>(kPairs)},
    {TilesOf<1, kLeft>(kPairs), TilesOf<2, kLeft>(kPairs)},
    {TilesOf<1, kRight>(kPairs), TilesOf<2, kRight>(kPairs)},
    {TilesOf<1, kLeft | kRight>(kPairs), TilesOf<2, kLeft | kRight>(kPairs)}};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The edge pairs of a row: the first reads column -1 with a left pad; the
// last reads column W with a right pad, or has a single pixel.
int RowEdges(const BlockedConvGeometry& g) {
  const int64_t last_in = 2 * ((g.OW + 1) / 2) - g.pl + 1;  // the last column the last pair reads
  return (g.pl > 0 ? kLeft : 0) | (last_in >= g.W || g.OW % 2 == 1 ? kRight : 0);
}

NEE_DW_TARGET void Rows(const BlockedConvGeometry& g, const float* x, const float* w9, const float* bias8, float* y,
                        const float* z, int64_t oh0, int64_t oh1) {
  __m512 wv[9];
  for (int k = 0; k < 9; ++k) wv[k] = _mm512_broadcast_f32x8(_mm256_loadu_ps(w9 + k * kB));
  const __m512 bias = _mm512_broadcast_f32x8(_mm256_loadu_ps(bias8));
  const FusedActivation none;
  const FusedActivation& act = blocked_tile::InRegisters(g.act.kind) ? g.act : none;
  // A row's pairs cut into near-equal tiles of at most kMaxPairs.
  const int64_t pairs = (g.OW + 1) / 2, tiles = (pairs + kMaxPairs - 1) / kMaxPairs;
  const int edges = RowEdges(g);
  for (int64_t oh = oh0; oh < oh1; oh += 2) {
    const int rows = oh + 1 < oh1 ? 2 : 1;
    for (int64_t k = 0; k < tiles; ++k) {
      const int64_t pair0 = pairs * k / tiles, n = pairs * (k + 1) / tiles - pair0;
      const int tile_edges = (k == 0 ? edges & kLeft : 0) | (k == tiles - 1 ? edges & kRight : 0);
      kTiles[tile_edges][rows - 1][n - 1](TileAt{&g, x, y, z, oh, 2 * pair0}, wv, bias, act);
    }
  }
}

}  // namespace

BlockedDepthwiseRows BlockedDepthwiseAvx512For(const BlockedConvGeometry& g) {
  const bool active = SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced();
  // The end pads the output size implies: at most 1, like the begin pads.
  const int64_t pad_right = g.OW + 2 - g.W - g.pl, pad_bottom = g.OH + 2 - g.H - g.pt;
  const bool shape = g.depthwise() && g.KH == 3 && g.KW == 3 && g.dh == 1 && g.dw == 1 && g.sh == 1 &&
                     g.sw == 1 && g.pt >= 0 && g.pt <= 1 && g.pl >= 0 && g.pl <= 1 && pad_right >= 0 &&
                     pad_right <= 1 && pad_bottom >= 0 && pad_bottom <= 1 && g.OW > 0 && g.OH > 0;
  if (!active || !shape) return {};
  return {Rows, blocked_tile::InRegisters(g.act.kind)};
}

#else
BlockedDepthwiseRows BlockedDepthwiseAvx512For(const BlockedConvGeometry&) { return {}; }
#endif

}  // namespace nee::cpu
