// com.microsoft MatMulNBits (ops/matmul_nbits.h) on float32 with 4-bit
// weights, uint8 (packed) or absent zero points, on AVX2+FMA.
//
// The weights stay 4-bit: B, scales and zero points are read where they lie
// (the mapped model file), nothing is copied or unpacked per session, so a
// session holds the int4 bytes and no float copy. Each call dequantizes what
// it multiplies, 16 weights at a time (8 bytes: the low nibbles are the even
// k, the high ones the odd, interleaved back into order with one byte unpack;
// q - zero point in 8-bit lanes, exact; then one float multiply by the
// block's scale, so every dequantized weight equals the reference's
// (q - zp) * scale bit for bit). Two paths:
//  - few rows of A (at most kDirectRows: token-by-token decoding, M = 1):
//    the product is bound by reading B, so each weight is dequantized in
//    registers and multiplied into every row at once (FMA), a few columns
//    side by side so their loads and conversions overlap; column groups are
//    shared out among the threads. No buffer, no packing.
//  - more rows: the shared SGEMM (sgemm.h) with B produced by a packer that
//    dequantizes a k-block of 16 columns into a small column-major scratch
//    and transposes it, 8x8 at a time, into SGEMM's packed panels; the bias
//    is SGEMM's epilogue. SGEMM packs a column block of B once per call (not
//    per row block), so each weight is dequantized once per call.
// Each output element is summed over k in one fixed order whatever the
// thread count (the direct path: one column per accumulator; SGEMM never
// splits k), so results are bitwise independent of the threads. Float zero
// points, CPUs without AVX2 and the portable SGEMM switch
// (SgemmForcePortable) go to the reference kernel.
#include <algorithm>
#include <cstring>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#include "ops/matmul_nbits.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kGroup = 16;       // weights dequantized at once (8 bytes)
constexpr int64_t kDirectRows = 4;   // rows of A up to which the direct path runs

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

// Lanes of a 16-weight group at k0 that lie before K, as two masks (k0..k0+7, k0+8..k0+15).
__attribute__((target("avx2,fma"))) inline void TailMasks(int64_t valid, __m256* m0, __m256* m1) {
  *m0 = _mm256_castsi256_ps(LanesBetween8(0, valid));
  *m1 = _mm256_castsi256_ps(LanesBetween8(0, valid - 8));
}

// ---- Direct path: Y[r, n] for R rows and C columns at a time ----

// The rows of A with their last partial group (K % 16 values) copied into a
// zero-padded group, so every group is read with full-width loads.
struct RowsOfA {
  const float* a;
  int64_t k;
  int64_t full_groups;     // K / 16
  const float* tail;       // kDirectRows x 16, zero past K % 16
  const float* Group(int r, int64_t group) const {
    return group < full_groups ? a + r * k + group * kGroup : tail + r * kGroup;
  }
};

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Columns [n0, n0 + C) for rows [0, R): each column's sum over k in one
// accumulator per row, k in order of 16-weight groups, so the result does not
// depend on C, R or which thread runs it.
template <int R, int C>
__attribute__((target("avx2,fma"))) void DirectColumns(const MatMulNBitsGeometry& g, const RowsOfA& rows, int64_t n0,
                                                       float* y) {
  const MatMulNBitsAttrs& at = g.attrs;
  const int64_t groups = (at.k + kGroup - 1) / kGroup, groups_per_block = at.block_size / kGroup;
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const uint8_t* column[C];
  for (int c = 0; c < C; ++c) column[c] = g.b + (n0 + c) * at.blocks * at.blob;
  __m256 scale[C];
  __m128i zp[C];
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t block = group / groups_per_block;
    if (group % groups_per_block == 0) {
      for (int c = 0; c < C; ++c) {
        scale[c] = _mm256_set1_ps(g.scales[(n0 + c) * at.blocks + block]);
        zp[c] = _mm_set1_epi8(static_cast<char>(ZeroPointOf(g, n0 + c, block)));
      }
    }
    const int64_t offset = block * at.blob + (group % groups_per_block) * (kGroup / 2);
    const bool partial = group == rows.full_groups;  // the last group, past K
    __m256 m0, m1;
    if (partial) TailMasks(at.k - group * kGroup, &m0, &m1);
    for (int c = 0; c < C; ++c) {
      __m256 w0, w1;
      Dequantize16(column[c] + offset, zp[c], scale[c], &w0, &w1);
      if (partial) {  // padding weights may be anything (an infinite scale): never summed
        w0 = _mm256_and_ps(w0, m0);
        w1 = _mm256_and_ps(w1, m1);
      }
      for (int r = 0; r < R; ++r) {
        const float* a = rows.Group(r, group);
        acc[r][c] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a), acc[r][c]);
        acc[r][c] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a + 8), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float v = HorizontalSum(acc[r][c]);
      if (g.bias) v += g.bias[n0 + c];
      y[r * at.n + n0 + c] = v;
    }
}

template <int R>
void DirectRows(const MatMulNBitsGeometry& g, const RowsOfA& rows, int64_t col_begin, int64_t col_end, float* y) {
  constexpr int kCols = R == 1 ? 4 : 2;  // R x C accumulators stay in registers
  int64_t n = col_begin;
  for (; n + kCols <= col_end; n += kCols) DirectColumns<R, kCols>(g, rows, n, y);
  for (; n < col_end; ++n) DirectColumns<R, 1>(g, rows, n, y);
}

void DirectProduct(const MatMulNBitsGeometry& g, float* y, KernelContext& ctx) {
  const MatMulNBitsAttrs& at = g.attrs;
  alignas(32) float tail[kDirectRows * kGroup] = {};
  const int64_t full_groups = at.k / kGroup, tail_len = at.k % kGroup;
  for (int64_t r = 0; r < g.rows; ++r)
    std::memcpy(tail + r * kGroup, g.a + r * at.k + full_groups * kGroup, sizeof(float) * tail_len);
  const RowsOfA rows{g.a, at.k, full_groups, tail};
  // Units of 4 columns; chunks of at least ~64K weights, so small products stay on one thread.
  constexpr int64_t kUnit = 4;
  const int64_t units = (at.n + kUnit - 1) / kUnit;
  const int64_t min_units = std::max<int64_t>(1, (int64_t{1} << 16) / (kUnit * at.k));
  ctx.ParallelFor(units, min_units, [&](int64_t begin, int64_t end) {
    const int64_t c0 = begin * kUnit, c1 = std::min(at.n, end * kUnit);
    switch (g.rows) {
      case 1: return DirectRows<1>(g, rows, c0, c1, y);
      case 2: return DirectRows<2>(g, rows, c0, c1, y);
      case 3: return DirectRows<3>(g, rows, c0, c1, y);
      default: return DirectRows<4>(g, rows, c0, c1, y);
    }
  });
}

// ---- SGEMM path: B dequantized straight into packed panels ----

// Rows [p0, p0 + kc) of column n of W, dequantized into out[0, kc) (out holds
// kc rounded up to 16; the values past kc are scratch).
__attribute__((target("avx2,fma"))) void DequantizeColumnRange(const MatMulNBitsGeometry& g, int64_t n, int64_t p0,
                                                               int64_t kc, float* out) {
  const MatMulNBitsAttrs& at = g.attrs;
  const uint8_t* column = g.b + n * at.blocks * at.blob;
  for (int64_t p = 0; p < kc; p += kGroup) {
    const int64_t k = p0 + p, block = k / at.block_size;  // p0 is a multiple of 16: a group is in one block
    __m256 w0, w1;
    Dequantize16(column + block * at.blob + (k % at.block_size) / 2,
                 _mm_set1_epi8(static_cast<char>(ZeroPointOf(g, n, block))),
                 _mm256_set1_ps(g.scales[n * at.blocks + block]), &w0, &w1);
    _mm256_store_ps(out + p, w0);
    _mm256_store_ps(out + p + 8, w1);
  }
}

// One run of 16 columns [j, j + cols) x rows [p0, p0 + kc) into SGEMM's run
// layout (row p at run + p * 16; columns past `cols` zero).
__attribute__((target("avx2,fma"))) void PackRun(const MatMulNBitsGeometry& g, int64_t p0, int64_t kc, int64_t j,
                                                 int64_t cols, float* run) {
  constexpr int64_t kLd = kSgemmDepthBlock + kGroup;  // scratch row: one column's kc values
  alignas(32) float scratch[kSgemmPanelRun * kLd];
  for (int64_t c = 0; c < kSgemmPanelRun; ++c) {
    if (c < cols) DequantizeColumnRange(g, j + c, p0, kc, scratch + c * kLd);
    else std::fill(scratch + c * kLd, scratch + c * kLd + kc, 0.f);
  }
  const int64_t kc8 = kc / 8 * 8;
  for (int64_t c0 = 0; c0 < kSgemmPanelRun; c0 += 8)
    for (int64_t p = 0; p < kc8; p += 8) Transpose8x8Avx2(scratch + c0 * kLd + p, kLd, run + p * kSgemmPanelRun + c0,
                                                          kSgemmPanelRun);
  for (int64_t p = kc8; p < kc; ++p)
    for (int64_t c = 0; c < kSgemmPanelRun; ++c) run[p * kSgemmPanelRun + c] = scratch[c * kLd + p];
}

void SgemmProduct(const MatMulNBitsGeometry& g, float* y, KernelContext& ctx) {
  const MatMulNBitsAttrs& at = g.attrs;
  const PackBFn pack = [&g](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
    for (int64_t q = 0; q * kSgemmPanelWidth < nc; ++q)
      for (int64_t h = 0; h < kSgemmPanelWidth / kSgemmPanelRun; ++h) {
        const int64_t first = q * kSgemmPanelWidth + h * kSgemmPanelRun;
        const int64_t cols = std::clamp<int64_t>(nc - first, 0, kSgemmPanelRun);
        PackRun(g, p0, kc, j0 + first, cols, out + q * kc * kSgemmPanelWidth + h * kc * kSgemmPanelRun);
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
