// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (AVX-512 or AVX2).
//
// With d a 4x4 input tile, g a 3x3 filter and Y the 2x2 outputs they give,
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
// where the transforms only add, subtract and halve. Summed over input
// channels, the element-wise product becomes 16 independent matrix products,
// one per element e of the 4x4 transformed tile:
//   Out_e [M x tiles] = U_e [M x C] x V_e [C x tiles],
// U_e the transformed weights (packed once per session, SgemmPackedA) and V_e
// the transformed input. A task takes one image and a block of tile rows:
//  1. input transform of the block into 16 matrices V_e (sixteen tiles per
//     vector with AVX-512, eight with AVX2: a tile row's tiles are
//     consecutive columns of V_e), written
//     straight into SGEMM's packed B layout;
//  2. the 16 SGEMMs;
//  3. output transform, bias and activation, written as NCHW rows.
// Blocks are sized so that V and Out stay within about 1 MiB (L2).
//
// Numerics: the transforms reassociate the sums, so results differ from the
// direct convolution by rounding (see the tests for the measured bound);
// they do not depend on the thread count (blocks depend on the geometry, and
// SGEMM is deterministic).
#include "ep/cpu/conv_winograd.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/cpu/conv_winograd43.h"
#include "ep/cpu/conv_winograd_common.h"
#include "ep/cpu/no_fp_contract.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/simd_x86.h"
#define NEE_WINOGRAD_X86 1
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

constexpr int kElems = 16;             // transformed tile elements: 16 GEMMs
constexpr int64_t kBlockFloats = 1 << 19;  // V and Out of a block: about 2 MiB

// The transformed weights: U_e = (G g Gᵀ)[e] for every (output, input)
// channel pair, packed as SGEMM's A (M x C), one matrix per element e.
struct WinogradWeights {
  std::vector<SgemmPackedA> u;
};

// G g Gᵀ of one 3x3 filter (row-major 4x4, element e at u[e * stride]),
// G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]. Written for any T with + - and * by a
// float: a float, or eight of them (TransformEightFilters), the same bits.
template <typename T>
void TransformTaps(const T* g, T (&u)[kElems]) {
  T p[4][3];  // G g
  for (int c = 0; c < 3; ++c) {
    p[0][c] = g[c];
    p[1][c] = (g[c] + g[3 + c] + g[6 + c]) * 0.5f;
    p[2][c] = (g[c] - g[3 + c] + g[6 + c]) * 0.5f;
    p[3][c] = g[6 + c];
  }
  for (int r = 0; r < 4; ++r) {
    u[4 * r + 0] = p[r][0];
    u[4 * r + 1] = (p[r][0] + p[r][1] + p[r][2]) * 0.5f;
    u[4 * r + 2] = (p[r][0] - p[r][1] + p[r][2]) * 0.5f;
    u[4 * r + 3] = p[r][2];
  }
}

void TransformFilter(const float* g, float* u, int64_t stride) {
  float tile[kElems];
  TransformTaps(g, tile);
  for (int e = 0; e < kElems; ++e) u[e * stride] = tile[e];
}

#ifdef NEE_WINOGRAD_X86
// Eight float lanes (GCC's vector extension): TransformTaps on them is
// TransformFilter on eight filters, operation for operation, with no
// product by ½ contracted into the sum that uses it.
typedef float Lanes8 __attribute__((vector_size(32)));

NEE_NO_FP_CONTRACT __attribute__((target("avx2,fma"))) void TransformEightFilters(const float* w, float* u,
                                                                                int64_t stride) {
  float taps[9][8];
  winograd_common::TransposeEightFilters(w, taps);
  Lanes8 g[9], tile[kElems];
  for (int k = 0; k < 9; ++k) std::memcpy(&g[k], taps[k], sizeof(Lanes8));
  TransformTaps(g, tile);
  for (int e = 0; e < kElems; ++e) std::memcpy(u + e * stride, &tile[e], sizeof(Lanes8));
}
constexpr winograd_common::FilterTransform kEightFilters = TransformEightFilters;
#else
constexpr winograd_common::FilterTransform kEightFilters = nullptr;
#endif

std::shared_ptr<const WinogradWeights> PackWeights(const Winograd3x3& g, const float* w, const KernelContext& ctx) {
  auto packed = std::make_shared<WinogradWeights>();
  packed->u = winograd_common::TransformFilters(kElems, g.M, g.C, w, kEightFilters, TransformFilter, ctx);
  return packed;
}

struct Tiling {
  int64_t tiles_x, tiles_y, blocks;  // blocks per image, tile rows shared out evenly
  int64_t columns(const Block& b) const { return (b.ty1 - b.ty0) * tiles_x; }
  int64_t first_row(int64_t block) const { return block * tiles_y / blocks; }
};

// Blocks of at most the tile rows whose V and Out fit kBlockFloats. With
// several threads, enough blocks that every thread gets the same number of
// tile rows where the image allows (56x56: eight blocks of 3 or 4 rows for
// two threads, not seven of 4, which left one thread a block behind). Which
// tiles a block holds never changes a result: each GEMM sums over the
// channels whatever its columns. An image of fewer blocks than threads is
// cut into one a thread where the weights are small (EachThreadReadsWeights).
Tiling TilingOf(const Winograd3x3& g, int threads) {
  Tiling t;
  t.tiles_x = CeilDiv(g.OW, 2);
  t.tiles_y = CeilDiv(g.OH, 2);
  const int64_t per_row = kElems * (g.C + g.M) * t.tiles_x;
  const int64_t rows_per_block = std::clamp<int64_t>(kBlockFloats / std::max<int64_t>(per_row, 1), 1, t.tiles_y);
  t.blocks = CeilDiv(t.tiles_y, rows_per_block);
  const int64_t tasks = g.N * t.blocks;
  if (threads > 1 && tasks >= threads && tasks % threads != 0)
    t.blocks = std::min(t.tiles_y, CeilDiv(CeilDiv(tasks, threads) * threads, g.N));
  if (threads > 1 && tasks < threads && winograd_common::EachThreadReadsWeights(kElems, g.M, g.C))
    t.blocks = std::min(t.tiles_y, CeilDiv(threads, g.N));
  return t;
}

#ifdef NEE_WINOGRAD_X86
using winograd_common::InputPlanes;
using winograd_common::kLayoutBlock;
using winograd_common::Layout;
using winograd_common::OutputPlanes;

#define NEE_AVX512 __attribute__((target("avx512f")))

NEE_AVX512 inline __mmask16 LanesBelow(int64_t k) {
  return k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(k, 0)) - 1u);
}

// Lanes j of a 16-float window starting at column `start` that fall in [0, W).
NEE_AVX512 inline __mmask16 ColumnsInside(int64_t start, int64_t width) {
  const int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>(16, width - start);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(LanesBelow(hi) & ~LanesBelow(lo));
}

// The lanes of the four 16-float windows a tile row's input row is read
// through (columns start, start + 16, start + 2, start + 18) inside [0, W).
struct WindowMasks {
  __mmask16 m[4];
  WindowMasks(int64_t start, int64_t width) {
    m[0] = ColumnsInside(start, width);
    m[1] = ColumnsInside(start + 16, width);
    m[2] = ColumnsInside(start + 2, width);
    m[3] = ColumnsInside(start + 18, width);
  }
};

// Columns start, start+2, ..., start+30 (evens) and start+1, ..., start+31
// (odds) of an input row, zero outside [0, W) (lanes outside lo_mask/hi_mask).
__attribute__((target("avx512f"), always_inline)) inline void EvenOdd(const float* row, int64_t start,
                                                                       __mmask16 lo_mask, __mmask16 hi_mask,
                                                                       __m512& even, __m512& odd) {
  const __m512 lo = _mm512_maskz_loadu_ps(lo_mask, row + start);
  const __m512 hi = _mm512_maskz_loadu_ps(hi_mask, row + start + 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  even = _mm512_permutex2var_ps(lo, evens, hi);
  odd = _mm512_permutex2var_ps(lo, odds, hi);
}

// Where lanes [0, k) of a vector go as V_e[c, t0 .. t0 + k) (the same place
// in every V_e): one run, or two when the columns cross from one run of
// kSgemmPanelRun columns of a packed panel into the next.
struct PackedSlot {
  int64_t first, second;  // float offsets of lane 0 and (shifted back) of lane `split`
  __mmask16 first_lanes, second_lanes;

  PackedSlot(const PackedV& pv, int64_t c, int64_t t0, int64_t k) {
    first = SgemmPackedBIndex(pv.c, pv.cols, c, t0);
    const int64_t split = kSgemmPanelRun - t0 % kSgemmPanelRun;
    if (split >= k) {
      first_lanes = LanesBelow(k);
      second_lanes = 0;
      second = first;
      return;
    }
    first_lanes = LanesBelow(split);
    second_lanes = static_cast<__mmask16>(LanesBelow(k) & ~LanesBelow(split));
    // Lane `split` is column 0 of the next run: its base shifted back by `split`.
    second = SgemmPackedBIndex(pv.c, pv.cols, c, t0 + split) - split;
  }
};

__attribute__((target("avx512f"), always_inline)) inline void StorePacked(const PackedV& pv, const PackedSlot& slot,
                                                                           int e, __m512 v) {
  float* m = pv.matrix(e);
  _mm512_mask_storeu_ps(m + slot.first, slot.first_lanes, v);
  if (slot.second_lanes) _mm512_mask_storeu_ps(m + slot.second, slot.second_lanes, v);
}

// Bᵀ d B for sixteen tiles of one tile row (tiles tx0.., k of them) of
// channel c, stored as columns t0.. of row c of every V_e.
NEE_AVX512 void InputTiles(const Winograd3x3& g, const float* plane, int64_t ty, int64_t tx0, int64_t k,
                           const PackedV& pv, int64_t c, int64_t t0) {
  __m512 d[4][4];
  const int64_t col = 2 * tx0 - g.pw;
  const WindowMasks masks(col, g.W);
  #pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const int64_t iy = 2 * ty - g.ph + r;
    if (iy < 0 || iy >= g.H) {
      d[r][0] = d[r][1] = d[r][2] = d[r][3] = _mm512_setzero_ps();
      continue;
    }
    const float* row = plane + iy * g.W;
    EvenOdd(row, col, masks.m[0], masks.m[1], d[r][0], d[r][1]);
    EvenOdd(row, col + 2, masks.m[2], masks.m[3], d[r][2], d[r][3]);
  }
  __m512 t[4][4];  // Bᵀ d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
  #pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    t[0][c] = _mm512_sub_ps(d[0][c], d[2][c]);
    t[1][c] = _mm512_add_ps(d[1][c], d[2][c]);
    t[2][c] = _mm512_sub_ps(d[2][c], d[1][c]);
    t[3][c] = _mm512_sub_ps(d[1][c], d[3][c]);
  }
  const PackedSlot slot(pv, c, t0, k);
  #pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {  // (Bᵀ d) B: the same on columns
    StorePacked(pv, slot, 4 * r + 0, _mm512_sub_ps(t[r][0], t[r][2]));
    StorePacked(pv, slot, 4 * r + 1, _mm512_add_ps(t[r][1], t[r][2]));
    StorePacked(pv, slot, 4 * r + 2, _mm512_sub_ps(t[r][2], t[r][1]));
    StorePacked(pv, slot, 4 * r + 3, _mm512_sub_ps(t[r][1], t[r][3]));
  }
}

// One vector of tiles of the input transform: Bᵀ d B for k <= lanes tiles of
// one tile row (tiles tx0..) of channel c, stored at columns t0.. of row c
// of every V_e.
using InputTilesFn = void (*)(const Winograd3x3& g, const float* plane, int64_t ty, int64_t tx0, int64_t k,
                              const PackedV& pv, int64_t c, int64_t t0);

// Every V_e of the block (a tile row's tiles are consecutive columns).
// Vectors of tiles start at columns that are multiples of kLanes (a tile
// row's first vector may be short): a vector then never straddles two of the
// packed panels' runs of 16 columns, where its store would be two masked
// stores (slow on AMD: with runs of 16 instead of 32 columns, straddling
// vectors made ResNet-50's 3x3 convs 5% slower).
// Channel c's plane is planes + (c - c0) * plane_stride (g.H rows of g.W).
template <InputTilesFn Tiles, int64_t kLanes>
void InputTransform(const Winograd3x3& g, const Tiling& t, const Block& b, const float* planes, int64_t plane_stride,
                    const PackedV& pv, int64_t c0, int64_t c1) {
  static_assert(kSgemmPanelRun % kLanes == 0, "aligned vectors stay within a run");
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = planes + (c - c0) * plane_stride;
    for (int64_t ty = b.ty0; ty < b.ty1; ++ty) {
      const int64_t row_start = (ty - b.ty0) * t.tiles_x;
      // Aligned unless that takes one more vector than the row needs.
      const bool aligned = CeilDiv(row_start % kLanes + t.tiles_x, kLanes) == CeilDiv(t.tiles_x, kLanes);
      for (int64_t tx0 = 0, k = 0; tx0 < t.tiles_x; tx0 += k) {
        k = std::min(aligned ? kLanes - (row_start + tx0) % kLanes : kLanes, t.tiles_x - tx0);
        Tiles(g, plane, ty, tx0, k, pv, c, row_start + tx0);
      }
    }
  }
}

// Aᵀ Out A (+ bias, activation K) for sixteen tiles of one tile row of output
// channel m; element e of the tiles is at out[e * ldo]. Writes output rows
// 2ty and 2ty+1 (those inside), columns 2tx0...
template <FusedActivation::Kind K>
NEE_AVX512 void OutputTiles(const Winograd3x3& g, const float* out, int64_t ldo, int64_t k, float bias_value,
                            const FusedActivation& act, int64_t ty, int64_t tx0, float* plane) {
  const __mmask16 mask = LanesBelow(k);
  const __m512 bias = _mm512_set1_ps(bias_value);
  __m512 m[16];
  #pragma GCC unroll 16
  for (int e = 0; e < kElems; ++e) m[e] = _mm512_maskz_loadu_ps(mask, out + e * ldo);
  __m512 s[2][4];  // Aᵀ Out: rows m0 + m1 + m2, m1 - m2 - m3
  #pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) {
    s[0][c] = _mm512_add_ps(_mm512_add_ps(m[c], m[4 + c]), m[8 + c]);
    s[1][c] = _mm512_sub_ps(_mm512_sub_ps(m[4 + c], m[8 + c]), m[12 + c]);
  }
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const int64_t x0 = 2 * tx0;
  #pragma GCC unroll 16
  for (int r = 0; r < 2; ++r) {
    const int64_t oy = 2 * ty + r;
    if (oy >= g.OH) break;
    __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), s[r][2]), bias);
    __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[r][1], s[r][2]), s[r][3]), bias);
    y0 = Activate16<K>(act, y0);
    y1 = Activate16<K>(act, y1);
    float* row = plane + oy * g.OW + x0;
    _mm512_mask_storeu_ps(row, LanesBelow(g.OW - x0), _mm512_permutex2var_ps(y0, lo_idx, y1));
    _mm512_mask_storeu_ps(row + 16, LanesBelow(g.OW - x0 - 16), _mm512_permutex2var_ps(y0, hi_idx, y1));
  }
}

// ---- AVX2: eight tiles per vector, the same arithmetic in the same order --

#define NEE_AVX2 __attribute__((target("avx2,fma")))

// Lanes j of an 8-float window starting at column `start` that fall in [0, W).
NEE_AVX2 inline __m256i ColumnsInside8(int64_t start, int64_t width) {
  return LanesBetween8(-start, width - start);
}

// Columns start, start+2, ..., start+14 (evens) and start+1, ..., start+15
// (odds) of an input row, zero outside [0, W). Masked-off lanes are not
// read. kInside: all sixteen columns are inside the row, read with plain
// loads (AVX2's masked loads and stores are slow on some CPUs).
template <bool kInside>
__attribute__((target("avx2,fma"), always_inline)) inline void EvenOdd8(const float* row, int64_t start,
                                                                         __m256i lo_mask, __m256i hi_mask,
                                                                         __m256& even, __m256& odd) {
  const __m256 lo = kInside ? _mm256_loadu_ps(row + start) : _mm256_maskload_ps(row + start, lo_mask);
  const __m256 hi = kInside ? _mm256_loadu_ps(row + start + 8) : _mm256_maskload_ps(row + start + 8, hi_mask);
  // shuffle_ps works within 128-bit halves: [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6],
  // then the 64-bit pairs are put in order.
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

// PackedSlot for eight lanes; `whole`: all eight go to one run, stored with
// a plain store.
struct PackedSlot8 {
  int64_t first, second;
  __m256i first_lanes, second_lanes;
  bool whole, split;

  NEE_AVX2 PackedSlot8(const PackedV& pv, int64_t c, int64_t t0, int64_t k) {
    first = SgemmPackedBIndex(pv.c, pv.cols, c, t0);
    const int64_t at = kSgemmPanelRun - t0 % kSgemmPanelRun;
    split = at < k;
    whole = k == 8 && !split;
    first_lanes = LanesBetween8(0, std::min(at, k));
    second_lanes = LanesBetween8(at, k);
    second = split ? SgemmPackedBIndex(pv.c, pv.cols, c, t0 + at) - at : first;
  }
};

__attribute__((target("avx2,fma"), always_inline)) inline void StorePacked8(const PackedV& pv, const PackedSlot8& slot,
                                                                             int e, __m256 v) {
  float* m = pv.matrix(e);
  if (slot.whole) return _mm256_storeu_ps(m + slot.first, v);
  _mm256_maskstore_ps(m + slot.first, slot.first_lanes, v);
  if (slot.split) _mm256_maskstore_ps(m + slot.second, slot.second_lanes, v);
}

template <bool kInside>
__attribute__((target("avx2,fma"), always_inline)) inline void InputTilesAvx2Body(
    const Winograd3x3& g, const float* plane, int64_t ty, int64_t col, const PackedSlot8& slot, const PackedV& pv) {
  __m256 d[4][4];
  __m256i m0{}, m1{}, m2{}, m3{};
  if (!kInside) {
    m0 = ColumnsInside8(col, g.W), m1 = ColumnsInside8(col + 8, g.W);
    m2 = ColumnsInside8(col + 2, g.W), m3 = ColumnsInside8(col + 10, g.W);
  }
  #pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const int64_t iy = 2 * ty - g.ph + r;
    if (iy < 0 || iy >= g.H) {
      d[r][0] = d[r][1] = d[r][2] = d[r][3] = _mm256_setzero_ps();
      continue;
    }
    const float* row = plane + iy * g.W;
    EvenOdd8<kInside>(row, col, m0, m1, d[r][0], d[r][1]);
    EvenOdd8<kInside>(row, col + 2, m2, m3, d[r][2], d[r][3]);
  }
  __m256 t[4][4];  // Bᵀ d, as in InputTiles
  #pragma GCC unroll 4
  for (int c4 = 0; c4 < 4; ++c4) {
    t[0][c4] = _mm256_sub_ps(d[0][c4], d[2][c4]);
    t[1][c4] = _mm256_add_ps(d[1][c4], d[2][c4]);
    t[2][c4] = _mm256_sub_ps(d[2][c4], d[1][c4]);
    t[3][c4] = _mm256_sub_ps(d[1][c4], d[3][c4]);
  }
  #pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    StorePacked8(pv, slot, 4 * r + 0, _mm256_sub_ps(t[r][0], t[r][2]));
    StorePacked8(pv, slot, 4 * r + 1, _mm256_add_ps(t[r][1], t[r][2]));
    StorePacked8(pv, slot, 4 * r + 2, _mm256_sub_ps(t[r][2], t[r][1]));
    StorePacked8(pv, slot, 4 * r + 3, _mm256_sub_ps(t[r][1], t[r][3]));
  }
}

NEE_AVX2 void InputTilesAvx2(const Winograd3x3& g, const float* plane, int64_t ty, int64_t tx0, int64_t k,
                             const PackedV& pv, int64_t c, int64_t t0) {
  const int64_t col = 2 * tx0 - g.pw;
  const PackedSlot8 slot(pv, c, t0, k);
  if (col >= 0 && col + 18 <= g.W) return InputTilesAvx2Body<true>(g, plane, ty, col, slot, pv);
  InputTilesAvx2Body<false>(g, plane, ty, col, slot, pv);
}

// The first k <= 8 floats at p (mask: lanes below k), the rest zero.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 LoadFirst8(const float* p, int64_t k, __m256i mask) {
  return k == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

template <FusedActivation::Kind K>
NEE_AVX2 void OutputTilesAvx2(const Winograd3x3& g, const float* out, int64_t ldo, int64_t k, float bias_value,
                              const FusedActivation& act, int64_t ty, int64_t tx0, float* plane) {
  const __m256i mask = LanesBetween8(0, k);
  const __m256 bias = _mm256_set1_ps(bias_value);
  __m256 s[2][4];  // Aᵀ Out, as in OutputTiles; one column of Out at a time
  #pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256 m0 = LoadFirst8(out + c * ldo, k, mask), m1 = LoadFirst8(out + (4 + c) * ldo, k, mask);
    const __m256 m2 = LoadFirst8(out + (8 + c) * ldo, k, mask), m3 = LoadFirst8(out + (12 + c) * ldo, k, mask);
    s[0][c] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s[1][c] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  const int64_t x0 = 2 * tx0;
  #pragma GCC unroll 2
  for (int r = 0; r < 2; ++r) {
    const int64_t oy = 2 * ty + r;
    if (oy >= g.OH) break;
    __m256 y0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[r][0], s[r][1]), s[r][2]), bias);
    __m256 y1 = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[r][1], s[r][2]), s[r][3]), bias);
    y0 = Activate8<K>(act, y0);
    y1 = Activate8<K>(act, y1);
    // Interleave: [y0_0 y1_0 ... y0_3 y1_3] and [y0_4 y1_4 ... y0_7 y1_7].
    const __m256 lo = _mm256_unpacklo_ps(y0, y1), hi = _mm256_unpackhi_ps(y0, y1);
    float* row = plane + oy * g.OW + x0;
    const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
    if (x0 + 16 <= g.OW) {
      _mm256_storeu_ps(row, first);
      _mm256_storeu_ps(row + 8, second);
    } else {
      _mm256_maskstore_ps(row, LanesBetween8(0, g.OW - x0), first);
      _mm256_maskstore_ps(row + 8, LanesBetween8(0, g.OW - x0 - 8), second);
    }
  }
}

// One vector of tiles of the output transform: Aᵀ Out A + bias, activation,
// for k <= lanes tiles of one tile row (tiles tx0..) of one output channel.
using OutputTilesFn = void (*)(const Winograd3x3& g, const float* out, int64_t ldo, int64_t k, float bias,
                               const FusedActivation& act, int64_t ty, int64_t tx0, float* plane);

// Output channel m's plane is planes + (m - m0) * plane_stride (g.OH rows of g.OW).
template <OutputTilesFn Tiles, int64_t kLanes>
void OutputTransform(const Winograd3x3& g, const Tiling& t, const Block& b, const float* out, const float* bias,
                     const FusedActivation& act, float* planes, int64_t plane_stride, int64_t m0, int64_t m1) {
  const int64_t cols = t.columns(b), stride_e = g.M * cols;
  for (int64_t m = m0; m < m1; ++m) {
    const float bv = bias ? bias[m] : 0.f;
    float* plane = planes + (m - m0) * plane_stride;
    for (int64_t ty = b.ty0; ty < b.ty1; ++ty)
      for (int64_t tx0 = 0; tx0 < t.tiles_x; tx0 += kLanes)
        Tiles(g, out + m * cols + (ty - b.ty0) * t.tiles_x + tx0, stride_e, std::min(kLanes, t.tiles_x - tx0), bv,
              act, ty, tx0, plane);
  }
}

using OutputTransformFn = void (*)(const Winograd3x3&, const Tiling&, const Block&, const float*, const float*,
                                   const FusedActivation&, float*, int64_t, int64_t, int64_t);
using InputTransformFn = void (*)(const Winograd3x3&, const Tiling&, const Block&, const float*, int64_t,
                                  const PackedV&, int64_t, int64_t);

// The transforms for the active instruction set: the output transform with
// the activation in registers, or null when the activation runs after the
// block (a residual to add first).
struct Transforms {
  InputTransformFn input;
  OutputTransformFn output;
};

// (The residual is added before the activation, so with one the output
// transform leaves both to a pass over the block's rows.)
Transforms TransformsFor(const FusedActivation& act, bool has_residual) {
  using Kind = FusedActivation::Kind;
  const Kind kind = has_residual ? Kind::kNone : act.kind;
  if (SgemmActiveIsa() == SgemmIsa::kAvx512) {
    OutputTransformFn output = ForActivation16(
        kind, [](auto k) -> OutputTransformFn { return OutputTransform<OutputTiles<decltype(k)::value>, 16>; },
        OutputTransformFn{nullptr});
    return {InputTransform<InputTiles, 16>, has_residual ? nullptr : output};
  }
  OutputTransformFn output = ForActivation8(
      kind, [](auto k) -> OutputTransformFn { return OutputTransform<OutputTilesAvx2<decltype(k)::value>, 8>; });
  return {InputTransform<InputTilesAvx2, 8>, has_residual ? nullptr : output};
}

// One block: input transform, the 16 GEMMs, output transform. With `ctx`
// (when blocks are fewer than threads) each phase is shared between the
// threads: input channels, then the GEMMs one per task, then output
// channels (blocked: in whole blocks); the arithmetic is the same either way.
void RunBlock(const Winograd3x3& g, const Tiling& t, const Block& b, const WinogradWeights& weights,
              const float* bias, const FusedActivation& act, const Layout& io, const KernelContext* ctx) {
  const int64_t cols = t.columns(b);
  float* v = BlockScratch(kElems * (g.C * PackedV::RoundUp32(cols) + g.M * cols));
  const PackedV pv{v, g.C, cols};
  float* out = v + kElems * pv.matrix_floats();
  ZeroPanelPadding(pv, kElems);
  const FusedActivation none;
  const Transforms transforms = TransformsFor(act, io.z != nullptr);
  const int64_t unit = io.blocked ? kLayoutBlock : 1;  // channels a share holds a multiple of
  Split(ctx, g.C / unit, [&](int64_t c0, int64_t c1) {
    InputPlanes(g, 2, b, io, c0 * unit, c1 * unit, [&](const Winograd3x3& rows, const float* planes,
                                                         int64_t stride, int64_t p0, int64_t p1) {
      transforms.input(rows, t, b, planes, stride, pv, p0, p1);
    });
  });
  auto gemm = [&](int64_t e) {
    Sgemm(g.M, cols, g.C, SgemmA(weights.u[e]), SgemmB::Prepacked(pv.matrix(static_cast<int>(e))), 0.f,
          out + e * g.M * cols, cols, nullptr);
  };
  if (ctx) {
    ParallelTasks(*ctx, kElems, gemm);
  } else {
    for (int e = 0; e < kElems; ++e) gemm(e);
  }
  const OutputTransformFn in_registers = transforms.output;
  const OutputTransformFn output = in_registers ? in_registers : TransformsFor(none, false).output;
  Split(ctx, g.M / unit, [&](int64_t m0, int64_t m1) {
    OutputPlanes(g, 2, b, io, act, !in_registers, m0 * unit, m1 * unit,
                 [&](const Winograd3x3& rows, const Block& rb, float* planes, int64_t stride, int64_t p0, int64_t p1) {
                   output(rows, t, rb, out, bias, act, planes, stride, p0, p1);
                 });
  });
}

// The F(2x2, 3x3) convolution over every block, in either layout.
Status RunWinograd(KernelContext& ctx, const Winograd3x3& g, const float* w, const float* bias,
                   const FusedActivation& act, const Layout& io) {
  NEE_ASSIGN_OR_RETURN(const std::shared_ptr<const WinogradWeights> weights,
                       TransformedWeights<WinogradWeights>(ctx, g.M, g.C, [&] { return PackWeights(g, w, ctx); }));
  const Tiling t = TilingOf(g, NumThreads(ctx));
  RunBlocks(ctx, g.N, t, [&](const Block& b, const KernelContext* shared) {
    RunBlock(g, t, b, *weights, bias, act, io, shared);
    return true;
  });
  return Status::Ok();
}
#endif  // NEE_WINOGRAD_X86

}  // namespace

bool WinogradApplies(const KernelContext& ctx, const Winograd3x3& g) {
#ifdef NEE_WINOGRAD_X86
  // Below 16 channels on either side the 16 GEMMs are too thin to beat im2col.
  (void)ctx;
  const SgemmIsa isa = SgemmActiveIsa();
  return (isa == SgemmIsa::kAvx512 || isa == SgemmIsa::kAvx2) && !SgemmPortableForced() && g.C >= 16 &&
         g.M >= 16 && g.OH >= 2 && g.OW >= 2;
#else
  (void)ctx, (void)g;
  return false;
#endif
}

Status ConvWinograd(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w, const float* bias,
                    const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_WINOGRAD_X86
  // F(4x4, 3x3) on AVX2 where its larger tiles still fill the GEMMs; it
  // declines inputs that are NaN or infinite, which F(2x2, 3x3) keeps to
  // the outputs whose windows hold them.
  if (Winograd43Preferred(g)) {
    NEE_ASSIGN_OR_RETURN(const bool done, ConvWinograd43(ctx, g, x, w, bias, epilogue, z, y));
    if (done) return Status::Ok();
  }
  const FusedActivation none;
  return RunWinograd(ctx, g, w, bias, epilogue ? epilogue->activation : none, Layout{false, x, z, y});
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
  return RuntimeError("Winograd convolution needs x86 (WinogradApplies said no)");
#endif
}

bool WinogradBlockedApplies(const KernelContext& ctx, const Winograd3x3& g) {
#ifdef NEE_WINOGRAD_X86
  // AVX2 and AVX-512 (WinogradApplies): the layout pass keeps 3x3 stride-1
  // convs inside blocked runs on both (opt/layout_blocked.cc).
  return WinogradApplies(ctx, g) && g.C % kLayoutBlock == 0 && g.M % kLayoutBlock == 0;
#else
  (void)ctx, (void)g;
  return false;
#endif
}

Status ConvWinogradBlocked(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w,
                           const float* bias, const FusedActivation& act, const float* z, float* y) {
#ifdef NEE_WINOGRAD_X86
  if (Winograd43Preferred(g)) {  // as ConvWinograd
    NEE_ASSIGN_OR_RETURN(const bool done, ConvWinograd43Blocked(ctx, g, x, w, bias, act, z, y));
    if (done) return Status::Ok();
  }
  return RunWinograd(ctx, g, w, bias, act, Layout{true, x, z, y});
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)act, (void)z, (void)y;
  return RuntimeError("Winograd convolution needs x86 (WinogradBlockedApplies said no)");
#endif
}

}  // namespace nee::cpu
