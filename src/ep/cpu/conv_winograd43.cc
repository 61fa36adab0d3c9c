// Winograd F(4x4, 3x3) for 3x3 stride-1 convolutions (AVX2 + FMA).
//
// The same scheme as conv_winograd.cc's F(2x2, 3x3), with 6x6 input tiles
// at a stride of 4: Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A, and summed over input
// channels 36 matrix products Out_e [M x tiles] = U_e [M x C] x V_e [C x
// tiles], one per element e of the 6x6 transformed tile. A task takes one
// image and a block of tile rows: input transform into SGEMM's packed B
// layout (eight tiles per vector, a tile row's tiles consecutive columns),
// the 36 SGEMMs, output transform with bias and activation.
//
// Interpolation points 0, 1, -1, 1/2, -2 (and infinity). The usual 0, ±1,
// ±2 give about 6-15x F(2x2, 3x3)'s error on ReLU outputs (inputs all
// positive, so Bᵀ's large coefficients cancel big terms); 0, ±1, ±1/2 are no
// better. Mixing 1/2 with -2 keeps the transforms' coefficients small on
// both sides: on ResNet-50's layers (conv_winograd43_test, against double)
// 3.1-3.3x F(2x2, 3x3)'s rms error and 4-6x its largest, 1.2-2.2x the
// error of the direct sum in float (the reference kernel), within 2.3e-6
// of the output's scale. Every
// coefficient of Bᵀ and Aᵀ is exact in binary; G's thirds and fifteenths are
// applied in double, once per session.
//   Bᵀ = [1 -3/2  -2  3/2  1   0]    Aᵀ = [1  1  1  1    1  0]
//        [0  -1  1/2  5/2  1   0]         [0  1 -1  1/2 -2  0]
//        [0   1 -5/2  1/2  1   0]         [0  1  1  1/4  4  0]
//        [0  -2   -1    2  1   0]         [0  1 -1  1/8 -8  1]
//        [0 1/2   -1 -1/2  1   0]
//        [0   1 -3/2   -2 3/2  1]
#include "ep/cpu/conv_winograd43.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "ep/cpu/conv_winograd_common.h"
#include "ep/cpu/no_fp_contract.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/conv_winograd43_simd.h"
#define NEE_WINOGRAD43_X86 1
#endif

namespace nee::cpu {

namespace {

using winograd_common::Block;
using winograd_common::BlockScratch;
using winograd_common::CeilDiv;
using winograd_common::PackedV;
using winograd_common::RunBlocks;
using winograd_common::Split;
using winograd_common::TransformedWeights;
using winograd_common::ZeroPanelPadding;

constexpr int kElems = 36;                 // transformed tile elements: 36 GEMMs
constexpr int64_t kBlockFloats = 1 << 19;  // V and Out of a block, as F(2x2, 3x3)'s

// The transformed weights, U_e packed as SGEMM's A (M x C), one per element.
struct Winograd43Weights {
  std::vector<SgemmPackedA> u;
};

// G, F(4x4, 3x3)'s filter transform.
constexpr double kG[6][3] = {{1, 0, 0},
                             {1. / 3, 1. / 3, 1. / 3},
                             {-1. / 3, 1. / 3, -1. / 3},
                             {-16. / 15, -8. / 15, -4. / 15},
                             {1. / 15, -2. / 15, 4. / 15},
                             {0, 0, 1}};

// G g Gᵀ of one 3x3 filter (row-major 6x6, element e at u[e * stride]), in
// double: G's thirds and fifteenths are not exact in float, and this runs
// once per session.
void TransformFilter(const float* g, float* u, int64_t stride) {
  double p[6][3];  // G g
  for (int i = 0; i < 6; ++i)
    for (int c = 0; c < 3; ++c) p[i][c] = kG[i][0] * g[c] + kG[i][1] * g[3 + c] + kG[i][2] * g[6 + c];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      u[(6 * i + j) * stride] = static_cast<float>(p[i][0] * kG[j][0] + p[i][1] * kG[j][1] + p[i][2] * kG[j][2]);
}

#ifdef NEE_WINOGRAD43_X86
__attribute__((target("avx2,fma"), always_inline)) inline __m256d Times(double a, __m256d x) {
  return _mm256_mul_pd(_mm256_set1_pd(a), x);
}

// TransformFilter on eight filters, four double lanes a half, with the same
// operations in the same order (multiplies and adds, never contracted into
// FMAs): the same bits.
NEE_NO_FP_CONTRACT __attribute__((target("avx2,fma"))) void TransformEightFilters(const float* w, float* u,
                                                                                int64_t stride) {
  float taps[9][8];
  winograd_common::TransposeEightFilters(w, taps);
  for (int half = 0; half < 2; ++half) {
    __m256d g[9];
    for (int k = 0; k < 9; ++k) g[k] = _mm256_cvtps_pd(_mm_loadu_ps(taps[k] + 4 * half));
    __m256d p[6][3];
    for (int i = 0; i < 6; ++i)
      for (int c = 0; c < 3; ++c)
        p[i][c] = _mm256_add_pd(_mm256_add_pd(Times(kG[i][0], g[c]), Times(kG[i][1], g[3 + c])),
                                Times(kG[i][2], g[6 + c]));
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) {
        const __m256d e = _mm256_add_pd(_mm256_add_pd(Times(kG[j][0], p[i][0]), Times(kG[j][1], p[i][1])),
                                        Times(kG[j][2], p[i][2]));
        _mm_storeu_ps(u + (6 * i + j) * stride + 4 * half, _mm256_cvtpd_ps(e));
      }
  }
}
constexpr winograd_common::FilterTransform kEightFilters = TransformEightFilters;
#else
constexpr winograd_common::FilterTransform kEightFilters = nullptr;
#endif

std::shared_ptr<const Winograd43Weights> PackWeights(const Winograd3x3& g, const float* w, const KernelContext& ctx) {
  auto packed = std::make_shared<Winograd43Weights>();
  packed->u = winograd_common::TransformFilters(kElems, g.M, g.C, w, kEightFilters, TransformFilter, ctx);
  return packed;
}

// Tile (ty, tx) of a block is column (ty - ty0) * stride + tx of V_e and
// Out_e. stride is tiles_x, or 4 in an image at most four tiles wide: a
// vector of eight tiles is then two tile rows (padded with tiles whose
// outputs are not written, where fewer than four).
struct Tiling {
  int64_t tiles_x, tiles_y,
      blocks;  // blocks per image, tile rows shared out evenly
  int64_t stride;
  bool narrow() const { return tiles_x <= 4; }
  int64_t columns(const Block& b) const { return (b.ty1 - b.ty0) * stride; }
  int64_t first_row(int64_t block) const { return block * tiles_y / blocks; }
};

// As F(2x2, 3x3)'s TilingOf: blocks within kBlockFloats, and with several
// threads a number of tasks every thread gets equally many of where the
// image allows, or one a thread where the weights are small
// (EachThreadReadsWeights). Which tiles a block holds never changes a result.
Tiling TilingOf(const Winograd3x3& g, int threads) {
  Tiling t;
  t.tiles_x = CeilDiv(g.OW, 4);
  t.tiles_y = CeilDiv(g.OH, 4);
  t.stride = t.narrow() ? 4 : t.tiles_x;
  const int64_t per_row = kElems * (g.C + g.M) * t.stride;
  const int64_t rows_per_block = std::clamp<int64_t>(kBlockFloats / std::max<int64_t>(per_row, 1), 1, t.tiles_y);
  t.blocks = CeilDiv(t.tiles_y, rows_per_block);
  const int64_t tasks = g.N * t.blocks;
  if (threads > 1 && tasks >= threads && tasks % threads != 0)
    t.blocks = std::min(t.tiles_y, CeilDiv(CeilDiv(tasks, threads) * threads, g.N));
  if (threads > 1 && tasks < threads && winograd_common::EachThreadReadsWeights(kElems, g.M, g.C))
    t.blocks = std::min(t.tiles_y, CeilDiv(threads, g.N));
  return t;
}

// Multiply-adds of the GEMMs as SGEMM's AVX2 kernel does them (16 columns
// at a time), per image and per output and input channel, for tiles of
// `size` outputs a side.
#ifdef NEE_WINOGRAD43_X86
int64_t GemmCost(const Winograd3x3& g, int64_t size) {
  const int64_t tiles_x = CeilDiv(g.OW, size), stride = size == 4 && tiles_x <= 4 ? 4 : tiles_x;
  const int64_t elems = (size + 2) * (size + 2), tiles = CeilDiv(g.OH, size) * stride;
  return elems * CeilDiv(tiles, 16) * 16;
}

using namespace winograd43;  // NOLINT: this file's own register-level pieces

// Where lanes [0, k) of a vector go as V_e[c, t0 .. t0 + k): one run of a
// packed panel, or two when the columns cross into the next run. `whole`:
// all eight lanes fit in the run, stored with a plain store even when k < 8
// (AVX2's masked stores are slow on AMD: they took a quarter of the input
// transform at 32 channels). The lanes past k land on columns of the same
// row of V_e that a later vector of this channel overwrites (the same tile
// row's next tiles, the next tile row's first), or on the last panel's
// padding, whose products the GEMM never stores.
struct PackedSlot8 {
  float* base;     // V_0's first lane; V_e's is e * stride further
  int64_t stride;  // floats from one V_e to the next (hoisted out of the 36 stores)
  int64_t first, second;
  __m256i first_lanes, second_lanes;
  bool whole, split;

  NEE_AVX2 PackedSlot8(const PackedV& pv, int64_t c, int64_t t0, int64_t k) {
    base = pv.data, stride = pv.matrix_floats();
    first = SgemmPackedBIndex(pv.c, pv.cols, c, t0);
    const int64_t at = kSgemmPanelRun - t0 % kSgemmPanelRun;
    split = at < k;
    whole = at >= 8;
    first_lanes = LanesBetween8(0, std::min(at, k));
    second_lanes = LanesBetween8(at, k);
    second = split ? SgemmPackedBIndex(pv.c, pv.cols, c, t0 + at) - at : first;
  }
};

NEE_AVX2_INLINE void StorePacked8(const PackedSlot8& slot, int e, __m256 v) {
  float* m = slot.base + e * slot.stride;
  if (slot.whole) return _mm256_storeu_ps(m + slot.first, v);
  _mm256_maskstore_ps(m + slot.first, slot.first_lanes, v);
  if (slot.split) _mm256_maskstore_ps(m + slot.second, slot.second_lanes, v);
}

// Lanes 0-3 and 4-7 of a vector of tiles: four consecutive tiles each, of
// tile rows ty[0] and ty[1], starting at input column col[h] (output column
// col[h] + pw). In a wide image both halves are in one tile row (col[1] =
// col[0] + 16); in an image at most four tiles wide each half is a whole
// tile row (see Tiling::stride), so no lane idles for want of tiles.
struct Halves {
  int64_t ty[2], col[2];
};

// masks[h]: chunks 0..4 of half h (null with kInside). A half's rows
// outside [0, H) read as zeros (no lane of theirs loaded). Returns whether
// every input the tiles read is finite.
template <bool kInside>
NEE_AVX2_INLINE bool InputTilesBody(const Winograd3x3& g, const float* plane, const Halves& h,
                                    const __m128i* const masks[2], const PackedSlot8& slot) {
  static const __m128i kNone[5] = {};
  const __m256 zero = _mm256_setzero_ps();
  __m256 nonfinite = zero;  // 0 * x: NaN where x is NaN or infinite
  __m256 rows[6][6];        // d B: rows[r][j], one input row r of the tiles at a time
  for (int r = 0; r < 6; ++r) {
    const int64_t iy[2] = {4 * h.ty[0] - g.ph + r, 4 * h.ty[1] - g.ph + r};
    const bool in[2] = {iy[0] >= 0 && iy[0] < g.H, iy[1] >= 0 && iy[1] < g.H};
    if (!in[0] && !in[1]) {
      for (int j = 0; j < 6; ++j) rows[r][j] = _mm256_setzero_ps();
      continue;
    }
    const float* const row[2] = {plane + (in[0] ? iy[0] : 0) * g.W + h.col[0],
                                 plane + (in[1] ? iy[1] : 0) * g.W + h.col[1]};
    const __m128i* const row_masks[2] = {in[0] ? masks[0] : kNone, in[1] ? masks[1] : kNone};
    __m256 d[6];
    LoadTileColumns<kInside>(row, row_masks, d);
    // A sum is NaN or infinite where a term is (or, harmlessly, where it
    // overflows); summed as a tree, the check's dependent chain is one op a row.
    const __m256 sum =
        _mm256_add_ps(_mm256_add_ps(d[0], d[1]), _mm256_add_ps(_mm256_add_ps(d[2], d[3]), _mm256_add_ps(d[4], d[5])));
    nonfinite = _mm256_fmadd_ps(sum, zero, nonfinite);
    TransformInput6(d, rows[r]);
  }
  for (int j = 0; j < 6; ++j) {  // Bᵀ (d B), one column at a time
    const __m256 column[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
    __m256 v[6];
    TransformInput6(column, v);
    for (int i = 0; i < 6; ++i) StorePacked8(slot, 6 * i + j, v[i]);
  }
  return _mm256_testz_ps(_mm256_cmp_ps(nonfinite, nonfinite, _CMP_UNORD_Q), _mm256_castsi256_ps(LanesBetween8(0, 8)));
}

// Bᵀ d B for the k <= 8 tiles of `h` of channel c, stored as columns t0..
// of row c of every V_e. Returns whether every input read is finite.
NEE_AVX2 bool InputTiles(const Winograd3x3& g, const float* plane, const Halves& h, int64_t k, const PackedV& pv,
                         int64_t c, int64_t t0) {
  const PackedSlot8 slot(pv, c, t0, k);
  const bool one_row = h.ty[0] == h.ty[1];
  if (one_row && h.col[0] >= 0 && h.col[0] + 36 <= g.W) {
    const __m128i* const none[2] = {nullptr, nullptr};
    return InputTilesBody<true>(g, plane, h, none, slot);
  }
  __m128i masks[2][5];
  for (int half = 0; half < 2; ++half)
    for (int i = 0; i < 5; ++i) masks[half][i] = ColumnsInside4(h.col[half] + 4 * i, g.W);
  const __m128i* const halves[2] = {masks[0], masks[1]};
  return InputTilesBody<false>(g, plane, h, halves, slot);
}

// Every V_e of the block. In a wide image, vectors start at columns that
// are multiples of 8 where that costs no extra vector, so a vector stays
// within one of the packed panels' runs of 16 columns (one plain store
// instead of two masked); in a narrow one every vector is two tile rows.
// Returns whether every input read is finite.
// Channel c's plane is planes + (c - c0) * plane_stride (g.H rows of g.W).
bool InputTransform(const Winograd3x3& g, const Tiling& t, const Block& b, const float* planes, int64_t plane_stride,
                    const PackedV& pv, int64_t c0, int64_t c1) {
  constexpr int64_t kLanes = 8;
  static_assert(kSgemmPanelRun % kLanes == 0, "aligned vectors stay within a run");
  const int64_t cols = t.columns(b);
  bool finite = true;
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = planes + (c - c0) * plane_stride;
    if (t.narrow()) {
      for (int64_t ty = b.ty0; ty < b.ty1; ty += 2) {
        const int64_t t0 = (ty - b.ty0) * t.stride;
        finite &= InputTiles(g, plane, Halves{{ty, ty + 1}, {-g.pw, -g.pw}}, std::min(kLanes, cols - t0), pv, c, t0);
      }
      continue;
    }
    for (int64_t ty = b.ty0; ty < b.ty1; ++ty) {
      const int64_t row_start = (ty - b.ty0) * t.stride;
      const bool aligned = CeilDiv(row_start % kLanes + t.tiles_x, kLanes) == CeilDiv(t.tiles_x, kLanes);
      for (int64_t tx0 = 0, k = 0; tx0 < t.tiles_x; tx0 += k) {
        k = std::min(aligned ? kLanes - (row_start + tx0) % kLanes : kLanes, t.tiles_x - tx0);
        const int64_t col = 4 * tx0 - g.pw;
        finite &= InputTiles(g, plane, Halves{{ty, ty}, {col, col + 16}}, k, pv, c, row_start + tx0);
      }
    }
  }
  return finite;
}

// Aᵀ Out A (+ bias, activation K) for the k <= 8 tiles of `h` (col: output
// columns; a half with col[h] >= OW is not written) of output channel m;
// element e of the tiles is at out[e * ldo].
template <FusedActivation::Kind K>
NEE_AVX2 void OutputTiles(const Winograd3x3& g, const float* out, int64_t ldo, int64_t k, float bias_value,
                          const FusedActivation& act, const Halves& h, float* plane) {
  const __m256i mask = LanesBetween8(0, k);
  const __m256 bias = _mm256_set1_ps(bias_value);
  __m256 s[4][6];  // Aᵀ Out, one column of Out at a time
  for (int j = 0; j < 6; ++j) {
    __m256 column[6], o[4];
    for (int i = 0; i < 6; ++i) column[i] = LoadFirst8(out + (6 * i + j) * ldo, k, mask);
    TransformOutput6(column, 1, o);
    for (int i = 0; i < 4; ++i) s[i][j] = o[i];
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t oy[2] = {4 * h.ty[0] + i, 4 * h.ty[1] + i};
    if (oy[0] >= g.OH && oy[1] >= g.OH) break;
    __m256 y[4];
    TransformOutput6(s[i], 1, y);
    for (int j = 0; j < 4; ++j) y[j] = Activate8<K>(act, _mm256_add_ps(y[j], bias));
    int64_t width[2];
    float* row[2];
    for (int half = 0; half < 2; ++half) {
      const bool inside = oy[half] < g.OH && h.col[half] < g.OW;
      width[half] = inside ? g.OW - h.col[half] : 0;
      row[half] = inside ? plane + oy[half] * g.OW + h.col[half] : plane;
    }
    StoreTileColumns(y, row, width);
  }
}

using OutputTilesFn = void (*)(const Winograd3x3& g, const float* out, int64_t ldo, int64_t k, float bias,
                               const FusedActivation& act, const Halves& h, float* plane);

// Output channels [m0, m1) of the block, vectors of tiles as InputTransform has
// them; channel m's plane is planes + (m - m0) * plane_stride (g.OH rows of g.OW).
template <OutputTilesFn Tiles>
void OutputTransform(const Winograd3x3& g, const Tiling& t, const Block& b, const float* out, const float* bias,
                     const FusedActivation& act, float* planes, int64_t plane_stride, int64_t m0, int64_t m1) {
  constexpr int64_t kLanes = 8;
  const int64_t cols = t.columns(b), stride_e = g.M * cols;
  for (int64_t m = m0; m < m1; ++m) {
    const float bv = bias ? bias[m] : 0.f;
    float* plane = planes + (m - m0) * plane_stride;
    const float* tiles = out + m * cols;
    if (t.narrow()) {
      for (int64_t ty = b.ty0; ty < b.ty1; ty += 2) {
        const int64_t t0 = (ty - b.ty0) * t.stride;
        const Halves h{{ty, ty + 1}, {0, ty + 1 < b.ty1 ? 0 : g.OW}};
        Tiles(g, tiles + t0, stride_e, std::min(kLanes, cols - t0), bv, act, h, plane);
      }
      continue;
    }
    for (int64_t ty = b.ty0; ty < b.ty1; ++ty)
      for (int64_t tx0 = 0; tx0 < t.tiles_x; tx0 += kLanes)
        Tiles(g, tiles + (ty - b.ty0) * t.stride + tx0, stride_e, std::min(kLanes, t.tiles_x - tx0), bv, act,
              Halves{{ty, ty}, {4 * tx0, 4 * tx0 + 16}}, plane);
  }
}

using OutputTransformFn = void (*)(const Winograd3x3&, const Tiling&, const Block&, const float*, const float*,
                                   const FusedActivation&, float*, int64_t, int64_t, int64_t);

// The output transform with the activation in registers.
OutputTransformFn OutputTransformFor(FusedActivation::Kind kind) {
  return ForActivation8(kind,
                        [](auto k) -> OutputTransformFn { return OutputTransform<OutputTiles<decltype(k)::value>>; });
}

using winograd_common::InputPlanes;
using winograd_common::kLayoutBlock;
using winograd_common::Layout;
using winograd_common::OutputPlanes;

// One block: input transform, the 36 GEMMs, output transform (with a
// residual, the residual and activation in a pass over the block's rows
// after it). With `ctx` each phase is shared between the threads; the
// arithmetic is the same either way. Returns false, leaving y unwritten,
// where an input the block reads is NaN or infinite.
bool RunBlock(const Winograd3x3& g, const Tiling& t, const Block& b, const Winograd43Weights& weights,
              const float* bias, const FusedActivation& act, const Layout& io, const KernelContext* ctx) {
  const int64_t cols = t.columns(b);
  float* v = BlockScratch(kElems * (g.C * PackedV::RoundUp32(cols) + g.M * cols));
  const PackedV pv{v, g.C, cols};
  float* out = v + kElems * pv.matrix_floats();
  ZeroPanelPadding(pv, kElems);
  const int64_t unit = io.blocked ? kLayoutBlock : 1;  // channels a share holds a multiple of
  std::atomic<bool> finite{true};
  Split(ctx, g.C / unit, [&](int64_t c0, int64_t c1) {
    InputPlanes(g, 4, b, io, c0 * unit, c1 * unit, [&](const Winograd3x3& rows, const float* planes,
                                                         int64_t stride, int64_t p0, int64_t p1) {
      if (!InputTransform(rows, t, b, planes, stride, pv, p0, p1)) finite.store(false, std::memory_order_relaxed);
    });
  });
  if (!finite.load()) return false;
  auto gemm = [&](int64_t e) {
    Sgemm(g.M, cols, g.C, SgemmA(weights.u[e]), SgemmB::Prepacked(pv.matrix(static_cast<int>(e))), 0.f,
          out + e * g.M * cols, cols, nullptr);
  };
  if (ctx) {
    ParallelTasks(*ctx, kElems, gemm);
  } else {
    for (int e = 0; e < kElems; ++e) gemm(e);
  }
  // With a residual, the residual goes before the activation: both in a pass
  // over the rows after the transform.
  const OutputTransformFn output = OutputTransformFor(io.z ? FusedActivation::Kind::kNone : act.kind);
  Split(ctx, g.M / unit, [&](int64_t m0, int64_t m1) {
    OutputPlanes(g, 4, b, io, act, io.z != nullptr, m0 * unit, m1 * unit,
                 [&](const Winograd3x3& rows, const Block& rb, float* planes, int64_t stride, int64_t p0, int64_t p1) {
                   output(rows, t, rb, out, bias, act, planes, stride, p0, p1);
                 });
  });
  return true;
}

Result<bool> RunWinograd43(KernelContext& ctx, const Winograd3x3& g, const float* w, const float* bias,
                           const FusedActivation& act, const Layout& io) {
  // Releasing the weights' file pages is safe although a run with non-finite
  // inputs falls back to F(2x2, 3x3), which reads them: they fault back in
  // from the file.
  NEE_ASSIGN_OR_RETURN(const std::shared_ptr<const Winograd43Weights> weights,
                       TransformedWeights<Winograd43Weights>(ctx, g.M, g.C, [&] { return PackWeights(g, w, ctx); }));
  const Tiling t = TilingOf(g, NumThreads(ctx));
  return RunBlocks(ctx, g.N, t, [&](const Block& b, const KernelContext* shared) {
    return RunBlock(g, t, b, *weights, bias, act, io, shared);
  });
}
#endif  // NEE_WINOGRAD43_X86

std::atomic<Winograd43Mode> g_mode{Winograd43Mode::kAuto};

}  // namespace

void SetWinograd43Mode(Winograd43Mode mode) { g_mode.store(mode, std::memory_order_relaxed); }

bool Winograd43Preferred(const Winograd3x3& g) {
#ifdef NEE_WINOGRAD43_X86
  // AVX2 and FMA at least: its transforms are AVX2 code, its GEMMs SGEMM's
  // (the AVX-512 kernel where the CPU has it: the 3x3 stride-1 convs of
  // ResNet-50 on Zen 4 15-22% faster than F(2x2, 3x3) there, the 7x7 ones
  // still take F(2x2, 3x3) by the cost rule below).
  if (SgemmActiveIsa() < SgemmIsa::kAvx2 || SgemmPortableForced()) return false;
  const Winograd43Mode mode = g_mode.load(std::memory_order_relaxed);
  if (mode != Winograd43Mode::kAuto) return mode == Winograd43Mode::kAlways;
  // Where F(2x2, 3x3) runs on AVX-512, its transforms are twice as wide as
  // these: with few channels they outweigh the saved multiplies (YOLO's
  // 16@160 and 32@80 convs 12-20% slower here, 128@20 13% faster).
  if (SgemmActiveIsa() == SgemmIsa::kAvx512 && (g.C < 64 || g.M < 64)) return false;
  // Fewer multiplies only pay where 4x4 tiles fill the GEMMs' columns about
  // as well as 2x2 tiles do (7x7: 4 tiles padded to 16 lose to 16 tiles).
  // Zen 3, 1 thread, conv + bias + Relu with C = M: 16@160 to 256@14 16-34%
  // faster than F(2x2, 3x3) (32@80 the least: its transforms weigh most).
  return 4 * GemmCost(g, 4) < 3 * GemmCost(g, 2);
#else
  (void)g;
  return false;
#endif
}

Result<bool> ConvWinograd43(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w, const float* bias,
                            const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_WINOGRAD43_X86
  const FusedActivation none;
  return RunWinograd43(ctx, g, w, bias, epilogue ? epilogue->activation : none, Layout{false, x, z, y});
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
  return RuntimeError("Winograd F(4x4, 3x3) needs x86 (Winograd43Preferred said no)");
#endif
}

Result<bool> ConvWinograd43Blocked(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w,
                                   const float* bias, const FusedActivation& act, const float* z, float* y) {
#ifdef NEE_WINOGRAD43_X86
  return RunWinograd43(ctx, g, w, bias, act, Layout{true, x, z, y});
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)act, (void)z, (void)y;
  return RuntimeError("Winograd F(4x4, 3x3) needs x86 (Winograd43Preferred said no)");
#endif
}

}  // namespace nee::cpu
