// The AVX2 stem kernel: BlockedConv on an NCHW input (see the header).
#include "ep/cpu/blocked_stem_avx2.h"

#include <algorithm>
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/blocked_stem_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_STEM_AVX2 1
#endif

namespace nee::cpu {

#ifdef NEE_STEM_AVX2
namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;
constexpr int64_t kUnit = 2 * kB;  // two output blocks
constexpr int64_t kMaxChannels = 2 * kB;

// The input with its padding written out: C planes of `rows` x `cols`.
struct PaddedInput {
  const float* x;
  int64_t rows, cols;
};

struct TileArgs {
  const BlockedConvGeometry* g;
  PaddedInput in;          // image n's planes (padded, or the input itself: EdgesInKernel)
  int64_t origin;          // where the tile's first pixel's window (tap 0) starts in a plane
  const int64_t* offsets;  // each tap's offset from the window's start
  float* y;                // the tile's first pixel in its first output block
  int64_t tap0, tap1;      // the taps inside the image's rows (whole rows of taps)
  // An edge tile's (EDGE) first pixel adds only taps of columns kw >= first_from, its last
  // only kw < last_to: the rest lie left or right of the image.
  int64_t first_from, last_to;
};

__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate(const FusedActivation& act, __m256 v) {
  switch (act.kind) {
    case Kind::kRelu: return Activate8<Kind::kRelu>(act, v);
    case Kind::kClip: return Activate8<Kind::kClip>(act, v);
    case Kind::kSilu: return Activate8<Kind::kSilu>(act, v);
    case Kind::kHardSwish: return Activate8<Kind::kHardSwish>(act, v);
    default: return v;
  }
}

// One tap of a tile: its OB weight vectors times pixels [FIRST, PX - DROP)'s
// inputs (the others' lie outside the image for this tap).
template <int PX, int OB, int S, int FIRST, int DROP>
__attribute__((target("avx2,fma"), always_inline)) inline void StemTap(const float* xp, const float* wk,
                                                                       __m256 (&acc)[PX][OB]) {
  __m256 wv[OB];
#pragma GCC unroll 2
  for (int j = 0; j < OB; ++j) wv[j] = _mm256_loadu_ps(wk + j * kB);
#pragma GCC unroll 6
  for (int i = FIRST; i < PX - DROP; ++i) {
    const __m256 xv = _mm256_broadcast_ss(xp + i * S);
#pragma GCC unroll 2
    for (int j = 0; j < OB; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

// PX pixels of one output row x OB output blocks, stride S; EDGE: a row's
// first or last tile on the unpadded input (TileArgs' first_from, last_to).
template <int PX, int OB, int S, bool EDGE>
__attribute__((target("avx2,fma"))) void StemTile(const TileArgs& t, const float* w, const float* bias) {
  const BlockedConvGeometry& g = *t.g;
  const int64_t taps = g.KH * g.KW, plane = t.in.rows * t.in.cols, out_plane = g.OH * g.OW * kB;
  __m256 acc[PX][OB];
#pragma GCC unroll 2
  for (int j = 0; j < OB; ++j) {
    const __m256 b = _mm256_loadu_ps(bias + kB * j);
#pragma GCC unroll 6
    for (int i = 0; i < PX; ++i) acc[i][j] = b;
  }
  for (int64_t c = 0; c < g.C; ++c) {
    const float* xc = t.in.x + c * plane + t.origin;
    const float* wc = w + c * taps * kUnit;
    if constexpr (EDGE) {
      for (int64_t row = t.tap0; row < t.tap1; row += g.KW)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t tap = row + kw;
          const float* xp = xc + t.offsets[tap];
          const float* wk = wc + tap * kUnit;
          const bool first_out = kw < t.first_from, last_out = kw >= t.last_to;
          if (first_out && last_out) StemTap<PX, OB, S, 1, 1>(xp, wk, acc);
          else if (first_out) StemTap<PX, OB, S, 1, 0>(xp, wk, acc);
          else if (last_out) StemTap<PX, OB, S, 0, 1>(xp, wk, acc);
          else StemTap<PX, OB, S, 0, 0>(xp, wk, acc);
        }
    } else {
      for (int64_t tap = t.tap0; tap < t.tap1; ++tap) StemTap<PX, OB, S, 0, 0>(xc + t.offsets[tap], wc + tap * kUnit, acc);
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < OB; ++j)
#pragma GCC unroll 6
    for (int i = 0; i < PX; ++i) _mm256_storeu_ps(t.y + j * out_plane + i * kB, Activate(g.act, acc[i][j]));
}

using TileFn = void (*)(const TileArgs&, const float*, const float*);

template <int OB, int S, bool EDGE, int... PX>
constexpr auto TableOf(std::integer_sequence<int, PX...>) {
  return std::array<TileFn, sizeof...(PX)>{StemTile<PX + 1, OB, S, EDGE>...};
}

constexpr int64_t kWidest = 6;

template <int S, bool EDGE>
struct StemTiles {
  static constexpr auto one = TableOf<1, S, EDGE>(std::make_integer_sequence<int, kWidest>{});
  static constexpr auto two = TableOf<2, S, EDGE>(std::make_integer_sequence<int, kWidest>{});
};

struct TileSet {
  const TileFn* one;
  const TileFn* two;
  const TileFn* edge_one;  // a row's first and last tiles on the unpadded input
  const TileFn* edge_two;
};

template <int S>
constexpr TileSet kTiles{StemTiles<S, false>::one.data(), StemTiles<S, false>::two.data(),
                         StemTiles<S, true>::one.data(), StemTiles<S, true>::two.data()};

// Whether the tiles can read the input where it lies, without the padded
// copy: only the first pixel's window reaches left of the image (a left pad
// of at most the stride) and only the last pixel's right of it; rows past
// the top or bottom are skipped as whole rows of taps. YOLO's 6x6 s2 p2 stem
// on 3 x 640 x 640: the copy was 1% of the model's time (CPU-time samples).
bool EdgesInKernel(const BlockedConvGeometry& g) {
  if (g.pl > g.sw) return false;
  return g.OW < 2 || (g.OW - 2) * g.sw - g.pl + g.KW <= g.W;
}

// The zero-padded copy of the input, (OH - 1) * s + KH rows of (OW - 1) * s + KW
// columns a plane, in the calling thread's grow-only scratch (the pool's
// workers read it while the caller waits).
PaddedInput Pad(KernelContext& ctx, const BlockedConvGeometry& g) {
  const int64_t rows = (g.OH - 1) * g.sh + g.KH, cols = (g.OW - 1) * g.sw + g.KW;
  thread_local SgemmScratch scratch;
  float* out = scratch.Get(g.N * g.C * rows * cols);
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* src = g.x + p * g.H * g.W;
      float* dst = out + p * rows * cols;
      const int64_t c0 = std::clamp<int64_t>(g.pl, 0, cols), c1 = std::clamp<int64_t>(g.pl + g.W, c0, cols);
      for (int64_t r = 0; r < rows; ++r) {
        float* d = dst + r * cols;
        const int64_t ih = r - g.pt;
        if (ih < 0 || ih >= g.H) {
          std::fill(d, d + cols, 0.f);
          continue;
        }
        std::fill(d, d + c0, 0.f);
        std::copy(src + ih * g.W + c0 - g.pl, src + ih * g.W + c1 - g.pl, d + c0);
        std::fill(d + c1, d + cols, 0.f);
      }
    }
  });
  return {out, rows, cols};
}

// Output row oh of image n, output units [u0, u1): each unit along the whole
// row (its weights, at most 16 KiB for a 7x7 window on 3 channels, stay in L1).
// `padded`: `in` has the padding written out, else it is the input (EdgesInKernel).
void StemRow(const BlockedConvGeometry& g, const StemWeights& sw, const TileSet& tiles, const PaddedInput& in,
             bool padded, const int64_t* offsets, int64_t n, int64_t oh, int64_t u0, int64_t u1) {
  const int64_t out_plane = g.OH * g.OW * kB, taps = g.KH * g.KW;
  TileArgs t{};
  t.g = &g;
  t.in = in;
  t.in.x = in.x + n * g.C * in.rows * in.cols;
  t.offsets = offsets;
  // Where row oh's windows start, and the rows of taps inside the image.
  const int64_t ih0 = padded ? oh * g.sh : oh * g.sh - g.pt;
  t.tap0 = padded ? 0 : std::max<int64_t>(0, -ih0) * g.KW;
  t.tap1 = padded ? taps : std::min<int64_t>(g.KH, g.H - ih0) * g.KW;
  const int64_t left = padded ? 0 : g.pl;
  // The last pixel's columns inside the image: kw < W - its window's first column.
  const int64_t last_to = padded ? g.KW : std::min(g.KW, g.W - ((g.OW - 1) * g.sw - g.pl));
  for (int64_t u = u0; u < u1; ++u) {
    const bool lone = 2 * u + 1 == g.Mb();
    const TileFn* fns = lone ? tiles.one : tiles.two;
    const TileFn* edge_fns = lone ? tiles.edge_one : tiles.edge_two;
    for (int64_t ow = 0, px = 0; ow < g.OW; ow += px) {
      px = blocked_tile::TilePixels(g.OW - ow, kWidest);
      t.origin = ih0 * in.cols + ow * g.sw - left;
      t.y = g.y + (n * g.Mb() + 2 * u) * out_plane + (oh * g.OW + ow) * kB;
      t.first_from = ow == 0 ? left : 0;
      t.last_to = ow + px == g.OW ? last_to : g.KW;
      const bool edge = t.first_from > 0 || t.last_to < g.KW;
      (edge ? edge_fns : fns)[px - 1](t, sw.w.data() + u * g.C * taps * kUnit, sw.bias.data() + u * kUnit);
    }
  }
}

}  // namespace
#endif  // NEE_STEM_AVX2

bool BlockedStemAvx2Applies(const BlockedConvGeometry& g) {
#ifdef NEE_STEM_AVX2
  if (SgemmActiveIsa() != SgemmIsa::kAvx2 || SgemmPortableForced() || !g.nchw_input || g.z) return false;
  if (g.group != 1 || g.C < 1 || g.C > kMaxChannels || g.dh != 1 || g.dw != 1 || g.KH < 1 || g.KW < 1) return false;
  if (g.sh != g.sw || (g.sh != 1 && g.sh != 2)) return false;
  if (g.pt < 0 || g.pl < 0 || g.pt >= g.KH || g.pl >= g.KW) return false;
  return g.M % kB == 0 && blocked_tile::InRegisters(g.act.kind);
#else
  (void)g;
  return false;
#endif
}

void RunBlockedStemAvx2(KernelContext& ctx, const BlockedConvGeometry& g) {
#ifdef NEE_STEM_AVX2
  const std::shared_ptr<const StemWeights> packed = StemWeightsFor(ctx, g);
  const bool padded = !EdgesInKernel(g);
  const PaddedInput in = padded ? Pad(ctx, g) : PaddedInput{g.x, g.H, g.W};
  const TileSet tiles = g.sw == 1 ? kTiles<1> : kTiles<2>;
  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t tap = 0; tap < g.KH * g.KW; ++tap) offsets[tap] = (tap / g.KW) * in.cols + tap % g.KW;
  const int threads = NumThreads(ctx);
  const int64_t rows = g.N * g.OH, units = (g.Mb() + 1) / 2;
  // Output rows are the tasks; with few rows, the units are shared out too.
  const int64_t wanted = 4 * threads;
  const int64_t groups = threads > 1 && rows < wanted ? std::min(units, (wanted + rows - 1) / rows) : 1;
  ParallelTasks(ctx, rows * groups, [&](int64_t task) {
    const int64_t row = task / groups, group = task % groups;
    const int64_t u0 = group * units / groups, u1 = (group + 1) * units / groups;
    if (u0 < u1) StemRow(g, *packed, tiles, in, padded, offsets.data(), row / g.OH, row % g.OH, u0, u1);
  });
#else
  (void)ctx, (void)g;
#endif
}

}  // namespace nee::cpu
