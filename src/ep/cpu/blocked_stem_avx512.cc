// The AVX-512 stem kernel: BlockedConv on an NCHW input (see the header).
#include "ep/cpu/blocked_stem_avx512.h"

#include <algorithm>
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "ep/cpu/blocked_stem_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_STEM_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;  // 8: a block; a pair of blocks is one zmm
constexpr int64_t kLanes = 2 * kB;

#ifdef NEE_STEM_X86

// What a tile reads and writes besides its weights.
struct TileArgs {
  const BlockedConvGeometry* g;
  const float* x;     // image n's input (or a patch of it), channel 0's plane
  int64_t row_stride, plane_stride;  // between x's rows and channel planes
  float* y;           // the tile's first pixel in its first output block
  const float* z;     // the residual there, or null
  int64_t ih0, iw0;   // row and column in x of tap (0, 0) for the tile's first pixel
  int64_t kh0, kh1;   // tap rows inside the image
  int64_t kw0, kw1;   // tap columns inside the image for every pixel of the tile
  bool odd_tail;      // the last pair has one block
};

// PX pixels of one output row x OP pairs of output blocks, stride S (a
// constant, so that the pixels' broadcasts are offsets from one register).
template <int PX, int OP, int S>
__attribute__((target("avx512f,avx512dq"))) void StemTile(const TileArgs& t, const float* w, const float* bias) {
  const BlockedConvGeometry& g = *t.g;
  const int64_t taps = g.KH * g.KW, pair_stride = g.C * taps * kLanes;
  __m512 acc[PX][OP];
#pragma GCC unroll 2
  for (int j = 0; j < OP; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + kLanes * j);
#pragma GCC unroll 16
    for (int i = 0; i < PX; ++i) acc[i][j] = b;
  }
  for (int64_t c = 0; c < g.C; ++c) {
    const float* xc = t.x + c * t.plane_stride;
    const float* wc = w + c * taps * kLanes;
    for (int64_t kh = t.kh0; kh < t.kh1; ++kh) {
      const float* row = xc + (t.ih0 + kh) * t.row_stride + t.iw0;
      const float* wr = wc + kh * g.KW * kLanes;
      for (int64_t kw = t.kw0; kw < t.kw1; ++kw) {
        const float* xp = row + kw;
        // Opaque to the optimizer, which would otherwise keep values that a
        // later tap reads for the next pixel in registers and spill them.
        __asm__("" : "+r"(xp));
        __m512 wv[OP];
#pragma GCC unroll 2
        for (int j = 0; j < OP; ++j) wv[j] = _mm512_loadu_ps(wr + kw * kLanes + j * pair_stride);
#pragma GCC unroll 16
        for (int i = 0; i < PX; ++i) {
          const __m512 xv = _mm512_set1_ps(xp[i * S]);
#pragma GCC unroll 2
          for (int j = 0; j < OP; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
      }
    }
  }
  const int64_t out_plane = g.OH * g.OW * kB;
  blocked_tile::WithActivation(g.act.kind, [&](auto kind) NEE_TILE_STORES {
#pragma GCC unroll 2
    for (int j = 0; j < OP; ++j) {
      const bool has_high = !(t.odd_tail && j == OP - 1);
#pragma GCC unroll 16
      for (int i = 0; i < PX; ++i) {
        const int64_t lo = 2 * j * out_plane + i * kB;
        blocked_tile::StorePair<decltype(kind)::value>(g.act, t.y, t.z, lo, lo + out_plane, has_high, acc[i][j]);
      }
    }
  });
}

using TileFn = void (*)(const TileArgs&, const float*, const float*);

template <int OP, int S, int... PX>
constexpr auto TableOf(std::integer_sequence<int, PX...>) {
  return std::array<TileFn, sizeof...(PX)>{StemTile<PX + 1, OP, S>...};
}

// Measured on YOLO's stem (w[16,3,6,6] over 3x640x640, SiLU, Zen 4, node
// minimums beside ORT, three alternating runs): its taps run at about one
// zmm FMA a cycle and the SiLU finish is most of the rest; two ways to cut
// that were slower and were dropped: one-pair tiles of 24 pixels (3.95 ms
// vs 3.85 for 12) and finishing a tile's SiLU a vector at a time between the
// next tile's rows of taps (4.1-4.2 ms: it still takes the FMA pipes).
constexpr int64_t kWidest = 12;

// Tiles by pixels - 1 (up to 12), one or two pairs wide.
template <int S>
struct StemTiles {
  static constexpr auto one = TableOf<1, S>(std::make_integer_sequence<int, kWidest>{});
  static constexpr auto two = TableOf<2, S>(std::make_integer_sequence<int, kWidest>{});
};

struct TileSet {
  const TileFn* one;
  const TileFn* two;
};

template <int S>
constexpr TileSet kTiles{StemTiles<S>::one.data(), StemTiles<S>::two.data()};

TileSet TilesFor(int64_t stride) { return stride == 1 ? kTiles<1> : kTiles<2>; }

// The input under output pixels [ow, ow + px) of a row, tap rows [kh0, kh1):
// C planes of KH rows of (px - 1) * S + KW columns, the columns outside the
// image zero. A tile over it needs no per-pixel tap clipping, so the pixels
// whose windows reach past the left or right edge run in a full tile (one
// at a time, their few FMA chains waited on the FMA latency: ResNet's 7x7
// stem lost 5% so). Their sums then hold 0 * w for the padded taps: the
// same values up to a zero's sign, and the same bits at any thread count.
float* Patch(const BlockedConvGeometry& g, const float* x, int64_t ih0, int64_t kh0, int64_t kh1, int64_t ow,
             int64_t px, int64_t* cols) {
  thread_local std::vector<float> patch;
  *cols = (px - 1) * g.sw + g.KW;
  patch.resize(static_cast<size_t>(g.C * g.KH * *cols));
  const int64_t iw0 = ow * g.sw - g.pl;
  const int64_t c0 = std::clamp<int64_t>(-iw0, 0, *cols), c1 = std::clamp<int64_t>(g.W - iw0, c0, *cols);
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      float* d = patch.data() + (c * g.KH + kh) * *cols;
      const float* src = x + (c * g.H + ih0 + kh) * g.W + iw0;
      std::fill(d, d + c0, 0.f);
      std::copy(src + c0, src + c1, d + c0);
      std::fill(d + c1, d + *cols, 0.f);
    }
  return patch.data();
}

// Output row oh of image n, output blocks [ob0, ob1) (ob0 even).
void StemRow(const BlockedConvGeometry& g, const StemWeights& sw, const TileSet& tiles, int64_t n, int64_t oh,
             int64_t ob0, int64_t ob1) {
  const int64_t out_plane = g.OH * g.OW * kB;
  const float* x = g.x + n * g.C * g.H * g.W;
  const int64_t ih0 = oh * g.sh - g.pt;
  const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min<int64_t>(g.KH, g.H - ih0);
  // Columns whose whole window lies inside the image: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(g.OW, (g.pl + g.sw - 1) / g.sw);
  const int64_t last = g.W - g.KW + g.pl;  // the last window start inside, times the stride
  const int64_t ow_hi = last < 0 ? ow_lo : std::max(ow_lo, std::min(g.OW, last / g.sw + 1));
  // The first and last tiles of the row run over patches where they hold
  // border pixels: [0, left) and [right, OW).
  const int64_t left = ow_lo == 0 ? 0 : std::min(g.OW, std::max(ow_lo, kWidest));
  const int64_t right = ow_hi == g.OW ? g.OW : std::max(left, std::min(ow_hi, g.OW - kWidest));
  const int64_t pair_end = (ob1 + 1) / 2;
  const int64_t pair_weights = g.C * g.KH * g.KW * kLanes;
  // A run of pixels through every pair of output blocks before the next: its
  // input rows stay in L1 while the pairs' weights are read.
  auto run = [&](int64_t ow, int64_t px, bool patched) {
    TileArgs t{};
    t.g = &g;
    t.kh0 = kh0;
    t.kh1 = kh1;
    t.kw0 = 0;
    t.kw1 = g.KW;
    if (patched) {
      t.x = Patch(g, x, ih0, kh0, kh1, ow, px, &t.row_stride);
      t.plane_stride = g.KH * t.row_stride;
      t.ih0 = t.iw0 = 0;
    } else {
      t.x = x;
      t.row_stride = g.W;
      t.plane_stride = g.H * g.W;
      t.ih0 = ih0;
      t.iw0 = ow * g.sw - g.pl;
    }
    for (int64_t pair = ob0 / 2, step = 0; pair < pair_end; pair += step) {
      step = std::min<int64_t>(2, pair_end - pair);
      t.odd_tail = pair + step == pair_end && ob1 % 2 == 1;
      const int64_t at = (n * g.Mb() + 2 * pair) * out_plane + (oh * g.OW + ow) * kB;
      t.y = g.y + at;
      t.z = g.z ? g.z + at : nullptr;
      (step == 1 ? tiles.one : tiles.two)[px - 1](t, sw.w.data() + pair * pair_weights,
                                                  sw.bias.data() + pair * kLanes);
    }
  };
  for (int64_t ow = 0, px = 0; ow < left; ow += px) {
    px = blocked_tile::TilePixels(left - ow, kWidest);
    run(ow, px, true);
  }
  for (int64_t ow = left, px = 0; ow < right; ow += px) {
    px = blocked_tile::TilePixels(right - ow, kWidest);
    run(ow, px, false);
  }
  for (int64_t ow = right, px = 0; ow < g.OW; ow += px) {
    px = blocked_tile::TilePixels(g.OW - ow, kWidest);
    run(ow, px, true);
  }
}

#endif  // NEE_STEM_X86

}  // namespace

bool BlockedStemApplies(const BlockedConvGeometry& g) {
#ifdef NEE_STEM_X86
  if (SgemmActiveIsa() != SgemmIsa::kAvx512 || SgemmPortableForced()) return false;
  if (!g.nchw_input || g.group != 1 || g.dh != 1 || g.dw != 1 || g.sh != g.sw || (g.sh != 1 && g.sh != 2))
    return false;
  return g.C > 0 && g.KH > 0 && g.KW > 0 && g.pt >= 0 && g.pl >= 0 && g.M % kB == 0 &&
         blocked_tile::InRegisters(g.act.kind);
#else
  (void)g;
  return false;
#endif
}

void RunBlockedStem(KernelContext& ctx, const BlockedConvGeometry& g) {
#ifdef NEE_STEM_X86
  const std::shared_ptr<const StemWeights> packed = StemWeightsFor(ctx, g);
  const TileSet tiles = TilesFor(g.sw);
  const int threads = NumThreads(ctx);
  const int64_t rows = g.N * g.OH, pairs = (g.Mb() + 1) / 2;
  // Output rows are the tasks; with few rows, the pairs of output blocks are
  // shared out too (two a group, so that tiles stay two pairs wide).
  const int64_t wanted = 4 * threads, half_pairs = (pairs + 1) / 2;
  const int64_t groups = rows < wanted ? std::min(half_pairs, (wanted + rows - 1) / rows) : 1;
  ParallelTasks(ctx, rows * groups, [&](int64_t task) {
    const int64_t row = task / groups, group = task % groups;
    const int64_t u0 = group * half_pairs / groups, u1 = (group + 1) * half_pairs / groups;
    const int64_t ob0 = 4 * u0, ob1 = std::min(g.Mb(), 4 * u1);
    if (ob0 < ob1) StemRow(g, *packed, tiles, row / g.OH, row % g.OH, ob0, ob1);
  });
#else
  (void)ctx, (void)g;
#endif
}

}  // namespace nee::cpu
