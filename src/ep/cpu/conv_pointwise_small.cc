// ConvPointwiseSmall: a 1x1 conv as tiles of 4 output channels x 24 pixels,
// the pixels in vectors.
//
// Why: with few input channels (up to 64; up to 256, or 512 with at least a
// quarter as many outputs, measured below) and many pixels, the SGEMM path
// packs its B operand (the input, each float then used by only M/8 vector
// FMAs) and passes over every finished tile of the output once more for the
// bias and the activation. Here the input is the vector operand; the weights,
// packed once, are the broadcast operand and stay in L1; the twelve sums of a
// tile get their bias, residual and activation in registers and are stored
// once, straight into NCHW (Sigmoid, SiLU and Tanh: activated right after,
// while in L1), and four output channels per tile waste no rows (SGEMM's
// six-row tiles run 16 channels as 6 + 6 + 4, 255 as 42 x 6 + 3).
//
// The input is still copied, a span of pixels at a time (1008, fewer for
// deep inputs so that the copy stays in L2), into tiles of C x 24 contiguous
// floats: read in place, a tile's C rows lie a plane apart, for 160x160
// images a multiple of 4 KiB, so they all fall into the same L1 sets and
// evict one another between the channel blocks that reread them. The first
// block of output channels makes the copy as it goes: its tiles read the
// input in place (prefetching the lines two tiles on, since the C rows are
// more streams than the hardware follows) and store what they read, which
// saved the separate copying pass (1x1 64 -> 32 at 80x80 10% faster, 64 ->
// 64 8%, 32 -> 32 at 160x160 3%, 64 -> 255 even). Within a span the channel
// blocks go outermost, so that every output row is written in runs of the
// span's pixels.
//
// Each output element sums its C products in channel order, then adds the
// bias, then the residual, then applies the activation (the operations of
// BiasResidualActivate): the same whatever the tiling or the thread count (a
// partial last vector is stored through a mask and computed as a full one).
#include "ep/cpu/conv_pointwise_small.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/activation_simd.h"
#define NEE_POINTWISE_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;

constexpr int kRows = 4;                // output channels per tile
constexpr int kVecs = 3;                // vectors of eight pixels per tile
constexpr int64_t kTilePixels = 8 * kVecs;
constexpr int64_t kSpanPixels = 42 * kTilePixels;

// Pixels per span for C input channels: the span's packed input (C x span
// floats) stays in L2 while every block of output channels passes over it.
int64_t SpanPixelsFor(int64_t C) {
  const int64_t tiles = std::clamp<int64_t>(64 * 1024 / (C * kTilePixels), 4, kSpanPixels / kTilePixels);
  return tiles * kTilePixels;
}

// What one tile reads and writes: rows [m0, m0 + rows) of the output, pixels
// from the tile's first on.
struct TileArgs {
  const float* x;     // the tile's input, packed: C rows of kTilePixels floats
  const float* src;   // packing tiles: the tile's input where it lies (channel 0, first pixel)
  int64_t src_plane;  // packing tiles: floats between its channel rows
  int64_t plane;      // pixels per channel of y and z
  int64_t C;
  const float* w;     // the block's packed weights, [C][kRows]
  const float* bias;  // bias + m0, or null
  const float* z;     // the residual at (m0, first pixel), or null
  float* y;           // the output at (m0, first pixel)
  int rows;           // 1..kRows
  int last;           // lanes of the last vector in use (1..8)
  const FusedActivation* act;
};

#ifdef NEE_POINTWISE_X86

__attribute__((target("avx2"))) inline __m256i LaneMask(int lanes) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Vector v of output row r: (sum + bias) + residual, the activation, stored
// (through `mask` when masked).
template <Kind A>
__attribute__((target("avx2,fma"), always_inline)) inline void Finish(const TileArgs& t, int r, int v, bool masked,
                                                                      __m256i mask, __m256 sum) {
  float* y = t.y + r * t.plane + 8 * v;
  __m256 s = _mm256_add_ps(sum, _mm256_set1_ps(t.bias ? t.bias[r] : 0.f));
  if (t.z) {
    const float* z = t.z + r * t.plane + 8 * v;
    s = _mm256_add_ps(s, masked ? _mm256_maskload_ps(z, mask) : _mm256_loadu_ps(z));
  }
  s = Activate8<A>(*t.act, s);
  if (masked) _mm256_maskstore_ps(y, mask, s);
  else _mm256_storeu_ps(y, s);
}

// kRows x V vectors of sums; with kTail the last vector is stored through a
// mask of `last` lanes. With kPack (whole tiles only) the input is read where
// it lies, channel rows `src_plane` floats apart from `src`, and each vector
// read is also stored into the packed tile t.x for the blocks after this one.
template <int V, bool kTail, Kind A, bool kPack = false>
__attribute__((target("avx2,fma"), always_inline)) inline void Tile(const TileArgs& t) {
  static_assert(!kPack || (V == kVecs && !kTail), "packing runs on whole tiles");
  const __m256i mask = LaneMask(kTail ? t.last : 8);  // (the input tile is whole: zeros past the end)
  __m256 acc[kRows][V];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  float* x = const_cast<float*>(t.x);
  const float* src = t.src;
  const float* w = t.w;
  for (int64_t c = 0; c < t.C; ++c, x += kTilePixels, w += kRows) {
    __m256 xv[V];
    if constexpr (kPack) {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) {
        xv[v] = _mm256_loadu_ps(src + 8 * v);
        _mm256_store_ps(x + 8 * v, xv[v]);
      }
      // The rows are separate streams, too many for the hardware to follow:
      // fetch the lines the tile after next reads (each tile moves 96 bytes on).
      _mm_prefetch(reinterpret_cast<const char*>(src + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(src + 80), _MM_HINT_T0);
      src += t.src_plane;
    } else {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) xv[v] = _mm256_load_ps(x + 8 * v);
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m256 b = _mm256_broadcast_ss(w + r);
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(b, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    if (r >= t.rows) break;
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) Finish<A>(t, r, v, kTail && v == V - 1, mask, acc[r][v]);
  }
}

using TileFn = void (*)(const TileArgs&);
// `count` whole tiles one after the other along the pixels, from t's on.
using TilesFn = void (*)(const TileArgs&, int64_t count);

// One tile (a tail) through a function pointer.
template <int V, bool kTail, Kind A>
__attribute__((target("avx2,fma"))) void OneTile(const TileArgs& t) {
  Tile<V, kTail, A>(t);
}

// Whole tiles in one call: with 16-32 input channels a tile is only 100-200
// cycles of FMAs, and a call per tile with its arguments rebuilt was a
// sizable part of that.
template <Kind A, bool kPack>
__attribute__((target("avx2,fma"))) void WholeTiles(const TileArgs& first, int64_t count) {
  TileArgs t = first;
  for (int64_t i = 0; i < count; ++i) {
    Tile<kVecs, false, A, kPack>(t);
    t.x += t.C * kTilePixels;
    t.src += kTilePixels;
    t.y += kTilePixels;
    if (t.z) t.z += kTilePixels;
  }
}

// Whole tiles (reading the packed input, or packing it), and tails of one,
// two and three vectors.
struct TileSet {
  TilesFn full, full_packing;
  TileFn tail[kVecs];
};

template <Kind A>
TileSet MakeTileSet() {
  return {WholeTiles<A, false>, WholeTiles<A, true>, {OneTile<1, true, A>, OneTile<2, true, A>, OneTile<3, true, A>}};
}

// The exponential activations (Sigmoid, SiLU, Tanh) are not applied in the
// tile: finishing twelve sums at once in registers kept them all live across
// the activation's temporaries, and the spills made a SiLU conv 15% slower
// (1x1 32 -> 32 at 160x160). Their tiles store (sum + bias) + z, and the
// activation follows over each block's rows of a span, still in L1.
bool ActivatesAfter(Kind kind) { return kind == Kind::kSigmoid || kind == Kind::kSilu || kind == Kind::kTanh; }

TileSet TileSetFor(Kind kind) {
  if (ActivatesAfter(kind)) return MakeTileSet<Kind::kNone>();
  return ForActivation8(kind, [](auto k) { return MakeTileSet<decltype(k)::value>(); });
}

// Copies pixels [s0, s1) of every input channel into `buf` as tiles of
// C x kTilePixels floats (zeros past s1), so that the kernel reads its
// input contiguously: the channel rows themselves lie a plane apart, which
// for 160x160 images is a multiple of 4 KiB, so that the rows of a tile all
// fall into the same few L1 sets and evict one another.
__attribute__((target("avx2,fma"))) void PackSpan(const float* x, int64_t C, int64_t plane, int64_t s0,
                                                  int64_t s1, float* buf) {
  const int64_t full = (s1 - s0) / kTilePixels, rest = s1 - s0 - full * kTilePixels;
  const __m256i mask[kVecs] = {LaneMask(static_cast<int>(std::clamp<int64_t>(rest, 0, 8))),
                               LaneMask(static_cast<int>(std::clamp<int64_t>(rest - 8, 0, 8))),
                               LaneMask(static_cast<int>(std::clamp<int64_t>(rest - 16, 0, 8)))};
  for (int64_t c = 0; c < C; ++c) {
    const float* row = x + c * plane + s0;
    float* dst = buf + c * kTilePixels;
    for (int64_t t = 0; t < full; ++t, row += kTilePixels, dst += C * kTilePixels)
#pragma GCC unroll 3
      for (int v = 0; v < kVecs; ++v) _mm256_store_ps(dst + 8 * v, _mm256_loadu_ps(row + 8 * v));
    if (rest > 0)  // zeros past s1: masked loads read nothing there
#pragma GCC unroll 3
      for (int v = 0; v < kVecs; ++v) _mm256_store_ps(dst + 8 * v, _mm256_maskload_ps(row + 8 * v, mask[v]));
  }
}

float* SpanBuffer(int64_t floats) {
  thread_local SgemmScratch scratch;
  return scratch.Get(floats);
}

// Pixels [p0, p1) of image n, every output channel: in spans of
// kSpanPixels, each packed once (PackSpan) and then computed channel block
// by channel block, so that every output row is written in runs of a span's
// pixels rather than a tile's (the rows of a tile are separate streams).
void RunPixels(const Pointwise& g, const PointwiseRowBlocks& packed, const TileSet& tiles, TileArgs base, int64_t n,
               int64_t p0, int64_t p1) {
  const int64_t image_out = n * g.M * g.pixels;
  const int64_t span = SpanPixelsFor(g.C);
  float* buf = SpanBuffer(g.C * span);
  for (int64_t s0 = p0; s0 < p1; s0 += span) {
    const int64_t s1 = std::min(p1, s0 + span);
    const float* x_n = base.x + n * g.C * g.pixels;
    // The first block of output channels reads its whole tiles of input
    // where they lie and packs them as it goes (one pass over the input
    // fewer); a last part tile is packed first, with zeros past s1.
    const int64_t whole_end = s0 + (s1 - s0) / kTilePixels * kTilePixels;
    if (whole_end < s1) PackSpan(x_n, g.C, g.pixels, whole_end, s1, buf + (whole_end - s0) * g.C);
    for (int64_t b = 0; b < packed.blocks; ++b) {
      const int64_t m0 = b * kRows;
      TileArgs t = base;
      t.w = packed.w.data() + b * g.C * kRows;
      t.rows = static_cast<int>(std::min<int64_t>(kRows, g.M - m0));
      t.bias = base.bias ? base.bias + m0 : nullptr;
      t.src_plane = g.pixels;
      auto at = [&](int64_t j) {  // t pointed at the tile from pixel j on
        t.x = buf + (j - s0) / kTilePixels * g.C * kTilePixels;
        t.src = x_n + j;
        t.z = base.z ? base.z + image_out + m0 * g.pixels + j : nullptr;
        t.y = base.y + image_out + m0 * g.pixels + j;
      };
      at(s0);
      (b == 0 ? tiles.full_packing : tiles.full)(t, (whole_end - s0) / kTilePixels);
      if (whole_end < s1) {
        const int64_t count = s1 - whole_end;
        at(whole_end);
        t.last = static_cast<int>(count - (count - 1) / 8 * 8);
        tiles.tail[(count + 7) / 8 - 1](t);
      }
      if (ActivatesAfter(base.act->kind)) {
        float* y = base.y + image_out + m0 * g.pixels + s0;
        BiasResidualActivate(*base.act, nullptr, nullptr, 0, y, g.pixels, t.rows, s1 - s0);
      }
    }
  }
}

#endif  // NEE_POINTWISE_X86

}  // namespace

bool ConvPointwiseSmallApplies(const Pointwise& g) {
#ifdef NEE_POINTWISE_X86
  if (SgemmActiveIsa() < SgemmIsa::kAvx2) return false;
  if (g.N <= 0 || g.C <= 0 || g.M <= 0 || g.pixels < 256) return false;
  // Measured against the SGEMM path one conv at a time (1 thread, Zen 3),
  // without activation: 16 -> 64 at 112x112 15% faster, 32 -> 32 at 160x160
  // 12%, 64 -> 256 at 56x56 5%, YOLO's 64 -> 255 head at 80x80 4%; deeper
  // inputs 1-2% (128 -> 255 at 40x40), within the noise. With SiLU, whose
  // arithmetic is the same on both paths: 32 -> 32 at 160x160 5%, 16 -> 16
  // 4%, 64 -> 64 at 80x80 2%, but from 128 input channels on 3-5% slower
  // (128 -> 32 at 80x80, 128 -> 64 and 256 -> 64 at 40x40).
  // Deeper inputs (spans cut to stay in L2) against SGEMM, with SiLU, per-node
  // minimums of 7 alternating rounds: 128 -> 32 at 80x80 8% faster, 256 -> 64
  // at 40x40 5%, 128 -> 64 at 40x40 1%.
  // Since a block's whole tiles run in one call, deeper inputs too, against
  // SGEMM (per-node minimums, 7-11 alternating rounds, 1 / 2 threads): 128 ->
  // 128 at 40x40 0.96-0.98 / 0.94-0.99, 128 -> 255 0.93-0.95 / 0.92-0.93, 256
  // -> 255 at 20x20 0.95 / 0.90-0.95, 128 -> 512 at 28x28 0.955 / 0.955, 512
  // -> 256 at 20x20 0.96-0.97 / 0.90, 512 -> 512 at 28x28 0.96; 1024 input
  // channels even (0.99), so SGEMM keeps them. Against the pixel-major path,
  // which takes deep convs with few outputs (4 M < C): 256 -> 32 at 40x40 0.91,
  // 192 -> 32 at 28x28 and 320 -> 64 at 16x16 even, 512 -> 64 at 20x20 1.04,
  // so from 257 input channels those stay there.
  return g.C <= 256 || (g.C <= 512 && 4 * g.M >= g.C);
#else
  (void)g;
  return false;
#endif
}

Status ConvPointwiseSmall(KernelContext& ctx, const Pointwise& g, const float* x, const float* w, const float* bias,
                          const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_POINTWISE_X86
  const std::shared_ptr<const PointwiseRowBlocks> packed = PointwiseRowBlocksFor(ctx, w, g.M, g.C, kRows);
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const TileSet tiles = TileSetFor(act.kind);
  const TileArgs base{x, nullptr, 0, g.pixels, g.C, nullptr, bias, z, y, 0, 8, &act};
  // Each image's pixels in chunks of whole tiles: at least four per thread so
  // that threads claiming them end together, and none longer than 4096
  // pixels. The chunking never changes what a pixel's sums are.
  const int threads = NumThreads(ctx);
  const int64_t tiles_per_image = (g.pixels + kTilePixels - 1) / kTilePixels;
  int64_t chunks = (g.pixels + 4095) / 4096;
  if (threads > 1) chunks = std::max(chunks, (4 * threads + g.N - 1) / g.N);
  chunks = std::clamp<int64_t>(chunks, 1, tiles_per_image);
  ParallelTasks(ctx, g.N * chunks, [&](int64_t task) {
    const int64_t n = task / chunks, c = task % chunks;
    RunPixels(g, *packed, tiles, base, n, TileAlignedStart(c, chunks, g.pixels, kTilePixels),
              TileAlignedStart(c + 1, chunks, g.pixels, kTilePixels));
  });
  return Status::Ok();
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
  return NotImplemented("ConvPointwiseSmall needs AVX2");
#endif
}

namespace {
std::shared_ptr<const PointwiseRowBlocks> PackRowBlocks(const float* w, int64_t M, int64_t C, int64_t rows) {
  auto p = std::make_shared<PointwiseRowBlocks>();
  p->rows = rows;
  p->blocks = (M + rows - 1) / rows;
  p->w.assign(static_cast<size_t>(p->blocks * C * rows), 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) p->w[static_cast<size_t>((m / rows * C + c) * rows + m % rows)] = w[m * C + c];
  return p;
}
}  // namespace

std::shared_ptr<const PointwiseRowBlocks> PointwiseRowBlocksFor(KernelContext& ctx, const float* w, int64_t M,
                                                                int64_t C, int64_t rows) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return PackRowBlocks(w, M, C, rows);
  auto packed = ctx.prepared()->GetOrBuild<PointwiseRowBlocks>(
      {M, C, rows},
      [&]() -> Result<std::shared_ptr<const PointwiseRowBlocks>> { return PackRowBlocks(w, M, C, rows); });
  return packed.ok() ? packed.value() : PackRowBlocks(w, M, C, rows);
}

}  // namespace nee::cpu
