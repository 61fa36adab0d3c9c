#include "ep/cpu/blocked_direct_avx2.h"

#include <algorithm>
#include <cstdlib>
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/blocked_direct_avx512.h"
#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/packed_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_DIRECT_AVX2 1
#endif

namespace nee::cpu {

#ifdef NEE_DIRECT_AVX2
namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;

// [units][Cb][KH][KW][8][16], a unit two output blocks: for a unit, input
// block, tap and input lane, its sixteen output channels' weights, so a
// tile's two weight vectors of a step are neighbours (the AVX-512 kernel's
// layout); bias [units * 16]; channels past M 0.
struct DirectWeights {
  HugePageVector<float> w;
  std::vector<float> bias;
};

constexpr int64_t kUnit = 2 * kB;

std::shared_ptr<const DirectWeights> Pack(const BlockedConvGeometry& g) {
  auto p = std::make_shared<DirectWeights>();
  const int64_t taps = g.KH * g.KW, units = (g.Mb() + 1) / 2;
  p->w.assign(static_cast<size_t>(units * g.Cb() * taps * kB * kUnit), 0.f);
  p->bias.assign(static_cast<size_t>(units * kUnit), 0.f);
  for (int64_t m = 0; m < g.M; ++m) {
    if (g.bias) p->bias[static_cast<size_t>(m)] = g.bias[m];
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t at = (((m / kUnit * g.Cb() + c / kB) * taps + t) * kB + c % kB) * kUnit + m % kUnit;
        p->w[static_cast<size_t>(at)] = g.w[(m * g.C + c) * taps + t];
      }
  }
  return p;
}

std::shared_ptr<const DirectWeights> PackedFor(KernelContext& ctx, const BlockedConvGeometry& g, bool drop) {
  // Keyed apart from the AVX-512 kernel's pairs (the ISA can change at run time in tests).
  return PackedOnce<DirectWeights>(ctx, {g.M, g.C, g.KH, g.KW, 8}, {1, 2}, [&] { return Pack(g); }, drop);
}

struct TileArgs {
  const BlockedConvGeometry* g;
  const float* x;          // image n's input, block 0
  int64_t origin;          // where the tile's first pixel's window (tap 0) starts in a block, in floats
  const int64_t* offsets;  // each tap's offset from the window's start, in floats
  const int64_t* pixels;   // FLAT tiles: each pixel's window start from the first's, in floats
  float* y;                // the tile's first pixel in its first output block
  const float* z;          // the residual there, or null
  int64_t tap0, tap1;      // the taps inside the image (whole rows of taps: the columns are padded)
  int64_t cb0, cb1;        // the input blocks this pass adds
  bool start;              // the first pass: the sums start at the bias, else at y's partial sums
  bool finish;             // the last pass: the residual and the activation, as the sums are stored
};

// Chosen per stored vector (a predictable branch), as the AVX-512 tiles do.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate(const FusedActivation& act, __m256 v) {
  switch (act.kind) {
    case Kind::kRelu: return Activate8<Kind::kRelu>(act, v);
    case Kind::kClip: return Activate8<Kind::kClip>(act, v);
    case Kind::kSilu: return Activate8<Kind::kSilu>(act, v);
    case Kind::kHardSwish: return Activate8<Kind::kHardSwish>(act, v);
    default: return v;
  }
}

// Eight zeros: what the LEFT tiles' first pixel reads for a tap left of the image.
alignas(32) constexpr float kZeroPixel[kB] = {};

// PX pixels of one output row x OB output blocks, stride S (a constant, so
// that the pixels' broadcasts are offsets from one register). LEFT: the
// row's first tile on an unpadded input with a left pad (LeftPadInKernel):
// for the taps left of the image its first pixel reads kZeroPixel instead,
// so it adds 0 x w there as it did from the zero-padded copy (the same bits),
// through the same instructions as the other tiles (a second copy of the
// step without that pixel spilled an accumulator and ran ResNet-50's 14x14 ->
// 7x7 conv, whose first tile is 4 of 7 pixels, 4% slower than the copy).
// FLAT: the tile's pixels are consecutive in the output but may span rows
// (narrow images, FlatTiles): each pixel's window starts at t.pixels[i]
// from the first's instead of S apart; the input is the padded copy.
template <int PX, int OB, int S, bool LEFT, bool FLAT>
__attribute__((target("avx2,fma"))) void DirectTile(const TileArgs& t, const float* w, const float* bias) {
  static_assert(!(LEFT && FLAT), "flat tiles read the padded copy");
  const BlockedConvGeometry& g = *t.g;
  int64_t pixel[PX];  // FLAT: each pixel's window from the first's (else i * S * kB, a displacement)
#pragma GCC unroll 12
  for (int i = 0; i < PX; ++i) pixel[i] = FLAT ? t.pixels[i] : 0;
  const int64_t taps = g.KH * g.KW, in_plane = g.H * g.W * kB, out_plane = g.OH * g.OW * kB;
  __m256 acc[PX][OB];
#pragma GCC unroll 2
  for (int j = 0; j < OB; ++j) {
    const __m256 b = _mm256_loadu_ps(bias + kB * j);
#pragma GCC unroll 12
    for (int i = 0; i < PX; ++i) acc[i][j] = t.start ? b : _mm256_loadu_ps(t.y + j * out_plane + i * kB);
  }
  for (int64_t cb = t.cb0; cb < t.cb1; ++cb) {
    const float* xb = t.x + cb * in_plane;
    const float* wb = w + cb * taps * kB * kUnit;
    for (int64_t tap = t.tap0, kw = 0; tap < t.tap1; ++tap) {
      const float* xp = xb + (t.origin + t.offsets[tap]);
      // Opaque to the optimizer, as in the AVX-512 tiles: otherwise GCC keeps
      // pixel values across taps (tap kw + S reads pixel i + 1's) and spills them.
      __asm__("" : "+r"(xp));
      const float* x0 = xp;  // the first pixel's
      if constexpr (LEFT) {
        if (kw < g.pl) x0 = kZeroPixel;
        kw = kw + 1 == g.KW ? 0 : kw + 1;  // the taps are whole rows of KW (TileArgs)
      }
      const float* wk = wb + tap * kB * kUnit;
      // FLAT: one pointer per pixel, each opaque, so that GCC addresses every
      // broadcast as pointer + constant (else it kept pixel x lane offsets on
      // the stack and reloaded one for each broadcast).
      const float* xs[PX];
#pragma GCC unroll 12
      for (int i = 0; i < PX; ++i) {
        xs[i] = i == 0 ? x0 : FLAT ? xp + pixel[i] : xp + i * S * kB;
        if constexpr (FLAT) __asm__("" : "+r"(xs[i]));
      }
#pragma GCC unroll 8
      for (int l = 0; l < kB; ++l) {
        __m256 wv[OB];
#pragma GCC unroll 2
        for (int j = 0; j < OB; ++j) wv[j] = _mm256_loadu_ps(wk + l * kUnit + j * kB);
#pragma GCC unroll 12
        for (int i = 0; i < PX; ++i) {
          const __m256 xv = _mm256_broadcast_ss(xs[i] + l);
#pragma GCC unroll 2
          for (int j = 0; j < OB; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < OB; ++j)
#pragma GCC unroll 12
    for (int i = 0; i < PX; ++i) {
      const int64_t at = j * out_plane + i * kB;
      __m256 v = acc[i][j];
      if (t.finish) {
        if (t.z) v = _mm256_add_ps(v, _mm256_loadu_ps(t.z + at));
        v = Activate(g.act, v);
      }
      _mm256_storeu_ps(t.y + at, v);
    }
}

using TileFn = void (*)(const TileArgs&, const float*, const float*);

template <int OB, int S, bool LEFT, bool FLAT, int... PX>
constexpr auto TableOf(std::integer_sequence<int, PX...>) {
  return std::array<TileFn, sizeof...(PX)>{DirectTile<PX + 1, OB, S, LEFT, FLAT>...};
}

constexpr int64_t kWidest = 6;  // pixels of a two-block tile (twelve accumulators)

template <int S, bool LEFT, bool FLAT = false>
struct DirectTiles {
  static constexpr auto one = TableOf<1, S, LEFT, FLAT>(std::make_integer_sequence<int, kWidest>{});
  static constexpr auto two = TableOf<2, S, LEFT, FLAT>(std::make_integer_sequence<int, kWidest>{});
};

struct TileSet {
  const TileFn* one;
  const TileFn* two;
  const TileFn* left_one;  // the rows' first tiles (null: the input is padded, every tile is interior)
  const TileFn* left_two;
  bool flat;  // tiles run along the band's pixels across row ends (FlatTiles)
};

template <int S>
constexpr TileSet kTiles{DirectTiles<S, false>::one.data(), DirectTiles<S, false>::two.data(), nullptr, nullptr,
                         false};
template <int S>
constexpr TileSet kLeftTiles{DirectTiles<S, false>::one.data(), DirectTiles<S, false>::two.data(),
                             DirectTiles<S, true>::one.data(), DirectTiles<S, true>::two.data(), false};
template <int S>
constexpr TileSet kFlatTiles{DirectTiles<S, false, true>::one.data(), DirectTiles<S, false, true>::two.data(),
                             nullptr, nullptr, true};

TileSet TilesFor(int64_t stride, bool left_pad, bool flat) {
  if (flat) return stride == 1 ? kFlatTiles<1> : kFlatTiles<2>;
  if (left_pad) return stride == 1 ? kLeftTiles<1> : kLeftTiles<2>;
  return stride == 1 ? kTiles<1> : kTiles<2>;
}

// Input blocks per pass (see DirectRows): the passes' weights for a tile's
// two output blocks stay in L1 (about 16 KiB: 3x3 taps, three blocks).
int64_t BlocksPerPass(const BlockedConvGeometry& g) {
  const int64_t per_block = g.KH * g.KW * kB * kUnit * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, (16 * 1024) / per_block);
}

// How much of a core's L2 (512 KiB on Zen 3) a group of output blocks'
// weights may take beside the input rows its tasks read.
constexpr int64_t kGroupWeights = 256 * 1024;

// The weights the next (pass, unit) of DirectRows will read, prefetched a
// share before each tile of the current one, where a unit's weights are more
// than a group may hold (kGroupWeights): they come from L3 or memory once
// (ResNet-50's 512-channel 3x3 conv: 9.4 MB, 288 KiB a unit), and the tiles of
// a pass reading them in a burst of a few hundred lines waited on each
// (2980 -> 2736 us). Where a unit's weights stay in L2 (its 128- and
// 256-channel convs) the prefetches measured 1-2% slower.
struct AheadFetch {
  const char* next = nullptr;
  const char* end = nullptr;
  int64_t per_tile = 0;  // lines a tile's turn
  void Start(const float* from, int64_t floats, int64_t tiles) {
    next = reinterpret_cast<const char*>(from);
    end = next + floats * static_cast<int64_t>(sizeof(float));
    per_tile = (floats * static_cast<int64_t>(sizeof(float)) / 64 + tiles - 1) / std::max<int64_t>(1, tiles);
  }
  void Step() {
    for (int64_t i = 0; i < per_tile && next < end; ++i, next += 64) _mm_prefetch(next, _MM_HINT_T0);
  }
};

// A flat tile's width with `left` pixels to go: as few tiles as six-wide ones
// need, of even widths.
int64_t FlatTilePixels(int64_t left) {
  const int64_t tiles = (left + kWidest - 1) / kWidest;
  return (left + tiles - 1) / tiles;
}

// FlatRows: output rows [oh0, oh1) of image n from output block ob as one
// run of pixels, tiles crossing row ends, on the padded copy (no tap left out:
// t.tap0, t.tap1 cover the window). A row of 7 (ResNet-50's 512-channel
// 14x14 -> 7x7 conv) was tiles of 4 + 3 pixels, 8 and 6 accumulators, too
// few chains for the FMA latency; flat, the 49 pixels are 6,6,6,6,5,5,5,5,5
// (as few tiles as six-wide ones need, of even widths). windows: each pixel's
// window start in the padded input, from the band's first pixel on.
void FlatRows(const BlockedConvGeometry& g, TileArgs& t, const TileFn* fns, const int64_t* windows, const float* w,
              const float* bias, int64_t n, int64_t ob, int64_t oh0, int64_t oh1, AheadFetch& ahead) {
  const int64_t out_plane = g.OH * g.OW * kB;
  int64_t pixels[kWidest];
  t.pixels = pixels;
  t.tap0 = 0;
  t.tap1 = g.KH * g.KW;
  for (int64_t p = oh0 * g.OW, p0 = p, p1 = oh1 * g.OW, px = 0; p < p1; p += px) {
    px = FlatTilePixels(p1 - p);
    t.origin = windows[p - p0];
    for (int64_t i = 0; i < px; ++i) pixels[i] = windows[p - p0 + i] - t.origin;
    const int64_t at = (n * g.Mb() + ob) * out_plane + p * kB;
    t.y = g.y + at;
    t.z = g.z ? g.z + at : nullptr;
    ahead.Step();
    fns[px - 1](t, w, bias);
  }
}

// Output rows [oh0, oh1) of image n, output units [u0, u1), on an input
// whose windows lie inside it along the columns (padded:
// RunBlockedDirectAvx2), in passes over a few input blocks each (as ONNX
// Runtime's NCHWc convs): within a pass, each unit goes along all the rows,
// so the pass's weights for it stay in L1, and the rows' sums wait in y
// between passes. One tile over all the input blocks read a run's input of
// every block (40 KiB at 256 channels, beyond L1) and all the weights from
// L2 for each run of pixels. Each output is still one FMA chain in the same
// order (the passes only store and reload it): the same bits.
void DirectRows(const BlockedConvGeometry& g, const DirectWeights& dw, const TileSet& tiles, const int64_t* offsets,
                int64_t n, int64_t oh0, int64_t oh1, int64_t u0, int64_t u1) {
  const int64_t out_plane = g.OH * g.OW * kB;
  TileArgs t{};
  t.g = &g;
  t.offsets = offsets;
  t.x = g.x + n * g.Cb() * g.H * g.W * kB;
  const int64_t unit_weights = g.Cb() * g.KH * g.KW * kB * kUnit, per_pass = BlocksPerPass(g);
  std::vector<int64_t> windows;  // flat tiles: each pixel's window start, worked out once a task
  if (tiles.flat)
    for (int64_t p = oh0 * g.OW; p < oh1 * g.OW; ++p)
      windows.push_back(((p / g.OW) * g.sh * g.W + (p % g.OW) * g.sw) * kB);
  // Tiles a (pass, unit) runs, over which the next one's weights are prefetched.
  int64_t tiles_per_unit = 0;
  if (tiles.flat) {
    for (int64_t left = (oh1 - oh0) * g.OW; left > 0; ++tiles_per_unit) left -= FlatTilePixels(left);
  } else {
    for (int64_t ow = 0; ow < g.OW; ow += blocked_tile::TilePixels(g.OW - ow, kWidest)) ++tiles_per_unit;
    tiles_per_unit *= oh1 - oh0;
  }
  const int64_t taps_block = g.KH * g.KW * kB * kUnit;  // one input block's weights of a unit
  AheadFetch ahead;
  const bool fetch_ahead = unit_weights * static_cast<int64_t>(sizeof(float)) > kGroupWeights;
  for (int64_t cb0 = 0; cb0 < g.Cb(); cb0 += per_pass) {
    t.cb0 = cb0;
    t.cb1 = std::min(g.Cb(), cb0 + per_pass);
    t.start = cb0 == 0;
    t.finish = t.cb1 == g.Cb();
    for (int64_t u = u0; u < u1; ++u) {
      const bool lone = 2 * u + 1 == g.Mb();  // the last unit of an odd block count
      const TileFn* fns = lone ? tiles.one : tiles.two;
      const TileFn* first_fns = tiles.left_one ? (lone ? tiles.left_one : tiles.left_two) : fns;
      // The next (pass, unit): this pass's next unit, else the next pass's first.
      ahead = AheadFetch{};
      if (fetch_ahead && u + 1 < u1) {
        ahead.Start(dw.w.data() + (u + 1) * unit_weights + cb0 * taps_block, (t.cb1 - cb0) * taps_block,
                    tiles_per_unit);
      } else if (fetch_ahead && t.cb1 < g.Cb()) {
        ahead.Start(dw.w.data() + u0 * unit_weights + t.cb1 * taps_block,
                    (std::min(g.Cb(), t.cb1 + per_pass) - t.cb1) * taps_block, tiles_per_unit);
      }
      if (tiles.flat) {
        FlatRows(g, t, fns, windows.data(), dw.w.data() + u * unit_weights, dw.bias.data() + u * kUnit, n, 2 * u, oh0,
                 oh1, ahead);
        continue;
      }
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        const int64_t ih0 = oh * g.sh - g.pt;
        t.tap0 = std::max<int64_t>(0, -ih0) * g.KW;
        t.tap1 = std::min<int64_t>(g.KH, g.H - ih0) * g.KW;
        for (int64_t ow = 0, px = 0; ow < g.OW; ow += px) {
          px = blocked_tile::TilePixels(g.OW - ow, kWidest);
          const int64_t at = (n * g.Mb() + 2 * u) * out_plane + (oh * g.OW + ow) * kB;
          t.y = g.y + at;
          t.z = g.z ? g.z + at : nullptr;
          t.origin = (ih0 * g.W + ow * g.sw - g.pl) * kB;
          ahead.Step();
          (ow == 0 ? first_fns : fns)[px - 1](t, dw.w.data() + u * unit_weights, dw.bias.data() + u * kUnit);
        }
      }
    }
  }
}

// Whether some output column's window reaches past the left or right edge.
bool HasBorderColumns(const BlockedConvGeometry& g) {
  const int64_t last = g.W - g.KW + g.pl;
  return g.pl > 0 || last < 0 || (g.OW - 1) * g.sw > last;
}

// Whether the only border column is the first, whose pixel the first tiles
// handle by skipping its taps left of the image (DirectTile's LEFT): a left
// pad of at most the stride (every later pixel's window starts inside) and
// no window past the right edge. YOLO's 3x3 stride-2 pad-1 convs on even
// widths: the padded copy was a pass over the whole input (16 x 320 x 320:
// 6.5 MB read and written) before the conv read it again.
bool LeftPadInKernel(const BlockedConvGeometry& g) {
  return g.pl > 0 && g.pl <= g.sw && (g.OW - 1) * g.sw - g.pl + g.KW <= g.W;
}

constexpr int64_t kBandPixels = 96;

// Whether tiles should run across row ends (FlatRows): rows whose own
// tiles average under 4.5 pixels (7: 4 + 3, whose 3 x 2 tile has six
// accumulator chains for the FMAs' eight in flight), where the copy that flat
// tiles read is a small pass beside the conv's work on every output block (64
// and more output channels). At 14 (6 + 4 + 4) the copy cost what the tiles
// gained: ResNet-50's 256-channel conv onto 14x14 ran 3-7% slower flat.
bool FlatTiles(const BlockedConvGeometry& g) {
  int64_t tiles = 0;
  for (int64_t ow = 0; ow < g.OW; ow += blocked_tile::TilePixels(g.OW - ow, kWidest)) ++tiles;
  return g.OH > 1 && g.M >= 64 && 2 * g.OW < 9 * tiles;
}


}  // namespace
#endif  // NEE_DIRECT_AVX2

bool BlockedDirectAvx2Applies(const BlockedConvGeometry& g) {
#ifdef NEE_DIRECT_AVX2
  if (SgemmActiveIsa() != SgemmIsa::kAvx2 || SgemmPortableForced() || g.nchw_input) return false;
  if (g.group != 1 || g.KH * g.KW <= 1 || g.dh != 1 || g.dw != 1) return false;
  if (g.sh != g.sw || (g.sh != 1 && g.sh != 2)) return false;
  if (g.pt < 0 || g.pl < 0 || g.pt >= g.KH || g.pl >= g.KW) return false;
  return g.C % kB == 0 && g.M % kB == 0 && blocked_tile::InRegisters(g.act.kind);
#else
  (void)g;
  return false;
#endif
}

void RunBlockedDirectAvx2(KernelContext& ctx, const BlockedConvGeometry& given, bool drop_weights) {
#ifdef NEE_DIRECT_AVX2
  BlockedConvGeometry g = given;
  // Any border column: the padded copy. A one-pixel tile's two accumulator
  // chains wait on the FMA latency (ResNet-50's 256-channel 28x28 -> 14x14
  // conv spent 14% of its time in its one border column per row), where the
  // copy is a pass over the input.
  const bool flat = FlatTiles(given);
  const bool left_pad = !flat && LeftPadInKernel(given);
  if (flat || (!left_pad && HasBorderColumns(given))) BlockedDirectPadInput(ctx, given, &g);
  const std::shared_ptr<const DirectWeights> packed = PackedFor(ctx, g, drop_weights);
  const TileSet tiles = TilesFor(g.sw, left_pad, flat);
  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t tap = 0; tap < g.KH * g.KW; ++tap) offsets[tap] = ((tap / g.KW) * g.W + tap % g.KW) * kB;
  const int threads = NumThreads(ctx);
  // Bands of output rows of at least kBandPixels pixels: a pass's weights,
  // fetched from L2 into L1, serve the whole band, not one row. ResNet-50's
  // 512-channel conv onto 7x7 (thread CPU time, 30 runs): one row 5.54 ms,
  // 4 rows 5.40, the whole image 5.11-5.20; the 256-channel one onto 14x14
  // 4.81 -> 4.50 ms (with the 1x1 convs around them).
  const int64_t band = std::min(g.OH, std::max<int64_t>(1, (kBandPixels + g.OW - 1) / g.OW));
  const int64_t bands_per_image = (g.OH + band - 1) / band, bands = g.N * bands_per_image;
  const int64_t units = (g.Mb() + 1) / 2;
  // Groups of output units whose weights L2 keeps (taken down every band
  // before the next group where that reads less, below); with few bands
  // (small images), more groups, so that each thread has work and streams
  // only its groups' weights.
  const int64_t unit_bytes = g.Cb() * g.KH * g.KW * kB * kUnit * static_cast<int64_t>(sizeof(float));
  int64_t groups = std::min(units, (units * unit_bytes + kGroupWeights - 1) / kGroupWeights);
  const int64_t wanted = 4 * threads;
  if (threads > 1 && bands * groups < wanted) groups = std::min(units, std::max(groups, (wanted + bands - 1) / bands));
  // Equal groups (a divisor of the units), so that the threads' shares of
  // tasks are equal work: ResNet-50's 128-channel conv had groups of 2, 3
  // and 3 units.
  groups = std::max<int64_t>(1, groups);
  while (units % groups != 0) ++groups;
  // Tasks go group by group down every band (each group's weights read once)
  // or band by band through every group (the input read once), whichever
  // reads fewer bytes from beyond L2: the input once per group, or the weights
  // once per band. YOLO's stride-2 convs at batch 8 have small weights and 6.5
  // MB inputs, which group by group came from L3 or memory eight times: 1
  // thread, node minimums, 128 -> 256 channels onto 20x20 24.6 -> 21.8 ms, 64
  // -> 128 onto 40x40 23.4 -> 22.2 (the same bits: only the order changes).
  const double weight_bytes = static_cast<double>(units * unit_bytes),
               input_bytes = static_cast<double>(g.N * g.Cb() * g.H * g.W * kB * sizeof(float));
  const bool band_major = bands * weight_bytes < groups * input_bytes;
  ParallelTasks(ctx, bands * groups, [&](int64_t task) {
    const int64_t group = band_major ? task % groups : task / bands, b = band_major ? task / groups : task % bands;
    const int64_t n = b / bands_per_image;
    const int64_t oh0 = b % bands_per_image * band, oh1 = std::min(g.OH, oh0 + band);
    const int64_t u0 = group * units / groups, u1 = (group + 1) * units / groups;
    if (u0 < u1) DirectRows(g, *packed, tiles, offsets.data(), n, oh0, oh1, u0, u1);
  });
#else
  (void)ctx, (void)given;
#endif
}

}  // namespace nee::cpu
