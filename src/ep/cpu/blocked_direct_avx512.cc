#include "ep/cpu/blocked_direct_avx512.h"

#include <algorithm>
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "ep/cpu/packed_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_DIRECT_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;  // 8: a block; a pair of blocks is one zmm
constexpr int64_t kLanes = 2 * kB;


// [pairs][Cb][KH][KW][8][16]: for a pair, input block, tap and lane, the
// sixteen output channels' weights; bias16 [pairs * 16]; channels past M 0.
struct DirectWeights {
  std::vector<float> w16, bias16;
};

std::shared_ptr<const DirectWeights> Pack(const BlockedConvGeometry& g) {
  auto p = std::make_shared<DirectWeights>();
  const int64_t pairs = (g.Mb() + 1) / 2, taps = g.KH * g.KW;
  p->w16.assign(static_cast<size_t>(pairs * g.C * taps * kLanes), 0.f);
  p->bias16.assign(static_cast<size_t>(pairs * kLanes), 0.f);
  for (int64_t m = 0; m < g.M; ++m) {
    const int64_t pair = m / kLanes, lane = m % kLanes;
    if (g.bias) p->bias16[static_cast<size_t>(m)] = g.bias[m];
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t at = (((pair * g.Cb() + c / kB) * taps + t) * kB + c % kB) * kLanes + lane;
        p->w16[static_cast<size_t>(at)] = g.w[(m * g.C + c) * taps + t];
      }
  }
  return p;
}

std::shared_ptr<const DirectWeights> PackedFor(KernelContext& ctx, const BlockedConvGeometry& g) {
  return PackedOnce<DirectWeights>(ctx, {g.M, g.C, g.KH, g.KW}, {1, 2}, [&] { return Pack(g); });
}

#ifdef NEE_DIRECT_X86

// What a tile reads and writes besides its weights.
struct TileArgs {
  const BlockedConvGeometry* g;
  const float* x;     // image n's input, block 0
  float* y;           // the tile's first pixel in its first output block
  const float* z;     // the residual there, or null
  int64_t ih0, iw0;   // input row and column of tap (0, 0) for the tile's first pixel
  int64_t kh0, kh1;   // tap rows inside the image
  int64_t kw0, kw1;   // tap columns inside the image for every pixel of the tile
  bool odd_tail;      // the last pair has one block
  bool prefetch;      // fetch the next tile's input rows into L1 (PrefetchesInput)
};



// PX pixels of one output row x OP pairs of output blocks, stride S (a
// constant, so that the pixels' broadcasts are offsets from one register:
// with a run-time stride GCC kept a pointer per pixel, spilled to the stack).
template <int PX, int OP, int S>
__attribute__((target("avx512f,avx512dq"))) void DirectTile(const TileArgs& t, const float* w, const float* bias) {
  const BlockedConvGeometry& g = *t.g;
  const int64_t taps = g.KH * g.KW, pair_stride = g.Cb() * taps * kB * kLanes;
  const int64_t in_plane = g.H * g.W * kB;
  constexpr int64_t step = S * kB;
  __m512 acc[PX][OP];
#pragma GCC unroll 2
  for (int j = 0; j < OP; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + kLanes * j);
#pragma GCC unroll 16
    for (int i = 0; i < PX; ++i) acc[i][j] = b;
  }
  for (int64_t cb = 0; cb < g.Cb(); ++cb) {
    const float* xb = t.x + cb * in_plane;
    const float* wb = w + cb * taps * kB * kLanes;
    for (int64_t kh = t.kh0; kh < t.kh1; ++kh) {
      const float* row = xb + ((t.ih0 + kh) * g.W + t.iw0) * kB;
      if (t.prefetch) {  // the next tile's new pixels of this row: a tile's work ahead
        const char* ahead = reinterpret_cast<const char*>(row + PX * S * kB);
        for (int64_t at = 0; at < PX * S * kB * int64_t{sizeof(float)}; at += 64) _mm_prefetch(ahead + at, _MM_HINT_T0);
      }
      for (int64_t kw = t.kw0; kw < t.kw1; ++kw) {
        const float* xp = row + kw * kB;
        // Opaque to the optimizer: otherwise GCC sees that tap kw + S reads
        // pixel i + 1's values and keeps them across taps, spilling them.
        __asm__("" : "+r"(xp));
        const float* wk = wb + (kh * g.KW + kw) * kB * kLanes;
#pragma GCC unroll 8
        for (int l = 0; l < kB; ++l) {
          __m512 wv[OP];
#pragma GCC unroll 2
          for (int j = 0; j < OP; ++j) wv[j] = _mm512_loadu_ps(wk + j * pair_stride + l * kLanes);
#pragma GCC unroll 16
          for (int i = 0; i < PX; ++i) {
            const __m512 xv = _mm512_set1_ps(xp[i * step + l]);
#pragma GCC unroll 2
            for (int j = 0; j < OP; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
          }
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
  return std::array<TileFn, sizeof...(PX)>{DirectTile<PX + 1, OP, S>...};
}

constexpr int64_t kWidest = 12;

// Tiles by pixels - 1 (up to 12), one or two pairs wide.
template <int S>
struct DirectTiles {
  static constexpr auto one = TableOf<1, S>(std::make_integer_sequence<int, kWidest>{});
  static constexpr auto two = TableOf<2, S>(std::make_integer_sequence<int, kWidest>{});
};

struct TileSet {
  const TileFn* one;
  const TileFn* two;
};

template <int S>
constexpr TileSet kTiles{DirectTiles<S>::one.data(), DirectTiles<S>::two.data()};

TileSet TilesFor(int64_t stride) { return stride == 1 ? kTiles<1> : kTiles<2>; }


// Whether the tiles prefetch their next input: for inputs beyond 4 MiB.
// YOLO's 16 -> 32 3x3 stride-2 conv on 320x320 (6.5 MB of input, two input
// blocks, so a tile's work per input line is short) waited on its input
// lines: 2.83 -> 2.53 ms with the prefetch; the same conv shape on 3.3 MB and
// smaller inputs (32 -> 64 on 160x160, ResNet's) gained nothing.
bool PrefetchesInput(const BlockedConvGeometry& g) {
  return g.N * g.Cb() * g.H * g.W * kB * static_cast<int64_t>(sizeof(float)) > (int64_t{4} << 20);
}

// Output row oh of image n, output blocks [ob0, ob1) (ob0 even).
void DirectRow(const BlockedConvGeometry& g, const DirectWeights& dw, const TileSet& tiles, int64_t n, int64_t oh,
               int64_t ob0, int64_t ob1) {
  const int64_t out_plane = g.OH * g.OW * kB;
  TileArgs t{};
  t.g = &g;
  t.prefetch = PrefetchesInput(g);
  t.x = g.x + n * g.Cb() * g.H * g.W * kB;
  const int64_t ih0 = oh * g.sh - g.pt;
  t.ih0 = ih0;
  t.kh0 = std::max<int64_t>(0, -ih0);
  t.kh1 = std::min<int64_t>(g.KH, g.H - ih0);
  // Columns whose whole window lies inside the image: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(g.OW, (g.pl + g.sw - 1) / g.sw);
  const int64_t last = g.W - g.KW + g.pl;  // the last window start inside, times the stride
  const int64_t ow_hi = last < 0 ? ow_lo : std::max(ow_lo, std::min(g.OW, last / g.sw + 1));
  const int64_t pair_end = (ob1 + 1) / 2;
  // One run of pixels through every pair of output blocks before the next:
  // the run's input (every input block of its window rows) stays in L1 while
  // the weights stream from L2. Pairs outermost reread a whole input row
  // from L2 for each pair, and with planes a multiple of 2 KiB apart (56x56)
  // the blocks' rows share L1 sets: ResNet's 1x1 stride-2 convs ran at 37
  // GFLOP/s so.
  auto run = [&](int64_t ow, int64_t px, int64_t kw0, int64_t kw1) {
    for (int64_t pair = ob0 / 2, step = 0; pair < pair_end; pair += step) {
      step = std::min<int64_t>(2, pair_end - pair);
      t.odd_tail = pair + step == pair_end && ob1 % 2 == 1;
      const int64_t at = (n * g.Mb() + 2 * pair) * out_plane + (oh * g.OW + ow) * kB;
      t.y = g.y + at;
      t.z = g.z ? g.z + at : nullptr;
      t.iw0 = ow * g.sw - g.pl;
      t.kw0 = kw0;
      t.kw1 = kw1;
      const float* w = dw.w16.data() + pair * g.Cb() * g.KH * g.KW * kB * kLanes;
      (step == 1 ? tiles.one : tiles.two)[px - 1](t, w, dw.bias16.data() + pair * kLanes);
    }
  };
  // Border pixels one at a time over the tap columns inside the image.
  auto border = [&](int64_t ow) {
    const int64_t iw = ow * g.sw - g.pl;
    run(ow, 1, std::max<int64_t>(0, -iw), std::min<int64_t>(g.KW, g.W - iw));
  };
  for (int64_t ow = 0; ow < ow_lo; ++ow) border(ow);
  for (int64_t ow = ow_lo, px = 0; ow < ow_hi; ow += px) {
    px = blocked_tile::TilePixels(ow_hi - ow, kWidest);
    run(ow, px, 0, g.KW);
  }
  for (int64_t ow = ow_hi; ow < g.OW; ++ow) border(ow);
}

#endif  // NEE_DIRECT_X86

}  // namespace

bool BlockedDirectAvailable() {
#ifdef NEE_DIRECT_X86
  return SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced();
#else
  return false;
#endif
}

bool BlockedDirectApplies(const BlockedConvGeometry& g) {
  if (!BlockedDirectAvailable() || g.group != 1 || g.pointwise() || g.dh != 1 || g.dw != 1) return false;
  if (g.sh != g.sw || (g.sh != 1 && g.sh != 2) || g.KH < 1 || g.KW < 1) return false;
  if (g.pt < 0 || g.pl < 0 || g.pt >= g.KH || g.pl >= g.KW) return false;
  return g.C % kB == 0 && g.M % kB == 0 && blocked_tile::InRegisters(g.act.kind);
}

#ifdef NEE_DIRECT_X86
namespace {

// The packed weights of one pair of output blocks, and how much of them a
// core's L2 (1 MiB on Zen 4) keeps beside the rows a task reads.
int64_t PairWeightBytes(const BlockedConvGeometry& g) {
  return g.Cb() * g.KH * g.KW * kB * kLanes * static_cast<int64_t>(sizeof(float));
}
constexpr int64_t kWeightsInL2 = 768 * 1024;

}  // namespace
#endif

// Whether the border columns (one pixel at a time) would be more than an
// eighth of each row: small images (ResNet's 14x14 -> 7x7 stride-2 conv ran
// 10% slower than im2col so).
bool BlockedDirectBorderHeavy(const BlockedConvGeometry& g) {
  const int64_t left = std::min(g.OW, (g.pl + g.sw - 1) / g.sw);
  const int64_t last = g.W - g.KW + g.pl;
  const int64_t right = last < 0 ? g.OW - left : g.OW - std::max(left, std::min(g.OW, last / g.sw + 1));
  return 8 * (left + right) > g.OW;
}

// The input with its padding written out as zeros, (OH - 1) * s + KH rows of
// (OW - 1) * s + KW columns, so that every window lies inside: a pass over
// the input instead of one-pixel tiles along the border. A padded tap then
// adds 0 * w where the border path skips it: the same sums (up to a zero's sign).
// The copy lives in the calling thread's grow-only scratch (the pool's
// workers read it while the caller waits), so runs allocate nothing: a
// vector per call was mapped and page-faulted afresh on every run.
void BlockedDirectPadInput(KernelContext& ctx, const BlockedConvGeometry& g, BlockedConvGeometry* padded) {
  *padded = g;
  padded->H = (g.OH - 1) * g.sh + g.KH;
  padded->W = (g.OW - 1) * g.sw + g.KW;
  padded->pt = padded->pl = 0;
  const int64_t rows = padded->H, cols = padded->W;
  thread_local SgemmScratch scratch;
  float* out = scratch.Get(g.N * g.Cb() * rows * cols * kB);
  ctx.ParallelFor(g.N * g.Cb(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* src = g.x + plane * g.H * g.W * kB;
      float* dst = out + plane * rows * cols * kB;
      for (int64_t r = 0; r < rows; ++r) {
        float* d = dst + r * cols * kB;
        const int64_t ih = r - g.pt;
        const int64_t c0 = std::clamp<int64_t>(g.pl, 0, cols), c1 = std::clamp<int64_t>(g.pl + g.W, c0, cols);
        if (ih < 0 || ih >= g.H) {
          std::fill(d, d + cols * kB, 0.f);
          continue;
        }
        std::fill(d, d + c0 * kB, 0.f);
        std::copy(src + (ih * g.W + c0 - g.pl) * kB, src + (ih * g.W + c1 - g.pl) * kB, d + c0 * kB);
        std::fill(d + c1 * kB, d + cols * kB, 0.f);
      }
    }
  });
  padded->x = out;
}

void RunBlockedDirect(KernelContext& ctx, const BlockedConvGeometry& given) {
#ifdef NEE_DIRECT_X86
  BlockedConvGeometry g = given;
  if (BlockedDirectBorderHeavy(given)) BlockedDirectPadInput(ctx, given, &g);
  const std::shared_ptr<const DirectWeights> packed = PackedFor(ctx, g);
  const TileSet tiles = TilesFor(g.sw);
  const int threads = NumThreads(ctx);
  const int64_t rows = g.N * g.OH, pairs = (g.Mb() + 1) / 2;
  // Output rows are the tasks; with few rows, the pairs of output blocks are
  // shared out too (two a group, so that tiles stay two pairs wide).
  const int64_t wanted = 4 * threads;
  int64_t groups = rows < wanted ? std::min((pairs + 1) / 2, (wanted + rows - 1) / rows) : 1;
  // Weights beyond L2: a task is one row of two pairs, and consecutive tasks
  // go down the rows with the same pairs, whose weights stay in L2. Rows of
  // every pair read all the weights from L3 or memory once a row (ResNet-50's
  // 256-channel 3x3 stride-2 conv: 2.4 MB of weights, 14 rows), and at two
  // threads each thread read all of them.
  const bool by_channels = pairs * PairWeightBytes(g) > kWeightsInL2;
  if (by_channels) groups = (pairs + 1) / 2;
  ParallelTasks(ctx, rows * groups, [&](int64_t task) {
    const int64_t row = by_channels ? task % rows : task / groups, group = by_channels ? task / rows : task % groups;
    const int64_t half_pairs = (pairs + 1) / 2;  // units of two pairs
    const int64_t u0 = group * half_pairs / groups, u1 = (group + 1) * half_pairs / groups;
    const int64_t ob0 = 4 * u0, ob1 = std::min(g.Mb(), 4 * u1);
    if (ob0 < ob1) DirectRow(g, *packed, tiles, row / g.OH, row % g.OH, ob0, ob1);
  });
#else
  (void)ctx, (void)given;
#endif
}

}  // namespace nee::cpu
