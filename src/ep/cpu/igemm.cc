#include "ep/cpu/igemm.h"
#include "ep/cpu/igemm_internal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ep/cpu/no_fp_contract.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_IGEMM_X86 1
#endif

namespace nee::cpu {

namespace {

// Wrapping int32 arithmetic (the reference narrows int64 sums to int32, i.e.
// modulo 2^32); unsigned so that overflow is defined.
inline int32_t WrapMulSub(int32_t acc, int32_t x, int32_t y) {
  return static_cast<int32_t>(static_cast<uint32_t>(acc) - static_cast<uint32_t>(x) * static_cast<uint32_t>(y));
}

// One micro-tile: rows [0, rows) of a packed A panel times one packed B
// panel, minus row_sums[r] * zb[j], stored to `cols` columns of C.
using TileFn = void (*)(const int16_t* a, const uint8_t* b, int64_t kpairs, const int32_t* row_sums,
                        const int32_t* zb, int32_t* c, int64_t ldc, int64_t cols);

// Where column j's pair sits in a packed k pair's 32 bytes: columns 0-3,
// 8-11, 4-7, 12-15 in that order, so that the in-lane byte unpacks of one
// 32-byte load give columns 0-7 and 8-15 in order (IgemmPackBPair).
constexpr int PairOffset(int j) { return 2 * (j & 3) + ((j & 4) ? 16 : 0) + ((j & 8) ? 8 : 0); }

template <int kRows>
void TilePortable(const int16_t* a, const uint8_t* b, int64_t kpairs, const int32_t* row_sums, const int32_t* zb,
                  int32_t* c, int64_t ldc, int64_t cols) {
  uint32_t acc[kRows][kIgemmCols] = {};
  for (int64_t p = 0; p < kpairs; ++p) {
    const int16_t* ap = a + p * kIgemmRows * 2;
    const uint8_t* bp = b + p * kIgemmCols * 2;
    for (int r = 0; r < kRows; ++r) {
      const int32_t a0 = ap[2 * r], a1 = ap[2 * r + 1];
      for (int j = 0; j < kIgemmCols; ++j) {
        const int32_t b0 = bp[PairOffset(j)], b1 = bp[PairOffset(j) + 1];
        // |a0 * b0 + a1 * b1| <= 2 * 255 * 255: exact in int32, as vpmaddwd's pair sum is.
        acc[r][j] += static_cast<uint32_t>(a0 * b0 + a1 * b1);
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = WrapMulSub(static_cast<int32_t>(acc[r][j]), row_sums[r], zb[j]);
}

// The same over IgemmPackBWide's layout.
template <int kRows>
void TilePortableWide(const int16_t* a, const uint8_t* bytes, int64_t kpairs, const int32_t* row_sums,
                      const int32_t* zb, int32_t* c, int64_t ldc, int64_t cols) {
  const auto* b = reinterpret_cast<const int16_t*>(bytes);
  uint32_t acc[kRows][kIgemmCols] = {};
  for (int64_t p = 0; p < kpairs; ++p) {
    const int16_t* ap = a + p * kIgemmRows * 2;
    const int16_t* bp = b + p * kIgemmCols * 2;
    for (int r = 0; r < kRows; ++r) {
      const int32_t a0 = ap[2 * r], a1 = ap[2 * r + 1];
      for (int j = 0; j < kIgemmCols; ++j)
        acc[r][j] += static_cast<uint32_t>(a0 * bp[2 * j] + a1 * bp[2 * j + 1]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = WrapMulSub(static_cast<int32_t>(acc[r][j]), row_sums[r], zb[j]);
}

#ifdef NEE_IGEMM_X86

// C's row: the sums minus row_sum * zb, stored whole or, for a ragged panel,
// through a scratch tile.
__attribute__((target("avx2,fma"))) inline void StoreRow(__m256i acc0, __m256i acc1, int32_t row_sum, __m256i z0,
                                                         __m256i z1, int32_t* out, int64_t cols) {
  const __m256i s = _mm256_set1_epi32(row_sum);
  const __m256i v0 = _mm256_sub_epi32(acc0, _mm256_mullo_epi32(s, z0));
  const __m256i v1 = _mm256_sub_epi32(acc1, _mm256_mullo_epi32(s, z1));
  if (cols == kIgemmCols) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), v1);
  } else {
    alignas(32) int32_t tmp[kIgemmCols];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), v0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), v1);
    std::memcpy(out, tmp, static_cast<size_t>(cols) * sizeof(int32_t));
  }
}

// Per k pair: one 32-byte load of B widened by in-lane unpacks into two
// vectors (8 columns each, a pair of int16 per int32 lane; on Zen 3 no faster
// than two vpmovzxbw loads, measured, and the packed column order follows
// from it), and one broadcast pair of A per row; vpmaddwd sums each lane's two
// products exactly in int32. The accumulators are named variables, not an
// array, and an empty asm after each row pins the row's work in place:
// otherwise GCC hoists all six broadcasts first and spills accumulators
// (ConvInteger 12.1 -> 6.7 ms a ddddocr_old run).
template <int kRows>
__attribute__((target("avx2,fma"))) void TileAvx2(const int16_t* a, const uint8_t* b, int64_t kpairs,
                                                  const int32_t* row_sums, const int32_t* zb, int32_t* c, int64_t ldc,
                                                  int64_t cols) {
  static_assert(kRows >= 1 && kRows <= 6, "up to six rows");
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t p = 0; p < kpairs; ++p) {
    const __m256i bv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b0 = _mm256_unpacklo_epi8(bv, zero), b1 = _mm256_unpackhi_epi8(bv, zero);
#define NEE_IGEMM_ROW(r)                                                 \
  if constexpr (kRows > r) {                                             \
    int32_t pair;                                                        \
    std::memcpy(&pair, a + 2 * r, sizeof pair);                          \
    const __m256i av = _mm256_set1_epi32(pair);                          \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(av, b0));      \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(av, b1));      \
    __asm__ volatile("" : "+x"(c##r##0), "+x"(c##r##1));                 \
  }
    NEE_IGEMM_ROW(0)
    NEE_IGEMM_ROW(1)
    NEE_IGEMM_ROW(2)
    NEE_IGEMM_ROW(3)
    NEE_IGEMM_ROW(4)
    NEE_IGEMM_ROW(5)
#undef NEE_IGEMM_ROW
    a += kIgemmRows * 2;
    b += kIgemmCols * 2;
  }
  const __m256i z0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb));
  const __m256i z1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + 8));
  StoreRow(c00, c01, row_sums[0], z0, z1, c, cols);
  if constexpr (kRows > 1) StoreRow(c10, c11, row_sums[1], z0, z1, c + ldc, cols);
  if constexpr (kRows > 2) StoreRow(c20, c21, row_sums[2], z0, z1, c + 2 * ldc, cols);
  if constexpr (kRows > 3) StoreRow(c30, c31, row_sums[3], z0, z1, c + 3 * ldc, cols);
  if constexpr (kRows > 4) StoreRow(c40, c41, row_sums[4], z0, z1, c + 4 * ldc, cols);
  if constexpr (kRows > 5) StoreRow(c50, c51, row_sums[5], z0, z1, c + 5 * ldc, cols);
}

// The same over IgemmPackBWide's layout: per k pair two 32-byte loads of B
// already in int16, no unpacking, so the loop is 12 vpmaddwd and 12 vpaddd
// (Zen 3 runs vpmaddwd on two pipes: 6 cycles for 192 multiply-adds).
template <int kRows>
__attribute__((target("avx2,fma"))) void TileAvx2Wide(const int16_t* a, const uint8_t* bytes, int64_t kpairs,
                                                      const int32_t* row_sums, const int32_t* zb, int32_t* c,
                                                      int64_t ldc, int64_t cols) {
  static_assert(kRows >= 1 && kRows <= 6, "up to six rows");
  const auto* b = reinterpret_cast<const int16_t*>(bytes);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if constexpr (kRows == 6) {
    // The full tile's loop in assembly: GCC's register allocation of it added a
    // vmovdqa per row (accumulators renamed through a temporary); here 12
    // accumulators, B's two vectors, A's broadcast and one product fill the
    // 16 ymm registers exactly.
    if (kpairs > 0) {
      int64_t n = kpairs;
      __asm__ volatile(
          "1:\n\t"
          "vmovdqu (%[b]), %%ymm12\n\t"
          "vmovdqu 32(%[b]), %%ymm13\n\t"
          "vbroadcastss (%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c00], %[c00]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c01], %[c01]\n\t"
          "vbroadcastss 4(%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c10], %[c10]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c11], %[c11]\n\t"
          "vbroadcastss 8(%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c20], %[c20]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c21], %[c21]\n\t"
          "vbroadcastss 12(%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c30], %[c30]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c31], %[c31]\n\t"
          "vbroadcastss 16(%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c40], %[c40]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c41], %[c41]\n\t"
          "vbroadcastss 20(%[a]), %%ymm14\n\t"
          "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c50], %[c50]\n\t"
          "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
          "vpaddd %%ymm15, %[c51], %[c51]\n\t"
          "add $24, %[a]\n\t"
          "add $64, %[b]\n\t"
          "dec %[n]\n\t"
          "jnz 1b\n\t"
          : [a] "+r"(a), [b] "+r"(b), [n] "+r"(n), [c00] "+v"(c00), [c01] "+v"(c01), [c10] "+v"(c10),
            [c11] "+v"(c11), [c20] "+v"(c20), [c21] "+v"(c21), [c30] "+v"(c30), [c31] "+v"(c31), [c40] "+v"(c40),
            [c41] "+v"(c41), [c50] "+v"(c50), [c51] "+v"(c51)
          :
          : "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
    }
  } else {
    for (int64_t p = 0; p < kpairs; ++p) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
#define NEE_IGEMM_ROW(r)                                                 \
  if constexpr (kRows > r) {                                             \
    int32_t pair;                                                        \
    std::memcpy(&pair, a + 2 * r, sizeof pair);                          \
    const __m256i av = _mm256_set1_epi32(pair);                          \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(av, b0));      \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(av, b1));      \
    __asm__ volatile("" : "+x"(c##r##0), "+x"(c##r##1));                 \
  }
      NEE_IGEMM_ROW(0)
      NEE_IGEMM_ROW(1)
      NEE_IGEMM_ROW(2)
      NEE_IGEMM_ROW(3)
      NEE_IGEMM_ROW(4)
      NEE_IGEMM_ROW(5)
#undef NEE_IGEMM_ROW
      a += kIgemmRows * 2;
      b += kIgemmCols * 2;
    }
  }
  const __m256i z0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb));
  const __m256i z1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + 8));
  StoreRow(c00, c01, row_sums[0], z0, z1, c, cols);
  if constexpr (kRows > 1) StoreRow(c10, c11, row_sums[1], z0, z1, c + ldc, cols);
  if constexpr (kRows > 2) StoreRow(c20, c21, row_sums[2], z0, z1, c + 2 * ldc, cols);
  if constexpr (kRows > 3) StoreRow(c30, c31, row_sums[3], z0, z1, c + 3 * ldc, cols);
  if constexpr (kRows > 4) StoreRow(c40, c41, row_sums[4], z0, z1, c + 4 * ldc, cols);
  if constexpr (kRows > 5) StoreRow(c50, c51, row_sums[5], z0, z1, c + 5 * ldc, cols);
}

// The float epilogue of one row of a tile: float(v) * scale, then + bias, as
// two roundings (no FMA: this function is not compiled for it).
__attribute__((target("avx2"), noinline)) void FloatRowAvx2(const int32_t* v, int64_t cols, const float* scale,
                                                  const float* bias, float* out) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + j))),
                             _mm256_loadu_ps(scale + j));
    if (bias) y = _mm256_add_ps(y, _mm256_loadu_ps(bias + j));
    _mm256_storeu_ps(out + j, y);
  }
  for (; j < cols; ++j) {
    const float y = static_cast<float>(v[j]) * scale[j];
    out[j] = bias ? y + bias[j] : y;
  }
}
#endif


NEE_NO_FP_CONTRACT void FloatRowPortable(const int32_t* v, int64_t cols, const float* scale, const float* bias,
                                            float* out) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  for (int64_t j = 0; j < cols; ++j) {
    const float y = static_cast<float>(v[j]) * scale[j];
    out[j] = bias ? y + bias[j] : y;
  }
}

bool UseAvx2() {
#ifdef NEE_IGEMM_X86
  return SgemmActiveIsa() >= SgemmIsa::kAvx2 && !SgemmPortableForced();
#else
  return false;
#endif
}

TileFn SelectTile(int64_t rows, bool avx2, bool wide) {
#ifdef NEE_IGEMM_X86
  if (avx2 && wide) {
    switch (rows) {
      case 1: return TileAvx2Wide<1>;
      case 2: return TileAvx2Wide<2>;
      case 3: return TileAvx2Wide<3>;
      case 4: return TileAvx2Wide<4>;
      case 5: return TileAvx2Wide<5>;
      default: return TileAvx2Wide<6>;
    }
  }
  if (avx2) {
    switch (rows) {
      case 1: return TileAvx2<1>;
      case 2: return TileAvx2<2>;
      case 3: return TileAvx2<3>;
      case 4: return TileAvx2<4>;
      case 5: return TileAvx2<5>;
      default: return TileAvx2<6>;
    }
  }
#endif
  (void)avx2;
  if (wide) {
    switch (rows) {
      case 1: return TilePortableWide<1>;
      case 2: return TilePortableWide<2>;
      case 3: return TilePortableWide<3>;
      case 4: return TilePortableWide<4>;
      case 5: return TilePortableWide<5>;
      default: return TilePortableWide<6>;
    }
  }
  switch (rows) {
    case 1: return TilePortable<1>;
    case 2: return TilePortable<2>;
    case 3: return TilePortable<3>;
    case 4: return TilePortable<4>;
    case 5: return TilePortable<5>;
    default: return TilePortable<6>;
  }
}

}  // namespace

namespace {

// Rows [0, rows) of one A panel, k pairs [p_begin, kpairs): each value minus
// its row's zero point; rows past `rows` and the odd k's partner 0.
void PackAPanelPortable(int64_t rows, int64_t k, const uint8_t* src, int64_t lda, bool is_signed, const int32_t* zero,
                        int64_t p_begin, int16_t* panel) {
  const int64_t kpairs = IgemmKPairs(k);
  for (int64_t r = 0; r < kIgemmRows; ++r) {
    const uint8_t* row = r < rows ? src + r * lda : src;
    for (int64_t p = p_begin; p < kpairs; ++p) {
      int16_t* d = panel + (p * kIgemmRows + r) * 2;
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t kk = 2 * p + h;
        d[h] = r < rows && kk < k
                   ? static_cast<int16_t>((is_signed ? static_cast<int8_t>(row[kk]) : row[kk]) - zero[r])
                   : int16_t{0};
      }
    }
  }
}

#ifdef NEE_IGEMM_X86
// A full panel's first k / 8 * 8 columns, 8 at a time: each row's 8 bytes
// widened and less the zero point are 4 int32 pairs; a 4x4 transpose of rows
// 0-3 and an interleave of rows 4-5 give each k pair's 6 rows in order.
__attribute__((target("avx2,fma"))) int64_t PackAPanelAvx2(int64_t k, const uint8_t* src, int64_t lda, bool is_signed,
                                                           const int32_t* zero, int16_t* panel) {
  __m128i z[kIgemmRows];
  for (int r = 0; r < kIgemmRows; ++r) z[r] = _mm_set1_epi16(static_cast<int16_t>(zero[r]));
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m128i v[kIgemmRows];
    for (int r = 0; r < kIgemmRows; ++r) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + r * lda + kk));
      v[r] = _mm_sub_epi16(is_signed ? _mm_cvtepi8_epi16(bytes) : _mm_cvtepu8_epi16(bytes), z[r]);
    }
    const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpackhi_epi32(v[0], v[1]);
    const __m128i t2 = _mm_unpacklo_epi32(v[2], v[3]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
    const __m128i u0 = _mm_unpacklo_epi32(v[4], v[5]), u1 = _mm_unpackhi_epi32(v[4], v[5]);
    int16_t* d = panel + (kk / 2) * kIgemmRows * 2;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi64(t0, t2));  // pair 0, rows 0-3
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 8), u0);                      // pair 0, rows 4-5
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 12), _mm_unpackhi_epi64(t0, t2));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 20), _mm_unpackhi_epi64(u0, u0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 24), _mm_unpacklo_epi64(t1, t3));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 32), u1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 36), _mm_unpackhi_epi64(t1, t3));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 44), _mm_unpackhi_epi64(u1, u1));
  }
  return kk / 2;
}
#endif

}  // namespace

void IgemmPackA(int64_t m, int64_t k, const void* a, int64_t lda, bool is_signed, const int32_t* za,
                int64_t za_stride, IgemmPackedA* out) {
  const int64_t kpairs = IgemmKPairs(k);
  const int64_t panels = (m + kIgemmRows - 1) / kIgemmRows;
  out->m = m;
  out->k = k;
  // Every element is written below: resize, not a zero fill (a kept
  // IgemmPackedA then costs nothing when it does not grow).
  out->data.resize(static_cast<size_t>(panels * kpairs * kIgemmRows * 2));
  out->row_sums.resize(static_cast<size_t>(panels * kIgemmRows));
  const auto* bytes = static_cast<const uint8_t*>(a);
  const bool avx2 = UseAvx2();
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t i0 = q * kIgemmRows, rows = std::min(kIgemmRows, m - i0);
    int32_t zero[kIgemmRows] = {};
    for (int64_t r = 0; r < rows; ++r) zero[r] = za ? za[(i0 + r) * za_stride] : 0;
    int16_t* panel = out->data.data() + q * kpairs * kIgemmRows * 2;
    const uint8_t* src = bytes + i0 * lda;
    int64_t done = 0;
#ifdef NEE_IGEMM_X86
    if (avx2 && rows == kIgemmRows) done = PackAPanelAvx2(k, src, lda, is_signed, zero, panel);
#endif
    (void)avx2;
    PackAPanelPortable(rows, k, src, lda, is_signed, zero, done, panel);
    // Row sums of A - za, modulo 2^32 like the GEMM's sums.
    for (int64_t r = 0; r < kIgemmRows; ++r) {
      uint32_t sum = 0;
      if (r < rows) {
        const uint8_t* row = src + r * lda;
        if (is_signed) {
          for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<uint32_t>(static_cast<int8_t>(row[kk]));
        } else {
          for (int64_t kk = 0; kk < k; ++kk) sum += row[kk];
        }
        sum -= static_cast<uint32_t>(k) * static_cast<uint32_t>(zero[r]);
      }
      out->row_sums[static_cast<size_t>(i0 + r)] = static_cast<int32_t>(sum);
    }
  }
}

void IgemmPackBPair(int64_t k, int64_t n, int64_t p, const uint8_t* row0, const uint8_t* row1, bool is_signed,
                    uint8_t* dst) {
  const int64_t kpairs = IgemmKPairs(k);
  const int64_t panels = (n + kIgemmCols - 1) / kIgemmCols;
  // int8 is stored as uint8 b + 128 (the top bit flipped) and its zero
  // points raised by 128 (IgemmRange): b - zb is unchanged, and the kernels
  // widen one kind of byte. A missing odd row and the columns past n hold
  // (flipped) zeros: the A values they meet are 0, the columns are not stored.
  const uint8_t flip = is_signed ? 0x80 : 0;
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t j0 = q * kIgemmCols, cols = std::min(kIgemmCols, n - j0);
    // Full panels are read where they lie; a ragged one through zeroed copies.
    alignas(16) uint8_t r0[kIgemmCols] = {}, r1[kIgemmCols] = {};
    const uint8_t* s0 = row0 + j0;
    const uint8_t* s1 = row1 ? row1 + j0 : r1;
    if (cols < kIgemmCols) {
      std::memcpy(r0, s0, static_cast<size_t>(cols));
      if (row1) std::memcpy(r1, s1, static_cast<size_t>(cols));
      s0 = r0;
      s1 = r1;
    }
    uint8_t* d = dst + (q * kpairs + p) * kIgemmCols * 2;
#ifdef NEE_IGEMM_X86
    const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
    const __m128i v0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0)), f);
    const __m128i v1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s1)), f);
    const __m128i lo = _mm_unpacklo_epi8(v0, v1), hi = _mm_unpackhi_epi8(v0, v1);  // columns 0-7, 8-15
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi64(lo, hi));       // 0-3, 8-11
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), _mm_unpackhi_epi64(lo, hi));  // 4-7, 12-15
#else
    for (int j = 0; j < kIgemmCols; ++j) {
      d[PairOffset(j)] = static_cast<uint8_t>(s0[j] ^ flip);
      d[PairOffset(j) + 1] = static_cast<uint8_t>(s1[j] ^ flip);
    }
#endif
  }
}

void IgemmPackBWide(int64_t k, int64_t n, const uint8_t* b, int64_t ldb, bool is_signed, int16_t* dst) {
  const int64_t kpairs = IgemmKPairs(k);
  const int64_t panels = (n + kIgemmCols - 1) / kIgemmCols;
  std::fill(dst, dst + IgemmPackBWideSize(k, n), int16_t{0});
  for (int64_t kk = 0; kk < k; ++kk) {
    const uint8_t* row = b + kk * ldb;
    for (int64_t q = 0; q < panels; ++q) {
      int16_t* d = dst + (q * kpairs + kk / 2) * kIgemmCols * 2 + (kk & 1);
      const int64_t j0 = q * kIgemmCols, cols = std::min(kIgemmCols, n - j0);
      for (int64_t j = 0; j < cols; ++j)
        d[2 * j] = static_cast<int16_t>(is_signed ? static_cast<int8_t>(row[j0 + j]) : row[j0 + j]);
    }
  }
}

void IgemmPackB(int64_t k, int64_t n, const uint8_t* b, int64_t ldb, bool is_signed, uint8_t* dst) {
  for (int64_t p = 0; p < IgemmKPairs(k); ++p)
    IgemmPackBPair(k, n, p, b + 2 * p * ldb, 2 * p + 1 < k ? b + (2 * p + 1) * ldb : nullptr, is_signed, dst);
}

void IgemmRange(const IgemmPackedA& a, const IgemmB& b, const int32_t* zb, int64_t zb_stride, int32_t* c,
                int64_t ldc, int64_t row_panel_begin, int64_t row_panel_end, int64_t col_panel_begin,
                int64_t col_panel_end, const IgemmFloatOut* fout) {
  const int64_t kpairs = IgemmKPairs(a.k);
  const bool avx2 = UseAvx2();
  // The 8-bit layout stores int8 flipped (+128) and so raises its zero points; the wide one does not.
  const int32_t flip = b.is_signed && !b.wide ? 128 : 0;
  const int64_t elem = b.wide ? 2 : 1;  // bytes per packed element
  for (int64_t q = col_panel_begin; q < col_panel_end; ++q) {
    const int64_t j0 = q * kIgemmCols, cols = std::min(kIgemmCols, b.n - j0);
    alignas(32) int32_t zero_points[kIgemmCols] = {};
    for (int64_t j = 0; j < cols; ++j) zero_points[j] = (zb ? zb[(j0 + j) * zb_stride] : 0) + flip;
    alignas(32) float scales[kIgemmCols] = {};
    if (fout)
      for (int64_t j = 0; j < cols; ++j) scales[j] = fout->scale[(j0 + j) * fout->scale_stride];
    const float* bias = fout && fout->bias ? fout->bias + j0 : nullptr;
    const uint8_t* bp = b.data + q * kpairs * kIgemmCols * 2 * elem;
    for (int64_t rp = row_panel_begin; rp < row_panel_end; ++rp) {
      const int64_t i0 = rp * kIgemmRows, rows = std::min(kIgemmRows, a.m - i0);
      const TileFn tile = SelectTile(rows, avx2, b.wide);
      const int16_t* ap = a.data.data() + rp * kpairs * kIgemmRows * 2;
      if (!fout) {
        tile(ap, bp, kpairs, a.row_sums.data() + i0, zero_points, c + i0 * ldc + j0, ldc, cols);
        continue;
      }
      // The tile's int32 sums go through a scratch tile in L1 to the epilogue.
      alignas(32) int32_t sums[kIgemmRows * kIgemmCols];
      tile(ap, bp, kpairs, a.row_sums.data() + i0, zero_points, sums, kIgemmCols, kIgemmCols);
      for (int64_t r = 0; r < rows; ++r) {
        float* out = fout->out + (i0 + r) * fout->ldo + j0;
#ifdef NEE_IGEMM_X86
        if (avx2) {
          FloatRowAvx2(sums + r * kIgemmCols, cols, scales, bias, out);
          continue;
        }
#endif
        FloatRowPortable(sums + r * kIgemmCols, cols, scales, bias, out);
      }
    }
  }
}

void Igemm(const KernelContext* ctx, const IgemmPackedA& a, const IgemmB& b, const int32_t* zb, int64_t zb_stride,
           int32_t* c, int64_t ldc, const IgemmFloatOut* fout) {
  const int64_t row_panels = (a.m + kIgemmRows - 1) / kIgemmRows;
  const int64_t col_panels = b.panels();
  if (row_panels == 0 || col_panels == 0) return;
  if (!ctx || !ctx->pool()) {
    IgemmRange(a, b, zb, zb_stride, c, ldc, 0, row_panels, 0, col_panels, fout);
    return;
  }
  // Column panels share A (read from L2), so tasks are runs of column panels
  // of at least ~64k multiply-adds; with fewer panels than that, row panels.
  const int64_t work_per_panel = std::max<int64_t>(1, a.m * a.k * kIgemmCols);
  const int64_t min_panels = std::max<int64_t>(1, 65536 / work_per_panel);
  if (col_panels >= 2 * min_panels || row_panels == 1) {
    ctx->ParallelFor(col_panels, min_panels, [&](int64_t begin, int64_t end) {
      IgemmRange(a, b, zb, zb_stride, c, ldc, 0, row_panels, begin, end, fout);
    });
  } else {
    ctx->ParallelFor(row_panels, 1, [&](int64_t begin, int64_t end) {
      IgemmRange(a, b, zb, zb_stride, c, ldc, begin, end, 0, col_panels, fout);
    });
  }
}

const char* IgemmKernelName() { return UseAvx2() ? "avx2" : "portable"; }

// ---- shared with igemm_u8s8.cc (igemm_internal.h) ------------------------------

bool IgemmUseAvx2() { return UseAvx2(); }

void IgemmFloatRow(const int32_t* v, int64_t cols, const float* scale, const float* bias, float* out) {
#ifdef NEE_IGEMM_X86
  if (UseAvx2()) {
    FloatRowAvx2(v, cols, scale, bias, out);
    return;
  }
#endif
  FloatRowPortable(v, cols, scale, bias, out);
}

}  // namespace nee::cpu
