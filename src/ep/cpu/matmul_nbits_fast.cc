// com.microsoft MatMulNBits (ops/matmul_nbits.h) on float32 with 4-bit
// weights, uint8 (packed) or absent zero points, on AVX2+FMA.
//
// The weights stay 4-bit: B, scales and zero points are read where they lie
// (the mapped model file); nothing is copied or unpacked per session, so a
// session holds the int4 bytes and no float copy. Each call dequantizes what
// it multiplies, 16 weights (8 bytes) at a time, each weight exactly as the
// reference does: q - zero point (exact), times the block's scale (one
// rounding). Two paths:
//  - few rows of A (at most kDirectRows; token-by-token decoding is M = 1):
//    each weight is dequantized in registers and multiplied into every row
//    at once (FMA), a few columns side by side; column groups are shared out
//    among the threads. No buffer, no packing (see "Direct path" below).
//  - more rows: the shared SGEMM (sgemm.h) with B produced by a packer that
//    dequantizes 16 k of 8 columns into registers and transposes them there
//    into SGEMM's packed panels; the bias is SGEMM's epilogue. SGEMM packs a
//    column block of B once per call, so each weight is dequantized once per
//    call. From 5 rows on it is as fast as the direct path (GPT-2's
//    768 x 3072: 0.46 vs 0.45 ms at 5 rows, 1 thread), and faster at 16.
// Each output element is summed over k in one fixed order whatever the
// thread count (the direct path: one accumulator per column and row; SGEMM
// never splits k), so results are bitwise independent of the threads. Float
// zero points, CPUs without AVX2 and the portable SGEMM switch
// (SgemmForcePortable) go to the reference kernel.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#include "ops/matmul_nbits.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kGroup = 16;      // weights dequantized at once (8 bytes)
constexpr int64_t kDirectRows = 8;  // rows of A up to which the direct path runs
constexpr int64_t kRowChunk = 8;    // rows the direct path multiplies each dequantized weight into

// The 16 weights at `bytes` (8 bytes of one block), minus the block's zero
// point `zp` (in every byte lane), times `scale`: k 0-7 in w0, 8-15 in w1.
__attribute__((target("avx2,fma"), always_inline)) inline void Dequantize16(const uint8_t* bytes, __m128i zp,
                                                                            __m256 scale, __m256* w0, __m256* w1) {
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
  const __m128i lo = _mm_and_si128(packed, nibble);                      // even k
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);   // odd k
  const __m128i q = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), zp);         // k 0..15, in [-15, 15]
  *w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale);
  *w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), scale);
}

// The zero point of (column n, block) as an integer (8 without zero points).
int ZeroPointOf(const MatMulNBitsGeometry& g, int64_t n, int64_t block) {
  return static_cast<int>(MatMulNBitsZeroPoint(g, n, block));
}

// ---- Direct path: Y[r, n] for R rows and C columns at a time ----
//
// Here the order of k within a 16-weight group is free (each column's sum is
// still formed in one fixed order), so a group is taken as its 8 low nibbles
// (even k) and its 8 high nibbles (odd k), and A is split the same way once
// per call. Each nibble becomes a float without a conversion: OR-ed into the
// mantissa of 2^23 it is 2^23 + q, and subtracting 2^23 + zp leaves q - zp
// exactly; times the scale, the reference's weight bit for bit. Per 16
// weights: one widening load, four bit operations, two subtractions, two
// multiplies and two FMAs per row, where unpacking them in order (as the
// SGEMM path's packer does) takes three more shuffles and two int-to-float
// conversions (GPT-2's 768 x 3072 at M = 1: 0.31 -> 0.26 ms).

constexpr int32_t kMagic = 0x4B000000;  // 2^23 as a float's bits

// The 16 weights at `bytes` as (q - zp) * scale: even k in w0, odd k in w1.
// `bias` is 2^23 + zp in every lane.
__attribute__((target("avx2,fma"), always_inline)) inline void DequantizeSplit16(const uint8_t* bytes, __m256 bias,
                                                                                 __m256 scale, __m256* w0,
                                                                                 __m256* w1) {
  const __m256i magic = _mm256_set1_epi32(kMagic);
  const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  const __m256i lo = _mm256_and_si256(_mm256_or_si256(x, magic), _mm256_set1_epi32(kMagic | 0x0F));
  const __m256i hi = _mm256_or_si256(_mm256_srli_epi32(x, 4), magic);
  *w0 = _mm256_mul_ps(_mm256_sub_ps(_mm256_castsi256_ps(lo), bias), scale);
  *w1 = _mm256_mul_ps(_mm256_sub_ps(_mm256_castsi256_ps(hi), bias), scale);
}

// A's rows with each group of 16 split into its even k then its odd k, the
// last group zero-padded: rows x (groups * 16) floats.
struct SplitRowsOfA {
  std::vector<float> data;
  int64_t stride = 0;  // floats per row
  const float* Group(int r, int64_t group) const { return data.data() + r * stride + group * kGroup; }
};

SplitRowsOfA SplitA(const MatMulNBitsGeometry& g) {
  const int64_t k = g.attrs.k, groups = (k + kGroup - 1) / kGroup;
  SplitRowsOfA split;
  split.stride = groups * kGroup;
  split.data.assign(static_cast<size_t>(g.rows * split.stride), 0.f);
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t p = 0; p < k; ++p) {
      const int64_t within = p % kGroup, at = p - within + (within % 2) * (kGroup / 2) + within / 2;
      split.data[static_cast<size_t>(r * split.stride + at)] = g.a[r * k + p];
    }
  return split;
}

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// acc[r][c] += the 16 weights of group `bytes[c]` times a[r]'s split group,
// the weights masked to `m0`/`m1` when `masked` (the padding past K).
template <int R, int C, bool masked = false>
__attribute__((target("avx2,fma"), always_inline)) inline void MultiplyGroup(const uint8_t* const* bytes,
                                                                            const __m256* bias, const __m256* scale,
                                                                            const float* const* a, int64_t offset,
                                                                            __m256 (&acc)[R][C],
                                                                            __m256 m0 = __m256(), __m256 m1 = __m256()) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    __m256 w0, w1;
    DequantizeSplit16(bytes[c], bias[c], scale[c], &w0, &w1);
    if (masked) {  // padding weights may be anything (an infinite scale): never summed
      w0 = _mm256_and_ps(w0, m0);
      w1 = _mm256_and_ps(w1, m1);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][c] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[r] + offset), acc[r][c]);
      acc[r][c] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a[r] + offset + 8), acc[r][c]);
    }
  }
}

// 2^23 + z for each 4-bit zero point z: a zero point's subtrahend, one load.
alignas(64) constexpr float kZeroPointBias[16] = {8388608.f, 8388609.f, 8388610.f, 8388611.f, 8388612.f, 8388613.f,
                                                 8388614.f, 8388615.f, 8388616.f, 8388617.f, 8388618.f, 8388619.f,
                                                 8388620.f, 8388621.f, 8388622.f, 8388623.f};

// Where columns [n0, n0 + C) keep their weights, scales and zero points.
template <int C>
struct Columns {
  const uint8_t* bytes[C];        // the next group's 8 bytes (a column's blocks are contiguous)
  const float* scales[C];
  const uint8_t* zero_points[C];  // packed; null: 8
  Columns(const MatMulNBitsGeometry& g, int64_t n0) {
    const MatMulNBitsAttrs& at = g.attrs;
    for (int c = 0; c < C; ++c) {
      bytes[c] = g.b + (n0 + c) * at.blocks * at.blob;
      scales[c] = g.scales + (n0 + c) * at.blocks;
      zero_points[c] = g.zp_packed ? g.zp_packed + (n0 + c) * at.zp_row : nullptr;
    }
  }
};

// The scale and 2^23 + zero point of block `block` of each column.
template <int C>
__attribute__((target("avx2,fma"), always_inline)) inline void StartBlock(const Columns<C>& cols, int64_t block,
                                                                         __m256* scale, __m256* bias) {
  const int shift = static_cast<int>(block & 1) * 4;
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    scale[c] = _mm256_broadcast_ss(cols.scales[c] + block);
    const int zp = cols.zero_points[c] ? (cols.zero_points[c][block / 2] >> shift) & 0x0F : 8;
    bias[c] = _mm256_broadcast_ss(kZeroPointBias + zp);
  }
}

// Columns [n0, n0 + C) for rows [0, R): each column's sum over k in one
// accumulator per row, group after group, so the result does not depend on
// C, R or which thread runs it.
template <int R, int C>
__attribute__((target("avx2,fma"))) void DirectColumns(const MatMulNBitsGeometry& g, const SplitRowsOfA& rows,
                                                       int64_t r0, int64_t n0, float* y) {
  const MatMulNBitsAttrs& at = g.attrs;
  const int64_t per_block = at.block_size / kGroup, full = at.k / kGroup;
  Columns<C> cols(g, n0);
  __m256 acc[R][C];
  __m256 scale[C] = {}, bias[C] = {};
  const float* a[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) a[r] = rows.Group(r0 + r, 0);
  // One loop over the groups, the block's scale and zero point reloaded at
  // its first group (a block is a power of two of groups), so the
  // accumulators never leave the registers.
  const int64_t block_mask = per_block - 1;
  const int block_shift = __builtin_ctzll(static_cast<unsigned long long>(per_block));
  for (int64_t group = 0; group < full; ++group) {
    if ((group & block_mask) == 0) StartBlock<C>(cols, group >> block_shift, scale, bias);
    MultiplyGroup<R, C>(cols.bytes, bias, scale, a, group * kGroup, acc);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) cols.bytes[c] += kGroup / 2;
  }
  if (at.k % kGroup) {  // the last, partial group (its bytes follow): padding weights masked
    StartBlock<C>(cols, full >> block_shift, scale, bias);
    const __m256 valid = _mm256_set1_ps(static_cast<float>(at.k % kGroup));
    const __m256 m0 = _mm256_cmp_ps(_mm256_setr_ps(0, 2, 4, 6, 8, 10, 12, 14), valid, _CMP_LT_OQ);
    const __m256 m1 = _mm256_cmp_ps(_mm256_setr_ps(1, 3, 5, 7, 9, 11, 13, 15), valid, _CMP_LT_OQ);
    MultiplyGroup<R, C, true>(cols.bytes, bias, scale, a, full * kGroup, acc, m0, m1);
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float v = HorizontalSum(acc[r][c]);
      if (g.bias) v += g.bias[n0 + c];
      y[(r0 + r) * at.n + n0 + c] = v;
    }
}

// Rows [r0, r0 + R) x columns [n_begin, n_end), C columns at a time (R x C
// accumulators and C scales and zero points stay in registers).
template <int R>
void RowChunk(const MatMulNBitsGeometry& g, const SplitRowsOfA& rows, int64_t r0, int64_t n_begin, int64_t n_end,
              float* y) {
  constexpr int C = R == 1 ? 4 : R <= 4 ? 2 : 1;
  int64_t n = n_begin;
  for (; n + C <= n_end; n += C) DirectColumns<R, C>(g, rows, r0, n, y);
  for (; n < n_end; ++n) DirectColumns<R, 1>(g, rows, r0, n, y);
}

// All rows x columns [c0, c1): four columns at a time (their bytes stay in
// L1 while each chunk of up to 8 rows reads them), rows in chunks of 8.
void DirectColumnRange(const MatMulNBitsGeometry& g, const SplitRowsOfA& rows, int64_t c0, int64_t c1, float* y) {
  constexpr int64_t kUnit = 4;
  for (int64_t n = c0; n < c1; n += kUnit) {
    const int64_t n1 = std::min(c1, n + kUnit);
    for (int64_t r0 = 0; r0 < g.rows; r0 += kRowChunk) {
      switch (std::min(kRowChunk, g.rows - r0)) {
        case 1: RowChunk<1>(g, rows, r0, n, n1, y); break;
        case 2: RowChunk<2>(g, rows, r0, n, n1, y); break;
        case 3: RowChunk<3>(g, rows, r0, n, n1, y); break;
        case 4: RowChunk<4>(g, rows, r0, n, n1, y); break;
        case 5: RowChunk<5>(g, rows, r0, n, n1, y); break;
        case 6: RowChunk<6>(g, rows, r0, n, n1, y); break;
        case 7: RowChunk<7>(g, rows, r0, n, n1, y); break;
        default: RowChunk<8>(g, rows, r0, n, n1, y); break;
      }
    }
  }
}

void DirectProduct(const MatMulNBitsGeometry& g, float* y, KernelContext& ctx) {
  const MatMulNBitsAttrs& at = g.attrs;
  const SplitRowsOfA rows = SplitA(g);
  // Units of 4 columns; chunks of at least ~64K multiply-adds, so small products stay on one thread.
  constexpr int64_t kUnit = 4;
  const int64_t units = (at.n + kUnit - 1) / kUnit;
  const int64_t min_units = std::max<int64_t>(1, (int64_t{1} << 16) / (kUnit * at.k * g.rows));
  ctx.ParallelFor(units, min_units, [&](int64_t begin, int64_t end) {
    DirectColumnRange(g, rows, begin * kUnit, std::min(at.n, end * kUnit), y);
  });
}

// ---- SGEMM path: B dequantized straight into packed panels ----

// r[j] = column j of the 8x8 tile whose rows are r[0..7], in place.
__attribute__((target("avx2,fma"), always_inline)) inline void Transpose8x8(__m256 (&r)[8]) {
  __m256 t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
    t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) r[j] = t[j];
}

// Rows [p0, p0 + kc) of columns [j, j + cols) (cols <= 8) of W into SGEMM's
// run layout at `out` (row p at out + p * 16; columns past `cols` zero): 16
// rows at a time, each column's 16 weights dequantized into two vectors,
// then two 8x8 transposes in registers turn them into rows.
__attribute__((target("avx2,fma"))) void PackEightColumns(const MatMulNBitsGeometry& g, int64_t p0, int64_t kc,
                                                          int64_t j, int64_t cols, float* out) {
  const MatMulNBitsAttrs& at = g.attrs;
  __m128i zp[8];
  __m256 scale[8];
  for (int64_t p = 0; p < kc; p += kGroup) {
    const int64_t k = p0 + p, block = k / at.block_size;  // p0 is a multiple of 16: a group is in one block
    if (p == 0 || k % at.block_size == 0)
      for (int64_t c = 0; c < cols; ++c) {
        zp[c] = _mm_set1_epi8(static_cast<char>(ZeroPointOf(g, j + c, block)));
        scale[c] = _mm256_set1_ps(g.scales[(j + c) * at.blocks + block]);
      }
    __m256 lo[8], hi[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      if (c < cols) {
        Dequantize16(g.b + (j + c) * at.blocks * at.blob + k / 2, zp[c], scale[c], &lo[c], &hi[c]);
      } else {
        lo[c] = hi[c] = _mm256_setzero_ps();
      }
    }
    Transpose8x8(lo);
    Transpose8x8(hi);
    const int64_t rows = std::min(kGroup, kc - p);
    float* dst = out + p * kSgemmPanelRun;
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      if (i < rows) _mm256_storeu_ps(dst + i * kSgemmPanelRun, lo[i]);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      if (i + 8 < rows) _mm256_storeu_ps(dst + (i + 8) * kSgemmPanelRun, hi[i]);
  }
}

void SgemmProduct(const MatMulNBitsGeometry& g, float* y, KernelContext& ctx) {
  const MatMulNBitsAttrs& at = g.attrs;
  const PackBFn pack = [&g](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
    for (int64_t q = 0; q * kSgemmPanelWidth < nc; ++q)
      for (int64_t h = 0; h < kSgemmPanelWidth / kSgemmPanelRun; ++h) {
        const int64_t first = q * kSgemmPanelWidth + h * kSgemmPanelRun;
        float* run = out + q * kc * kSgemmPanelWidth + h * kc * kSgemmPanelRun;
        for (int64_t half = 0; half < kSgemmPanelRun; half += 8) {
          const int64_t cols = std::clamp<int64_t>(nc - first - half, 0, 8);
          PackEightColumns(g, p0, kc, j0 + first + half, cols, run + half);
        }
      }
  };
  const float* bias = g.bias;
  const SgemmEpilogueFn add_bias = [bias](int64_t, int64_t j0, int64_t rows, int64_t cols, float* c, int64_t ldc) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] += bias[j0 + j];
  };
  Sgemm(g.rows, at.n, at.k, SgemmA({g.a, at.k, 1}), SgemmB(pack), 0.f, y, at.n, ctx.pool(), bias ? &add_bias : nullptr);
}

}  // namespace

Status MatMulNBitsFast(KernelContext& ctx) {
  Result<MatMulNBitsGeometry> geometry = MatMulNBitsGeometryOf(ctx);
  // The reference reports errors, and takes float zero points.
  if (!geometry.ok() || geometry->zp_float || !CpuHasAvx2Fma() || SgemmPortableForced()) return RunReference(ctx);
  const MatMulNBitsGeometry& g = geometry.value();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.out_dims));
  if (g.rows == 0) return Status::Ok();
  if (g.rows <= kDirectRows) DirectProduct(g, out.data<float>(), ctx);
  else SgemmProduct(g, out.data<float>(), ctx);
  return Status::Ok();
}

#else
Status MatMulNBitsFast(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
