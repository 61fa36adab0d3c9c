// ConvPointwiseAvx512: a 1x1 conv in NCHW as tiles of 8 output channels x 48
// pixels, the pixels sixteen to a zmm (24 accumulators of the 32 registers).
//
// Why: the SGEMM path packs its B operand (the input) for every call and
// passes over each finished tile once more for the bias and the activation;
// conv_pointwise_small.cc's AVX2 tiles fill only half a zmm. Here the input
// is the vector operand, the weights, packed once per session as blocks of
// eight output channels ([block][c][8]), are the broadcast operand (one
// block, 8 x C floats, stays in L1 while the tiles of a span go by), and the
// 24 sums of a tile get their bias, residual and activation in registers
// and are stored once, straight into NCHW. Eight rows waste little on YOLO's
// channel counts (255 = 31 x 8 + 7; SGEMM's 12-row panels run 32 as
// 12 + 12 + 8).
//
// The input is read where it lies, the next tile's lines prefetched into L1
// as each input channel goes by. (The AVX2 kernel copies spans of it into
// contiguous tiles, because channel rows a multiple of 4 KiB apart, as in
// 160x160 images, evict one another from L1; here a tile reads each of its
// input lines once, so that costs nothing, and with the prefetch the copy
// measured 4-25% slower: 32 -> 16 at 160x160 25%, 128 -> 32 at 80x80 15%,
// 256 -> 64 at 40x40 8%; the same for the 255-channel heads.) The pixels go
// in spans whose input stays in L2, the channel blocks outermost within a
// span, so that every output row is written in runs of the span's pixels.
//
// Other tile shapes measured slower: 4 channels x 96 pixels (reading the
// input in place) 5-15% on the 255-channel head and 128 -> 128 at 40x40, as
// fast on the shallow 160x160 layers; 6 x 64 about 5%.
//
// Each output element sums its C products in channel order (one FMA chain
// from zero), then adds the bias, then the residual, then applies the
// activation (the operations of BiasResidualActivate): the same whatever the
// tiling or the thread count (a partial last vector is computed as a full
// one and stored through a mask).
#include "ep/cpu/conv_pointwise_avx512.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_POINTWISE512_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;

constexpr int kRows = 8;  // output channels per tile
constexpr int kVecs = 3;  // vectors of sixteen pixels per tile
constexpr int64_t kTilePixels = 16 * kVecs;
// The pixels of a span, which every channel block reads in turn: at most
// kSpanBytes of input (so that it stays in L2) and kMaxSpanTiles tiles
// (halving or doubling either measured no better).
constexpr int64_t kSpanBytes = 192 * 1024;
constexpr int64_t kMaxSpanTiles = 21;

// What one tile reads and writes: rows [m0, m0 + rows) of the output, pixels
// from the tile's first on.
struct TileArgs {
  const float* x;     // the input at (channel 0, first pixel); channels a plane apart
  int64_t plane;      // pixels per channel of x, y and z
  int64_t C;
  const float* w;     // the block's packed weights, [C][kRows]
  const float* bias;  // bias + m0, or null
  const float* z;     // the residual at (m0, first pixel), or null
  float* y;           // the output at (m0, first pixel)
  int rows;           // 1..kRows
  int count;          // pixels in the tile, 1..kTilePixels
  const FusedActivation* act;
};

#ifdef NEE_POINTWISE512_X86

#define NEE_PW512_TARGET __attribute__((target("avx512f,avx512dq,avx2,fma")))

// The lanes in use of vector v of a tile of `count` pixels.
NEE_PW512_TARGET inline __mmask16 LaneMask(int64_t count, int v) {
  const int64_t lanes = std::clamp<int64_t>(count - 16 * v, 0, 16);
  return static_cast<__mmask16>((1u << lanes) - 1u);
}

// Vector v of output row r: (sum + bias) + residual, then activation A,
// stored (through the lane mask on a tail tile).
template <Kind A, bool kTail>
NEE_PW512_TARGET __attribute__((always_inline)) inline void Finish(const TileArgs& t, int r, int v, __m512 sum) {
  float* y = t.y + r * t.plane + 16 * v;
  const __mmask16 mask = kTail ? LaneMask(t.count, v) : static_cast<__mmask16>(0xffff);
  __m512 s = _mm512_add_ps(sum, _mm512_set1_ps(t.bias ? t.bias[r] : 0.f));
  if (t.z) {
    const float* z = t.z + r * t.plane + 16 * v;
    s = _mm512_add_ps(s, kTail ? _mm512_maskz_loadu_ps(mask, z) : _mm512_loadu_ps(z));
  }
  s = Activate16<A>(*t.act, s);
  if (kTail) _mm512_mask_storeu_ps(y, mask, s);
  else _mm512_storeu_ps(y, s);
}

// R x V vectors of sums (R: kRows, or half that for a block of at most
// kRows / 2 channels); with kTail the last vector's lanes past `count`
// pixels are neither loaded nor stored. The next tile's input lines are
// prefetched along (a hint: past the tensor's end it reads nothing).
template <int R, int V, bool kTail, Kind A>
NEE_PW512_TARGET void Tile(const TileArgs& t) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const float* x = t.x;
  const float* w = t.w;
  const __mmask16 last = kTail ? LaneMask(t.count, V - 1) : static_cast<__mmask16>(0xffff);
  for (int64_t c = 0; c < t.C; ++c, x += t.plane, w += kRows) {
    __m512 xv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v)
      xv[v] = kTail && v == V - 1 ? _mm512_maskz_loadu_ps(last, x + 16 * v) : _mm512_loadu_ps(x + 16 * v);
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) _mm_prefetch(reinterpret_cast<const char*>(x + kTilePixels + 16 * v), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(w[r]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(b, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    if (r >= t.rows) break;
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) Finish<A, kTail>(t, r, v, acc[r][v]);
  }
}

// Tanh: the shared finisher (sixteen lanes as well since Tanh16).
void TanhTile(const TileArgs& t) { BiasResidualActivate(*t.act, nullptr, nullptr, 0, t.y, t.plane, t.rows, t.count); }

using TileFn = void (*)(const TileArgs&);

// A full tile and tails of one, two and three vectors, of kRows channels
// ([1]) and of kRows / 2 ([0]: a block of few channels, e.g. all of a conv
// with at most four outputs, computed in half the FMAs), and what follows a
// stored tile (Tanh, or null: nothing).
struct TileSet {
  TileFn full[2];
  TileFn tail[2][kVecs];
  TileFn after;
};

template <Kind A, int... V>
TileSet MakeTileSet(TileFn after, std::integer_sequence<int, V...>) {
  constexpr int kHalf = kRows / 2;
  return {{Tile<kHalf, kVecs, false, A>, Tile<kRows, kVecs, false, A>},
          {{Tile<kHalf, V + 1, true, A>...}, {Tile<kRows, V + 1, true, A>...}},
          after};
}

template <Kind A>
TileSet MakeTileSet(TileFn after) {
  return MakeTileSet<A>(after, std::make_integer_sequence<int, kVecs>{});
}

// Every activation in registers as the sums are stored, Sigmoid and SiLU
// included (unlike the AVX2 kernel's, whose twelve sums spilled): applied
// over the stored tile instead, SiLU convs ran 2-9% slower (32 -> 32 at
// 160x160 9%, 64 -> 64 at 80x80 5%, 1 thread). Tanh over each stored
// tile's rows, still in L1 (written before Tanh16 existed; Tanh in registers
// is untried).
TileSet TileSetFor(Kind kind) {
  if (kind == Kind::kTanh) return MakeTileSet<Kind::kNone>(TanhTile);
  return ForActivation16(
      kind, [](auto k) { return MakeTileSet<decltype(k)::value>(nullptr); }, MakeTileSet<Kind::kNone>(nullptr));
}

// Pixels per span for C input channels: whole tiles, the span's input
// within kSpanBytes (one tile at least).
int64_t SpanPixels(int64_t C) {
  const int64_t tiles = std::clamp<int64_t>(kSpanBytes / (C * kTilePixels * 4), 1, kMaxSpanTiles);
  return tiles * kTilePixels;
}

// Pixels [p0, p1) of image n, output channel blocks [b0, b1): in spans, each
// computed channel block by channel block.
void RunRange(const Pointwise& g, const PointwiseRowBlocks& packed, const TileSet& tiles, const TileArgs& base,
              int64_t n, int64_t p0, int64_t p1, int64_t b0, int64_t b1) {
  const int64_t span = SpanPixels(g.C);
  const int64_t image_out = n * g.M * g.pixels;
  const float* x_n = base.x + n * g.C * g.pixels;
  for (int64_t s0 = p0; s0 < p1; s0 += span) {
    const int64_t s1 = std::min(p1, s0 + span);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t m0 = b * kRows;
      TileArgs t = base;
      t.w = packed.w.data() + b * g.C * kRows;
      t.rows = static_cast<int>(std::min<int64_t>(kRows, g.M - m0));
      const int whole = t.rows > kRows / 2 ? 1 : 0;
      t.bias = base.bias ? base.bias + m0 : nullptr;
      for (int64_t j = s0; j < s1; j += kTilePixels) {
        t.count = static_cast<int>(std::min(kTilePixels, s1 - j));
        t.x = x_n + j;
        t.z = base.z ? base.z + image_out + m0 * g.pixels + j : nullptr;
        t.y = base.y + image_out + m0 * g.pixels + j;
        (t.count == kTilePixels ? tiles.full[whole] : tiles.tail[whole][(t.count + 15) / 16 - 1])(t);
        if (tiles.after) tiles.after(t);
      }
    }
  }
}

#endif  // NEE_POINTWISE512_X86

}  // namespace

bool ConvPointwiseAvx512Applies(const Pointwise& g) {
#ifdef NEE_POINTWISE512_X86
  if (SgemmActiveIsa() != SgemmIsa::kAvx512 || SgemmPortableForced()) return false;
  // Every geometry: against the paths it replaces (SGEMM, the pixel-major
  // kernel for deep inputs on small images), one conv at a time, 1 thread,
  // Zen 4, no activation, it measured faster on every shape tried, from 1 to
  // 2048 input channels and from 81 pixels to 160x160: YOLO's 32 -> 16 and
  // 32 -> 32 at 160x160 1.4-1.6x, 128 -> 32 and 64 -> 64 at 80x80 1.3-1.6x,
  // 256 -> 64 and 128 -> 128 at 40x40 1.2-1.4x, the 64 -> 255 head at 80x80
  // 1.13x, 512 -> 256 at 20x20 1.1x; ResNet-50's at 56x56 to 7x7 1.1-1.3x;
  // MobileNetV2's 1.1-1.5x, except two at 7x7 and 14x14 (960 -> 160,
  // 384 -> 64) within the noise (a 49-pixel image fills 49 of a tile's 64
  // lanes); convs with few outputs 1.3-3.8x (256 -> 1 at 80x80, 16 -> 5 at
  // 160x160, 64 -> 4 at 40x40), except 128 -> 2 at 40x40, 10% slower (24 us:
  // a half-height tile still computes four channels). Fewer pixels than a
  // vector holds go to the pixel-major kernel (conv_pixel_gemm.h), which has
  // the channels in its vectors: a 512 -> 1280 conv on one pixel 211 -> 44 us.
  return g.N > 0 && g.C > 0 && g.M > 0 && g.pixels >= 16;
#else
  (void)g;
  return false;
#endif
}

Status ConvPointwiseAvx512(KernelContext& ctx, const Pointwise& g, const float* x, const float* w, const float* bias,
                           const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_POINTWISE512_X86
  const std::shared_ptr<const PointwiseRowBlocks> packed = PointwiseRowBlocksFor(ctx, w, g.M, g.C, kRows);
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const TileSet tiles = TileSetFor(act.kind);
  const TileArgs base{x, g.pixels, g.C, nullptr, bias, z, y, 0, 0, &act};
  // Tasks: each image's pixels in chunks of whole tiles, none longer than
  // 4096 pixels, at least four per thread so that threads claiming them end
  // together; where the pixels give too few tiles for that (small images),
  // the output channel blocks are cut into groups as well. Neither cut
  // changes what an output's sums are.
  const int threads = NumThreads(ctx);
  const int64_t tiles_per_image = (g.pixels + kTilePixels - 1) / kTilePixels;
  const int64_t wanted = threads > 1 ? 4 * threads : 1;
  int64_t chunks = (g.pixels + 4095) / 4096;
  chunks = std::clamp<int64_t>(std::max(chunks, (wanted + g.N - 1) / g.N), 1, tiles_per_image);
  const int64_t groups = std::clamp<int64_t>((wanted + g.N * chunks - 1) / (g.N * chunks), 1, packed->blocks);
  ParallelTasks(ctx, g.N * chunks * groups, [&](int64_t task) {
    const int64_t n = task / (chunks * groups), c = task / groups % chunks, k = task % groups;
    RunRange(g, *packed, tiles, base, n, TileAlignedStart(c, chunks, g.pixels, kTilePixels),
             TileAlignedStart(c + 1, chunks, g.pixels, kTilePixels), k * packed->blocks / groups,
             (k + 1) * packed->blocks / groups);
  });
  return Status::Ok();
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
  return NotImplemented("ConvPointwiseAvx512 needs AVX-512");
#endif
}

}  // namespace nee::cpu
