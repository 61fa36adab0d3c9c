// ConvPixel: output pixels x output channels, the channels in vectors.
//
// Why this orientation: the channel-major GEMM (sgemm.cc, A = weights, B =
// im2col or the input itself) packs its B operand every run, and with few
// output channels, a stride of 2 or a small image that packing (K x pixels
// floats) costs about as much as the multiply. Here the input is the
// broadcast operand, read as scalars straight from each tap's input row
// (stride 2 only changes the step between pixels), and the weights, packed
// once, are the vector operand: the idea of a blocked (NCHWc) direct
// convolution without changing how tensors are laid out between nodes. The
// pixel-major result of each output row is transposed into NCHW, 8x8 at a
// time, while it is in L1.
//
// Padding needs no padded copy of the input: an input row above or below the
// image is a row of zeros, and the few pixels at the left and right ends of
// the output rows, whose taps reach past the image, are gathered into one
// small im2col per task (zeros for the padding) and computed as one more run.
//
// The kernel is a 6x16 tile (six pixels by two vectors of eight channels:
// twelve accumulators, two weight vectors, one broadcast), as the AVX2 SGEMM
// tile. Each output element sums its taps in order within a depth block and
// the blocks in order, whatever the tiling or thread count.
#include "ep/cpu/conv_pixel_gemm.h"

#include <algorithm>
#include <vector>

#include "ep/cpu/packed_weights.h"
#include "ep/cpu/parallel_tasks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/simd_x86.h"
#define NEE_PIXEL_GEMM_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kTilePixels = 6;
// Outputs few enough for the pixel-major path whatever the stride.
constexpr int64_t kFewPixels = 16;
// Pixels per task: their tap rows (kc x stride x chunk floats) stay in L2
// while every block of sixteen channels passes over them.
constexpr int64_t kChunkPixels = 240;

}  // namespace

PixelPackedWeights::PixelPackedWeights(const float* w, int64_t M, int64_t K)
    : M_(M),
      K_(K),
      blocks_(std::max<int64_t>(1, (K + kPixelGemmDepth - 1) / kPixelGemmDepth)),
      data_(SgemmAllocate(std::max<int64_t>(1, K * ((M + 15) / 16 * 16)))) {
  for (int64_t b = 0; b < blocks_; ++b)
    for (int64_t cb = 0; cb < padded_m() / 16; ++cb) {
      float* dst = data_.get() + (Block(b, cb) - data_.get());
      for (int64_t p = BlockStart(b); p < BlockStart(b + 1); ++p)
        for (int64_t i = 0; i < 16; ++i) {
          const int64_t m = cb * 16 + i;
          *dst++ = m < M ? w[m * K + p] : 0.f;
        }
    }
}

namespace {

// What goes onto each output element after its sum: the bias of its
// channel, the residual, the activation (FusedConv's epilogue).
struct OutFinish {
  const FusedActivation* act;
  const float* bias;  // at the first channel of the block, or null
  const float* z;     // at the block's first output, laid out as y, or null
};

// Transposes a pixel-major grid into NCHW rows and finishes them.
using TransposeFinishFn = void (*)(const float* grid, int64_t ldg, int64_t M, int64_t pixels, float* y,
                                   int64_t y_plane, const OutFinish& f);

}  // namespace

#ifdef NEE_PIXEL_GEMM_X86

namespace {

// R pixels by B blocks of 16 channels over taps [0, kc): pixel r reads
// rows[p][step * r], step = S, or `stride` where S is 0 (the strides other
// than 1 and 2, which only short rows of output take: see ConvPixelApplies);
// block i's weights lie i * w_step floats after w, its sums 16 * i floats
// along the grid row. Stores into (or, after the first depth block, adds to)
// the grid tile. Each sum is one FMA chain over the taps in order, whatever
// R and B.
template <int R, int S, int B>
__attribute__((target("avx2,fma"))) void PixelTile(int64_t kc, const float* const* rows, int64_t j, const float* w,
                                                   int64_t w_step, float* tile, int64_t ldg, bool accumulate,
                                                   int64_t stride) {
  const int64_t step = S > 0 ? S : stride;
  __m256 acc[R][B][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < B; ++i) acc[r][i][0] = acc[r][i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const float* a = rows[p] + step * j;
    __m256 b[B][2];
#pragma GCC unroll 4
    for (int i = 0; i < B; ++i) {
      b[i][0] = _mm256_load_ps(w + i * w_step + p * 16);
      b[i][1] = _mm256_load_ps(w + i * w_step + p * 16 + 8);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + step * r);
#pragma GCC unroll 4
      for (int i = 0; i < B; ++i) {
        acc[r][i][0] = _mm256_fmadd_ps(av, b[i][0], acc[r][i][0]);
        acc[r][i][1] = _mm256_fmadd_ps(av, b[i][1], acc[r][i][1]);
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < B; ++i) {
      float* out = tile + r * ldg + 16 * i;
      __m256 lo = acc[r][i][0], hi = acc[r][i][1];
      if (accumulate) {
        lo = _mm256_add_ps(_mm256_loadu_ps(out), lo);
        hi = _mm256_add_ps(_mm256_loadu_ps(out + 8), hi);
      }
      _mm256_storeu_ps(out, lo);
      _mm256_storeu_ps(out + 8, hi);
    }
}

// Pixels in the next tile when `left` remain: six, but the last few are cut
// so that no tile has fewer than four where that can be helped. A tile of
// three pixels has six accumulators, too few to hide the FMA latency: it
// costs 1.25x a six-pixel tile per pixel, a tile of four or five what one of
// six does (measured, 1 thread, on ResNet-50's 14x14 stride-2 outputs, whose
// rows of 13 interior pixels went as 6 + 4 + 3 and now go as 5 + 4 + 4).
// Which tiles compute an output never changes its sum.
int64_t TileCount(int64_t left) {
  static constexpr int64_t kLast[14] = {0, 1, 2, 3, 4, 5, 6, 4, 4, 5, 6, 6, 6, 5};  // 7 = 4+3, 9 = 5+4, 13 = 5+4+4
  return left < 14 ? kLast[left] : kTilePixels;
}

using TileFn = void (*)(int64_t, const float* const*, int64_t, const float*, int64_t, float*, int64_t, bool, int64_t);
template <int S>
constexpr TileFn kTiles[kTilePixels] = {PixelTile<1, S, 1>, PixelTile<2, S, 1>, PixelTile<3, S, 1>,
                                         PixelTile<4, S, 1>, PixelTile<5, S, 1>, PixelTile<6, S, 1>};

// A run of one to three pixels has two to six sums per block of sixteen
// channels, too few FMA chains to hide their latency: it takes four blocks
// at a time (one pixel) or two (two pixels) instead, whatever fits the
// sixteen registers. (A 512 -> 1280 1x1 conv on one pixel: 55 -> 50 us.)
constexpr int NarrowBlocks(int64_t pixels) { return pixels == 1 ? 4 : pixels == 2 ? 2 : 1; }

template <int S>
TileFn NarrowTile(int64_t pixels, int64_t blocks) {
  switch (pixels * 8 + blocks) {
    case 9: return PixelTile<1, S, 1>;
    case 10: return PixelTile<1, S, 2>;
    case 11: return PixelTile<1, S, 3>;
    case 12: return PixelTile<1, S, 4>;
    case 17: return PixelTile<2, S, 1>;
    case 18: return PixelTile<2, S, 2>;
    default: return PixelTile<3, S, 1>;
  }
}
TileFn NarrowTileFor(int64_t pixels, int64_t blocks, int64_t stride) {
  return stride == 1 ? NarrowTile<1>(pixels, blocks) : stride == 2 ? NarrowTile<2>(pixels, blocks)
                                                                    : NarrowTile<0>(pixels, blocks);
}


}  // namespace

bool PixelGemmAvailable() { return SgemmActiveIsa() >= SgemmIsa::kAvx2; }

void PixelGemm(const PixelSegment* segments, int64_t count, const PixelPackedWeights& w, int64_t cb0, int64_t cb1,
               int64_t ldg) {
  const PixelSegment* const end = segments + count;
  // A segment of three pixels or fewer is one narrow tile (TileCount gives
  // four or more to every tile of a longer one).
  auto narrow = [](const PixelSegment& seg) { return seg.pixels < 4; };
  for (int64_t b = 0; b < w.depth_blocks(); ++b) {
    const int64_t p0 = w.BlockStart(b), kc = w.BlockStart(b + 1) - p0, w_step = 16 * kc;
    for (int64_t cb = cb0; cb < cb1; ++cb) {
      const float* wb = w.Block(b, cb);  // stays in L1 across the segments
      for (const PixelSegment* seg = segments; seg < end; ++seg) {
        if (narrow(*seg)) continue;
        const TileFn* tiles = seg->stride == 1 ? kTiles<1> : seg->stride == 2 ? kTiles<2> : kTiles<0>;
        for (int64_t j = 0, count; j < seg->pixels; j += count) {
          count = TileCount(seg->pixels - j);
          tiles[count - 1](kc, seg->rows + p0, j, wb, w_step, seg->grid + j * ldg + cb * 16, ldg, p0 > 0,
                           seg->stride);
        }
      }
    }
    for (const PixelSegment* seg = segments; seg < end; ++seg) {
      if (!narrow(*seg) || seg->pixels == 0) continue;
      for (int64_t cb = cb0, blocks; cb < cb1; cb += blocks) {
        blocks = std::min<int64_t>(NarrowBlocks(seg->pixels), cb1 - cb);
        NarrowTileFor(seg->pixels, blocks, seg->stride)(kc, seg->rows + p0, 0, w.Block(b, cb), w_step,
                                                        seg->grid + cb * 16, ldg, p0 > 0, seg->stride);
      }
    }
  }
}

namespace {

// y[m * y_plane + j] = grid[j * ldg + m] for m < M, j < pixels.
// Eight channels at a time, each along the whole run of pixels: the eight
// output rows are then written front to back, each cache line completed by
// two consecutive 8x8 blocks. (Pixels outermost wrote all M rows at once, 32
// bytes each; the rows lie a plane apart, for 160x160 outputs a multiple of
// 4 KiB, so they shared a few L1 sets and evicted each other's half-written
// lines: the transpose took 9% of a 3x3 stride-2 conv's time.)
void TransposeOut(const float* grid, int64_t ldg, int64_t M, int64_t pixels, float* y, int64_t y_plane) {
  const int64_t full = pixels / 8 * 8;
  int64_t m = 0;
  for (; m + 8 <= M; m += 8)
    for (int64_t j = 0; j < full; j += 8) Transpose8x8Avx2(grid + j * ldg + m, ldg, y + m * y_plane + j, y_plane);
  for (; m < M; ++m)
    for (int64_t j = 0; j < full; ++j) y[m * y_plane + j] = grid[j * ldg + m];
  for (int64_t j = full; j < pixels; ++j)
    for (int64_t c = 0; c < M; ++c) y[c * y_plane + j] = grid[j * ldg + c];
}

// Channels [m, m + 8) of pixels [j, j + count), count <= 8, out of the grid,
// finished ((sum + bias) + z, then the activation: the operations
// BiasResidualActivate performs, so the same bits) and stored. A part block
// is read through a zero-padded copy and stored through a mask.
template <FusedActivation::Kind K>
__attribute__((target("avx2,fma"), always_inline)) inline void FinishBlock(const float* grid, int64_t ldg,
                                                                           const __m256* bias, int count, float* y,
                                                                           int64_t y_plane, const float* z,
                                                                           const FusedActivation& act) {
  __m256 v[8];
  if (count == 8) {
    Transpose8x8ToRegs(grid, ldg, v);
  } else {
    alignas(32) float part[8][8];
    for (int i = 0; i < 8; ++i)
      _mm256_store_ps(part[i], i < count ? _mm256_loadu_ps(grid + i * ldg) : _mm256_setzero_ps());
    Transpose8x8ToRegs(&part[0][0], 8, v);
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    __m256 s = _mm256_add_ps(v[i], bias[i]);
    if (z) {
      const float* zi = z + i * y_plane;
      s = _mm256_add_ps(s, count == 8 ? _mm256_loadu_ps(zi) : _mm256_maskload_ps(zi, mask));
    }
    s = Activate8<K>(act, s);
    if (count == 8) _mm256_storeu_ps(y + i * y_plane, s);
    else _mm256_maskstore_ps(y + i * y_plane, mask, s);
  }
}

// TransposeOut with the finish applied in registers to each block of 8
// channels x 8 pixels as it is stored. Channels past the last 8 are copied,
// then finished by BiasResidualActivate.
template <FusedActivation::Kind K>
__attribute__((target("avx2,fma"))) void TransposeFinish(const float* grid, int64_t ldg, int64_t M, int64_t pixels,
                                                         float* y, int64_t y_plane, const OutFinish& f) {
  const int64_t whole = M / 8 * 8;
  if (pixels == 1 && y_plane == 1) {  // one pixel's channels, contiguous in the grid and in y: no transpose
    for (int64_t m = 0; m < whole; m += 8) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(grid + m), f.bias ? _mm256_loadu_ps(f.bias + m) : _mm256_setzero_ps());
      if (f.z) s = _mm256_add_ps(s, _mm256_loadu_ps(f.z + m));
      _mm256_storeu_ps(y + m, Activate8<K>(*f.act, s));
    }
    std::copy(grid + whole, grid + M, y + whole);
    BiasResidualActivate(*f.act, f.bias ? f.bias + whole : nullptr, f.z ? f.z + whole : nullptr, 1, y + whole, 1,
                         M - whole, 1);
    return;
  }
  for (int64_t m = 0; m < whole; m += 8) {
    __m256 bias[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) bias[i] = _mm256_set1_ps(f.bias ? f.bias[m + i] : 0.f);
    for (int64_t j = 0; j < pixels; j += 8) {
      const int64_t at = m * y_plane + j;
      FinishBlock<K>(grid + j * ldg + m, ldg, bias, static_cast<int>(std::min<int64_t>(8, pixels - j)), y + at,
                     y_plane, f.z ? f.z + at : nullptr, *f.act);
    }
  }
  if (whole == M) return;
  for (int64_t m = whole; m < M; ++m)
    for (int64_t j = 0; j < pixels; ++j) y[m * y_plane + j] = grid[j * ldg + m];
  const int64_t at = whole * y_plane;
  BiasResidualActivate(*f.act, f.bias ? f.bias + whole : nullptr, f.z ? f.z + at : nullptr, y_plane, y + at, y_plane,
                       M - whole, pixels);
}

TransposeFinishFn TransposeFinishFor(FusedActivation::Kind kind) {
  return ForActivation8(kind, [](auto k) -> TransposeFinishFn { return TransposeFinish<decltype(k)::value>; });
}

}  // namespace

#else

// Without the vector kernel nothing selects this path; the loops below say
// what it computes and keep the functions defined everywhere.
bool PixelGemmAvailable() { return false; }

void PixelGemm(const PixelSegment* segments, int64_t count, const PixelPackedWeights& w, int64_t cb0, int64_t cb1,
               int64_t ldg) {
  for (int64_t b = 0; b < w.depth_blocks(); ++b)
    for (int64_t cb = cb0; cb < cb1; ++cb)
      for (const PixelSegment* seg = segments; seg < segments + count; ++seg)
        for (int64_t j = 0; j < seg->pixels; ++j)
          for (int64_t i = 0; i < 16; ++i) {
            float sum = 0.f;
            for (int64_t p = w.BlockStart(b); p < w.BlockStart(b + 1); ++p)
              sum += seg->rows[p][seg->stride * j] * w.Block(b, cb)[(p - w.BlockStart(b)) * 16 + i];
            float& out = seg->grid[j * ldg + cb * 16 + i];
            out = b > 0 ? out + sum : sum;
          }
}

namespace {
void TransposeOut(const float* grid, int64_t ldg, int64_t M, int64_t pixels, float* y, int64_t y_plane) {
  for (int64_t j = 0; j < pixels; ++j)
    for (int64_t m = 0; m < M; ++m) y[m * y_plane + j] = grid[j * ldg + m];
}

void TransposeThenFinish(const float* grid, int64_t ldg, int64_t M, int64_t pixels, float* y, int64_t y_plane,
                         const OutFinish& f) {
  TransposeOut(grid, ldg, M, pixels, y, y_plane);
  BiasResidualActivate(*f.act, f.bias, f.z, y_plane, y, y_plane, M, pixels);
}

TransposeFinishFn TransposeFinishFor(FusedActivation::Kind) { return TransposeThenFinish; }
}  // namespace

#endif

namespace {

// The node's weights packed for the kernel: once per session when they are
// a constant, else for this run.
std::shared_ptr<const PixelPackedWeights> PackedFor(KernelContext& ctx, const float* w, int64_t M, int64_t K) {
  return PackedOnce<PixelPackedWeights>(ctx, {M, K}, {1},
                                        [&] { return std::make_shared<const PixelPackedWeights>(w, M, K); });
}

// Which pixels of an output row read only inside the image, [lo, hi); those
// before lo and from hi on reach into the left or right padding.
struct Interior {
  int64_t lo, hi;
};

Interior InteriorOf(const Conv2D& g) {
  const int64_t S = g.stride;
  const int64_t lo = std::min(g.OW, (g.pl + S - 1) / S);
  const int64_t last = g.W - g.KW + g.pl;  // S * j <= last
  const int64_t hi = last < 0 ? lo : std::clamp(last / S + 1, lo, g.OW);
  return {lo, hi};
}

// What a task's pixels read and where their sums go: the row tables, the
// border pixels' im2col, the segments over them and the pixel-major grid.
// Grown as needed and reused.
struct TaskTables {
  std::vector<const float*> rows;
  std::vector<PixelSegment> segments;
  std::vector<float> border, border_grid, grid;
  std::vector<int64_t> border_pixels;  // output pixel (oh * OW + j) of each border pixel
  int64_t oh0 = 0, oh1 = 0, j0 = 0, j1 = 0;
};
TaskTables& ThreadTables() {
  thread_local TaskTables tables;
  return tables;
}

// A task: output rows [oh0, oh1) of image n, pixels [j0, j1) of each, into a
// pixel-major grid (row (oh - oh0) * (j1 - j0) + j - j0). Each row's interior
// pixels are one segment reading the input in place; the pixels whose taps
// reach into the left or right padding are gathered, over all the task's
// rows, into one small im2col (zeros for the padding) and computed as one more
// segment, so that a 7x7 output does not run one-pixel tiles. Prepare builds
// the tables once; Compute may then run for several ranges of channels.
class PixelTask {
 public:
  PixelTask(const Conv2D& g, const PixelPackedWeights& w, const float* x_n, const float* zeros)
      : g_(g), w_(w), x_n_(x_n), zeros_(zeros), in_(InteriorOf(g)) {}

  void Prepare(int64_t oh0, int64_t oh1, int64_t j0, int64_t j1, TaskTables& t) const {
    const int64_t width = j1 - j0, ldg = w_.padded_m(), K = g_.K();
    const int64_t lo = std::clamp(in_.lo, j0, j1), hi = std::clamp(in_.hi, j0, j1);
    t.oh0 = oh0, t.oh1 = oh1, t.j0 = j0, t.j1 = j1;
    t.grid.resize(static_cast<size_t>((oh1 - oh0) * width * ldg));
    t.rows.resize(static_cast<size_t>((oh1 - oh0 + 1) * K));  // each row's table, then the border's
    t.segments.clear();
    t.border_pixels.clear();
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t row = (oh - oh0) * width;
      if (hi > lo) {
        const float** rows = t.rows.data() + (oh - oh0) * K;
        InteriorRows(oh, lo, rows);
        t.segments.push_back({rows, g_.stride, hi - lo, t.grid.data() + (row + lo - j0) * ldg});
      }
      // The pixels outside [lo, hi): lo and hi are clamped to [j0, j1), so
      // these are the two ends of the row (a 320-pixel row has one or two).
      for (int64_t j = j0; j < lo; ++j) t.border_pixels.push_back(oh * g_.OW + j);
      for (int64_t j = std::max(hi, lo); j < j1; ++j) t.border_pixels.push_back(oh * g_.OW + j);
    }
    const int64_t nb = static_cast<int64_t>(t.border_pixels.size());
    if (nb > 0) {
      const float** rows = t.rows.data() + (oh1 - oh0) * K;
      GatherBorder(t, rows);
      t.border_grid.resize(static_cast<size_t>(nb * ldg));
      t.segments.push_back({rows, 1, nb, t.border_grid.data()});
    }
  }

  // The sums of channel blocks [cb0, cb1) into the grid.
  void Compute(int64_t cb0, int64_t cb1, TaskTables& t) const {
    const int64_t ldg = w_.padded_m(), width = t.j1 - t.j0;
    PixelGemm(t.segments.data(), static_cast<int64_t>(t.segments.size()), w_, cb0, cb1, ldg);
    for (size_t i = 0; i < t.border_pixels.size(); ++i) {  // border pixels into their grid rows
      const int64_t oh = t.border_pixels[i] / g_.OW, j = t.border_pixels[i] % g_.OW;
      std::copy_n(t.border_grid.data() + static_cast<int64_t>(i) * ldg + 16 * cb0, 16 * (cb1 - cb0),
                  t.grid.data() + ((oh - t.oh0) * width + j - t.j0) * ldg + 16 * cb0);
    }
  }

 private:
  // The input row of tap (c, kh) for output row oh, or null above or below the image.
  const float* InputRow(int64_t c, int64_t kh, int64_t oh) const {
    const int64_t ih = oh * g_.stride - g_.pt + kh;
    if (ih < 0 || ih >= g_.H) return nullptr;
    return x_n_ + (c * g_.H + ih) * g_.W;
  }

  // Tap (c, kh, kw) of pixels j, j+1, ... at rows[p][stride * (pixel - j)].
  void InteriorRows(int64_t oh, int64_t j, const float** rows) const {
    for (int64_t c = 0; c < g_.C; ++c)
      for (int64_t kh = 0; kh < g_.KH; ++kh) {
        const float* row = InputRow(c, kh, oh);
        for (int64_t kw = 0; kw < g_.KW; ++kw) *rows++ = row ? row + g_.stride * j + kw - g_.pl : zeros_;
      }
  }

  // The border pixels' im2col (K rows of nb) and its row table.
  void GatherBorder(TaskTables& s, const float** rows) const {
    const int64_t nb = static_cast<int64_t>(s.border_pixels.size()), K = g_.K();
    s.border.resize(static_cast<size_t>(K * nb));
    for (int64_t c = 0; c < g_.C; ++c)
      for (int64_t kh = 0; kh < g_.KH; ++kh)
        for (int64_t i = 0; i < nb; ++i) {
          const int64_t oh = s.border_pixels[i] / g_.OW, j = s.border_pixels[i] % g_.OW;
          const float* row = InputRow(c, kh, oh);
          float* dst = s.border.data() + (c * g_.KH + kh) * g_.KW * nb + i;
          for (int64_t kw = 0; kw < g_.KW; ++kw) {
            const int64_t iw = g_.stride * j - g_.pl + kw;
            dst[kw * nb] = row && iw >= 0 && iw < g_.W ? row[iw] : 0.f;
          }
        }
    for (int64_t p = 0; p < K; ++p) rows[p] = s.border.data() + p * nb;
  }

  const Conv2D& g_;
  const PixelPackedWeights& w_;
  const float* x_n_;
  const float* zeros_;
  Interior in_;
};

}  // namespace

bool ConvPixelApplies(const Conv2D& g) {
  if (!PixelGemmAvailable() || g.stride < 1) return false;
  if (g.N <= 0 || g.C <= 0 || g.M <= 0 || g.OH <= 0 || g.OW <= 0) return false;
  // Larger strides where the output is a few pixels (silero-vad's STFT as a
  // 256-tap conv of stride 128 with 3 outputs: 26 -> 6 us): the channel-major
  // tiles are 16 pixels wide, and im2col's per-row setup is most of its cost.
  if (g.stride > 2) return g.OH * g.OW <= kFewPixels;
  // Measured against the channel-major paths, one conv at a time, 1 thread
  // (AVX2, Zen 3): every strided or k x k conv that does not take Winograd
  // ran 5-25% faster here (YOLO's and ResNet's stride-2 3x3s, the 6x6 and
  // 7x7 stems, a 5x5) -- except 1x1 stride 2, whose scalar reads use an
  // eighth of each cache line they touch (15-60% slower). Pointwise convs
  // gain where their depth is large and either the image is small (7x7 and
  // 14x14: 3-13%) or the output channels few (192 -> 32 at 28x28: 18%);
  // with a shallow depth (16-128 input channels) the transpose and the
  // short sums cost more than packing the input (up to 40% slower).
  const int64_t K = g.K(), pixels = g.OH * g.OW;
  // And any pointwise conv of fewer pixels than a vector holds (an SE
  // block's or a classifier's 1x1 convs on one pixel), which the
  // pixel-vector kernels compute in a sixteenth of their lanes.
  if (g.pointwise()) return pixels < kFewPixels || (K >= 160 && (pixels <= 196 || 4 * g.M < K));
  // On AVX-512 machines (Zen 4, 1 thread, in the models) against the AVX-512
  // im2col / indirect paths: the 7x7 and 6x6 stems (K 147, 108) and ResNet's
  // 3x3 stride-2 convs 5-12% faster here, MobileNetV2's 3x3 stem (K 27: 3
  // channels) 25% slower: its sums are too short for the transposes.
  if (SgemmActiveIsa() == SgemmIsa::kAvx512 && K < 64) return false;
  return g.KH * g.KW > 1;
}

Status ConvPixel(KernelContext& ctx, const Conv2D& g, const float* x, const float* w, const float* bias,
                 const ConvEpilogue* epilogue, const float* z, float* y) {
  const std::shared_ptr<const PixelPackedWeights> packed = PackedFor(ctx, w, g.M, g.K());
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const bool finish = bias || z || act.kind != FusedActivation::Kind::kNone;
  const TransposeFinishFn finish_fn = TransposeFinishFor(act.kind);
  // A pointwise conv's output is one run of pixels (its taps are whole input
  // planes): cut it into chunks, not rows.
  Conv2D flat = g;
  if (g.pointwise()) flat.H = flat.OH = 1, flat.W = flat.OW = g.OH * g.OW;
  // Tasks of about kChunkPixels pixels: whole rows when rows are short (a
  // task streams all the weights once, whatever its size), else parts of a
  // row, the rows shared out evenly. With several threads and too few such
  // tasks for threads claiming them to end together (a small image), the
  // work is cut finer along whichever of pixels and output channels is the
  // longer: each task reads all of the other side (the input for a channel
  // range, the weights for a pixel range), so cutting the shorter side would
  // multiply the larger read. A channel cut shares each pixel task's tables,
  // built once beforehand.
  const int threads = NumThreads(ctx);
  const int64_t wanted = 4 * threads;
  int64_t chunks = (flat.OW + kChunkPixels - 1) / kChunkPixels;
  // (A task's row tables hold K pointers per row: at most about a million.)
  const int64_t rows_per_task =
      chunks > 1 ? 1 : std::clamp<int64_t>(kChunkPixels / flat.OW, 1, std::max<int64_t>(1, (int64_t{1} << 20) / g.K()));
  int64_t row_groups = (flat.OH + rows_per_task - 1) / rows_per_task;
  if (threads > 1 && g.N * row_groups * chunks < wanted && g.N * g.OH * g.OW >= g.M) {
    if (flat.OH == 1) chunks = std::min((flat.OW + 15) / 16, (wanted + g.N - 1) / g.N);
    else row_groups = std::min(flat.OH, (wanted + g.N * chunks - 1) / (g.N * chunks));
  }
  const int64_t pixel_tasks = g.N * row_groups * chunks, blocks = packed->padded_m() / 16;
  int64_t channel_groups =
      threads > 1 && pixel_tasks < wanted ? std::clamp<int64_t>((wanted + pixel_tasks - 1) / pixel_tasks, 1, blocks)
                                          : 1;
  // As many tasks as a multiple of the threads, so that their shares are
  // equal: magika's 1-D conv (508 outputs, 512 channels) was 3 pixel tasks x
  // 3 channel groups, 5 tasks on one thread and 4 on the other; as 3 x 4 the
  // whole model ran 6-8% faster at 2 threads (80 alternating runs).
  while (channel_groups > 1 && channel_groups < blocks && pixel_tasks * channel_groups % threads != 0) ++channel_groups;
  const int64_t plane = g.OH * g.OW;
  // Zeros for taps above or below the image: as long as a row's widest read.
  std::vector<float> zeros(static_cast<size_t>(g.stride * flat.OW + g.KW + 16), 0.f);
  auto task_of = [&](int64_t pixel_task) {
    return PixelTask(flat, *packed, x + pixel_task / (row_groups * chunks) * g.C * g.H * g.W, zeros.data());
  };
  auto prepare = [&](int64_t pixel_task, TaskTables& t) {
    const int64_t group = pixel_task / chunks % row_groups, chunk = pixel_task % chunks;
    const int64_t oh0 = group * flat.OH / row_groups, oh1 = (group + 1) * flat.OH / row_groups;  // balanced
    task_of(pixel_task).Prepare(oh0, oh1, TileAlignedStart(chunk, chunks, flat.OW, kTilePixels),
                                TileAlignedStart(chunk + 1, chunks, flat.OW, kTilePixels), t);
  };
  // Channel blocks [cb0, cb1) of a prepared task: sums, then out into y, finished.
  auto compute = [&](int64_t pixel_task, int64_t cb0, int64_t cb1, TaskTables& t) {
    task_of(pixel_task).Compute(cb0, cb1, t);
    const int64_t n = pixel_task / (row_groups * chunks), m0 = 16 * cb0, m1 = std::min(g.M, 16 * cb1);
    const int64_t ldg = packed->padded_m(), width = t.j1 - t.j0;
    for (int64_t oh = t.oh0; oh < t.oh1; ++oh) {
      const int64_t offset = (n * g.M + m0) * plane + oh * flat.OW + t.j0;
      const float* grid = t.grid.data() + (oh - t.oh0) * width * ldg + m0;
      if (finish)
        finish_fn(grid, ldg, m1 - m0, width, y + offset, plane,
                  OutFinish{&act, bias ? bias + m0 : nullptr, z ? z + offset : nullptr});
      else
        TransposeOut(grid, ldg, m1 - m0, width, y + offset, plane);
    }
  };
  if (channel_groups == 1) {
    ParallelTasks(ctx, pixel_tasks, [&](int64_t t) {
      TaskTables& tables = ThreadTables();
      prepare(t, tables);
      compute(t, 0, blocks, tables);
    });
  } else {
    // The calling thread's, kept across runs: fresh ones were allocated and
    // their grids (a few hundred KiB per task) zero-filled on every run
    // (memset 0.68% -> 0.35% of magika's samples at 2 threads).
    thread_local std::vector<TaskTables> shared_tables;
    if (shared_tables.size() < static_cast<size_t>(pixel_tasks)) shared_tables.resize(static_cast<size_t>(pixel_tasks));
    std::vector<TaskTables>& tables = shared_tables;
    ParallelTasks(ctx, pixel_tasks, [&](int64_t t) { prepare(t, tables[t]); });
    ParallelTasks(ctx, pixel_tasks * channel_groups, [&](int64_t t) {
      const int64_t pixel_task = t / channel_groups, group = t % channel_groups;
      compute(pixel_task, group * blocks / channel_groups, (group + 1) * blocks / channel_groups, tables[pixel_task]);
    });
  }
  return Status::Ok();
}

}  // namespace nee::cpu
