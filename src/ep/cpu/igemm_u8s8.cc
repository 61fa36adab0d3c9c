// The u8 x s8 GEMM (igemm.h): uint8 A (DynamicQuantizeLinear's output) times
// a constant int8 B. Three kernels over one B layout (16-column panels of k
// quads, [k quads][16 columns][4 bytes]):
// - AVX-512 VNNI (igemm_vnni.cc): 8-row A panels x two B panels, vpdpbusd,
//   exact for any bytes, so B is packed as it is (IgemmPackedBS8::exact);
// - AVX2: 6-row A panels x one B panel, vpmaddubsw + vpmaddwd + vpaddd, B's
//   saturating pairs clamped at packing and their remainders added per tile;
// - portable loops, exact for either packing.
// Packing follows the kernel that runs at packing time; when a test lowers
// the ISA after B was packed exact, the portable kernel reads it.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ep/cpu/igemm.h"
#include "ep/cpu/igemm_internal.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_IGEMM_X86 1
#endif

namespace nee::cpu {

bool IgemmUseVnni() {
#ifdef NEE_IGEMM_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return has && SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced();
#else
  return false;
#endif
}

namespace {

constexpr int64_t kQuadBytesB = kIgemmCols * 4;  // one k quad of a B panel

// The raw sums of one tile without SIMD (int32 wrap like vpaddd; the four
// products of a quad summed exactly, as vpdpbusd does and as vpmaddubsw does
// on clamped pairs). A panels of panel_rows rows.
void TileU8S8Portable(int64_t rows, int64_t panel_rows, const uint8_t* a, const int8_t* b, int64_t kquads,
                      int32_t* s) {
  uint32_t acc[kIgemmRowsVnni][kIgemmCols] = {};
  for (int64_t p = 0; p < kquads; ++p) {
    const uint8_t* ap = a + p * panel_rows * 4;
    const int8_t* bp = b + p * kQuadBytesB;
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < kIgemmCols; ++j) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) sum += static_cast<int32_t>(ap[r * 4 + t]) * bp[j * 4 + t];
        acc[r][j] += static_cast<uint32_t>(sum);
      }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < kIgemmCols; ++j) s[r * kIgemmCols + j] = static_cast<int32_t>(acc[r][j]);
}

void FinishRowU8S8Portable(const int32_t* sums, int32_t row_term, int32_t za, const int32_t* zb,
                           const int32_t* col_sums, int32_t* out) {
  for (int j = 0; j < kIgemmCols; ++j)
    out[j] = static_cast<int32_t>(static_cast<uint32_t>(sums[j]) -
                                  static_cast<uint32_t>(zb[j]) * static_cast<uint32_t>(row_term) -
                                  static_cast<uint32_t>(za) * static_cast<uint32_t>(col_sums[j]));
}

#ifdef NEE_IGEMM_X86
// Per k quad and row: a broadcast of the row's four bytes, vpmaddubsw against
// each half of the vector operand's quad, vpmaddwd by ones adding the two
// pairs into int32, vpaddd (see IgemmQuadTile in igemm.h).
template <int kRows, bool kBroadcastUnsigned>
__attribute__((target("avx2"))) void QuadTileAvx2(const void* broadcast, const void* vector, int64_t kquads,
                                                  int32_t* s) {
  static_assert(kRows >= 1 && kRows <= 6, "up to six rows");
  const auto* a = static_cast<const uint8_t*>(broadcast);
  const auto* b = static_cast<const uint8_t*>(vector);
  // vpmaddwd reads its ones from memory: with a ones register, the twelve accumulators, two vectors, the
  // broadcast and a product are seventeen, and GCC spilled an accumulator (a reload and store every k quad).
  alignas(32) static constexpr int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kquads; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
// vpmaddubsw's first operand is the unsigned one.
#define NEE_QUAD_PRODUCT(bcast, vec) \
  (kBroadcastUnsigned ? _mm256_maddubs_epi16(bcast, vec) : _mm256_maddubs_epi16(vec, bcast))
#define NEE_QUAD_ROW(r)                                                                 \
  if constexpr (kRows > r) {                                                            \
    int32_t quad;                                                                       \
    std::memcpy(&quad, a + 4 * r, sizeof quad);                                         \
    __m256i av = _mm256_set1_epi32(quad);                                               \
    __m256i t = NEE_QUAD_PRODUCT(av, b0);                                               \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(t) : "m"(kOnes));                              \
    c##r##0 = _mm256_add_epi32(c##r##0, t);                                             \
    av = NEE_QUAD_PRODUCT(av, b1);                                                      \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(av) : "m"(kOnes));                             \
    c##r##1 = _mm256_add_epi32(c##r##1, av);                                            \
    __asm__ volatile("" : "+x"(c##r##0), "+x"(c##r##1));                                \
  }
    NEE_QUAD_ROW(0)
    NEE_QUAD_ROW(1)
    NEE_QUAD_ROW(2)
    NEE_QUAD_ROW(3)
    NEE_QUAD_ROW(4)
    NEE_QUAD_ROW(5)
#undef NEE_QUAD_ROW
#undef NEE_QUAD_PRODUCT
    a += kIgemmRows * 4;
    b += kQuadBytesB;
  }
#define NEE_QUAD_STORE(r, lo, hi)                                                \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + (r) * kIgemmCols), lo);     \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + (r) * kIgemmCols + 8), hi);
  NEE_QUAD_STORE(0, c00, c01)
  if constexpr (kRows > 1) { NEE_QUAD_STORE(1, c10, c11) }
  if constexpr (kRows > 2) { NEE_QUAD_STORE(2, c20, c21) }
  if constexpr (kRows > 3) { NEE_QUAD_STORE(3, c30, c31) }
  if constexpr (kRows > 4) { NEE_QUAD_STORE(4, c40, c41) }
  if constexpr (kRows > 5) { NEE_QUAD_STORE(5, c50, c51) }
#undef NEE_QUAD_STORE
}

// The same tile by AVX-512 VNNI: per k quad and row, one vpdpbusd of the
// row's broadcast four bytes against the whole 64-byte quad of the vector
// operand (sixteen columns in order). vpdpbusd adds the four u8 x s8 products
// of a lane in int32 without saturating, so it is exact for any bytes (the
// clamped weights and their remainders stay correct, merely unneeded), and
// its int32 adds wrap like vpaddd.
template <int kRows, bool kBroadcastUnsigned>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void QuadTileVnni(const void* broadcast, const void* vector,
                                                                          int64_t kquads, int32_t* s) {
  static_assert(kRows >= 1 && kRows <= 6, "up to six rows");
  const auto* a = static_cast<const uint8_t*>(broadcast);
  const auto* b = static_cast<const uint8_t*>(vector);
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (int64_t p = 0; p < kquads; ++p) {
    const __m512i bv = _mm512_loadu_si512(b);
// vpdpbusd's second operand is the unsigned one, its third the signed one.
#define NEE_QUAD_ROW(r)                                                                       \
  if constexpr (kRows > r) {                                                                  \
    int32_t quad;                                                                             \
    std::memcpy(&quad, a + 4 * r, sizeof quad);                                               \
    const __m512i av = _mm512_set1_epi32(quad);                                               \
    c##r = kBroadcastUnsigned ? _mm512_dpbusd_epi32(c##r, av, bv) : _mm512_dpbusd_epi32(c##r, bv, av); \
  }
    NEE_QUAD_ROW(0)
    NEE_QUAD_ROW(1)
    NEE_QUAD_ROW(2)
    NEE_QUAD_ROW(3)
    NEE_QUAD_ROW(4)
    NEE_QUAD_ROW(5)
#undef NEE_QUAD_ROW
    a += kIgemmRows * 4;
    b += kQuadBytesB;
  }
  _mm512_storeu_si512(s, c0);
  if constexpr (kRows > 1) _mm512_storeu_si512(s + kIgemmCols, c1);
  if constexpr (kRows > 2) _mm512_storeu_si512(s + 2 * kIgemmCols, c2);
  if constexpr (kRows > 3) _mm512_storeu_si512(s + 3 * kIgemmCols, c3);
  if constexpr (kRows > 4) _mm512_storeu_si512(s + 4 * kIgemmCols, c4);
  if constexpr (kRows > 5) _mm512_storeu_si512(s + 5 * kIgemmCols, c5);
}

template <bool kBroadcastUnsigned>
IgemmQuadTileFn QuadTileFor(int64_t rows) {
  if (IgemmUseVnni()) {
    switch (rows) {
      case 1: return QuadTileVnni<1, kBroadcastUnsigned>;
      case 2: return QuadTileVnni<2, kBroadcastUnsigned>;
      case 3: return QuadTileVnni<3, kBroadcastUnsigned>;
      case 4: return QuadTileVnni<4, kBroadcastUnsigned>;
      case 5: return QuadTileVnni<5, kBroadcastUnsigned>;
      default: return QuadTileVnni<6, kBroadcastUnsigned>;
    }
  }
  switch (rows) {
    case 1: return QuadTileAvx2<1, kBroadcastUnsigned>;
    case 2: return QuadTileAvx2<2, kBroadcastUnsigned>;
    case 3: return QuadTileAvx2<3, kBroadcastUnsigned>;
    case 4: return QuadTileAvx2<4, kBroadcastUnsigned>;
    case 5: return QuadTileAvx2<5, kBroadcastUnsigned>;
    default: return QuadTileAvx2<6, kBroadcastUnsigned>;
  }
}

// One row of a tile from its raw sums: S - zb[j] * (row_sum - k * za) - za * col_sum[j], modulo 2^32.
__attribute__((target("avx2,fma"), noinline)) void FinishRowU8S8(const int32_t* sums, int32_t row_term, int32_t za,
                                                                 const int32_t* zb, const int32_t* col_sums,
                                                                 int32_t* out) {
  const __m256i t = _mm256_set1_epi32(row_term), z = _mm256_set1_epi32(za);
  for (int h = 0; h < 2; ++h) {
    const __m256i sv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + 8 * h));
    const __m256i zv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + 8 * h));
    const __m256i cs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col_sums + 8 * h));
    const __m256i v = _mm256_sub_epi32(_mm256_sub_epi32(sv, _mm256_mullo_epi32(zv, t)), _mm256_mullo_epi32(z, cs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * h), v);
  }
}

// Adds row[0, k / 32 * 32) into *sum by vpsadbw (four 64-bit sums of eight
// bytes each); returns how many bytes it took.
__attribute__((target("avx2"))) int64_t RowSumU8Avx2(const uint8_t* row, int64_t k, uint32_t* sum) {
  __m256i acc = _mm256_setzero_si256();
  const __m256i zero = _mm256_setzero_si256();
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + kk)), zero));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  *sum += static_cast<uint32_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
  return kk;
}

// The first k / 32 * 32 columns of eight rows of A (lda a multiple of 4) into
// an 8-row panel, 8 quads at a time; returns how many columns it took.
__attribute__((target("avx2"))) int64_t PackAPanel8Avx2(const uint8_t* a, int64_t lda, int64_t k, uint8_t* panel) {
  int64_t done = 0;
  for (; done + 32 <= k; done += 32)
    Transpose8x8Avx2(reinterpret_cast<const float*>(a + done), lda / 4,
                     reinterpret_cast<float*>(panel + (done / 4) * kIgemmRowsVnni * 4), kIgemmRowsVnni);
  return done;
}
#endif

// Each row's term for B's zero point: sum_k (A[i][k] - za[i]) = row_sum - k * za (mod 2^32).
inline int32_t RowTerm(int32_t row_sum, int64_t k, int32_t za) {
  return static_cast<int32_t>(static_cast<uint32_t>(row_sum) - static_cast<uint32_t>(k) * static_cast<uint32_t>(za));
}

// Column panels [col_panel_begin, col_panel_end) x row panels on the VNNI
// tile, two panels (32 columns) at a time: A packed in kIgemmRowsVnni-row
// panels, B exact.
void U8S8RangeVnni(const IgemmPackedAU8& a, const IgemmPackedBS8& b, const int32_t* za, int64_t za_stride,
                   const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc, const IgemmFloatOut* fout,
                   int64_t row_panel_begin, int64_t row_panel_end, int64_t col_panel_begin, int64_t col_panel_end) {
  const int64_t kquads = (a.k + 3) / 4;
  constexpr int64_t kCols = 2 * kIgemmCols;
  for (int64_t q = col_panel_begin; q < col_panel_end; q += 2) {
    const int64_t panels = std::min<int64_t>(2, col_panel_end - q);
    const int64_t j0 = q * kIgemmCols, cols = std::min(panels * kIgemmCols, b.n - j0);
    alignas(64) int32_t zero_points[kCols] = {}, col_sums[kCols] = {}, za_col_sums[kCols] = {};
    alignas(64) float scales[kCols] = {};
    bool zb_zero = true;
    for (int64_t j = 0; j < cols; ++j) {
      zero_points[j] = zb ? zb[(j0 + j) * zb_stride] : 0;
      zb_zero = zb_zero && zero_points[j] == 0;
      col_sums[j] = b.col_sums[static_cast<size_t>(j0 + j)];
      // One za for all rows: its term per column once here, not per row in the tile.
      if (za_stride == 0)
        za_col_sums[j] = static_cast<int32_t>(static_cast<uint32_t>(za ? za[0] : 0) * static_cast<uint32_t>(col_sums[j]));
      if (fout) scales[j] = fout->scale[(j0 + j) * fout->scale_stride];
    }
    U8S8VnniTile t;
    t.za_col_sum = za_stride == 0 ? za_col_sums : nullptr;
    t.zb_zero = zb_zero;
    t.b = b.data.data() + q * kquads * kQuadBytesB;
    t.kquads = kquads;
    t.zb = zero_points;
    t.col_sum = col_sums;
    t.cols = cols;
    if (fout) {
      t.scale = scales;
      t.bias = fout->bias ? fout->bias + j0 : nullptr;
      t.ldo = fout->ldo;
    }
    t.ldc = ldc;
    for (int64_t rp = row_panel_begin; rp < row_panel_end; ++rp) {
      const int64_t i0 = rp * kIgemmRowsVnni, rows = std::min(kIgemmRowsVnni, a.m - i0);
      int32_t row_terms[kIgemmRowsVnni] = {}, row_za[kIgemmRowsVnni] = {};
      for (int64_t r = 0; r < rows; ++r) {
        row_za[r] = za ? za[(i0 + r) * za_stride] : 0;
        row_terms[r] = RowTerm(a.row_sums[static_cast<size_t>(i0 + r)], a.k, row_za[r]);
      }
      t.a = a.data.data() + rp * kquads * kIgemmRowsVnni * 4;
      t.row_term = row_terms;
      t.za = row_za;
      if (fout) t.out = fout->out + i0 * fout->ldo + j0;
      else t.c = c + i0 * ldc + j0;
      U8S8TileVnni(rows, panels, t);
    }
  }
}

// The same on the AVX2 tile (6-row A panels, clamped B with its remainders)
// or the portable one (either packing), through a scratch tile of raw sums.
void U8S8RangeGeneric(const IgemmPackedAU8& a, const IgemmPackedBS8& b, const int32_t* za, int64_t za_stride,
                      const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc, const IgemmFloatOut* fout,
                      int64_t row_panel_begin, int64_t row_panel_end, int64_t col_panel_begin,
                      int64_t col_panel_end) {
  // vpmaddubsw needs clamped pairs; the quad tile on 6-row panels only.
  const bool simd = IgemmUseAvx2() && a.panel_rows == kIgemmRows && (!b.exact || IgemmUseVnni());
  const bool avx2 = IgemmUseAvx2();
  const int64_t kquads = (a.k + 3) / 4;
  const int64_t quad_bytes_a = a.panel_rows * 4;
  for (int64_t q = col_panel_begin; q < col_panel_end; ++q) {
    const int64_t j0 = q * kIgemmCols, cols = std::min(kIgemmCols, b.n - j0);
    alignas(32) int32_t zero_points[kIgemmCols] = {}, col_sums[kIgemmCols] = {};
    alignas(32) float scales[kIgemmCols] = {};
    for (int64_t j = 0; j < cols; ++j) {
      zero_points[j] = zb ? zb[(j0 + j) * zb_stride] : 0;
      col_sums[j] = b.col_sums[static_cast<size_t>(j0 + j)];
      if (fout) scales[j] = fout->scale[(j0 + j) * fout->scale_stride];
    }
    const float* bias = fout && fout->bias ? fout->bias + j0 : nullptr;
    const int8_t* bp = b.data.data() + q * kquads * kQuadBytesB;
    const auto* rem_begin = b.remainders.data() + b.remainder_begin[static_cast<size_t>(q)];
    const auto* rem_end = b.remainders.data() + b.remainder_begin[static_cast<size_t>(q) + 1];
    for (int64_t rp = row_panel_begin; rp < row_panel_end; ++rp) {
      const int64_t i0 = rp * a.panel_rows, rows = std::min(a.panel_rows, a.m - i0);
      const uint8_t* ap = a.data.data() + rp * kquads * quad_bytes_a;
      alignas(32) int32_t sums[kIgemmRowsVnni * kIgemmCols];
#ifdef NEE_IGEMM_X86
      if (simd) QuadTileFor<true>(rows)(ap, bp, kquads, sums);
#endif
      if (!simd) TileU8S8Portable(rows, a.panel_rows, ap, bp, kquads, sums);
      // The clamped weights' remainders, as scalar products (wrapping like the sums).
      for (const auto* e = rem_begin; e != rem_end; ++e) {
        const uint8_t* av = ap + (e->k / 4) * quad_bytes_a + (e->k % 4);
        for (int64_t r = 0; r < rows; ++r)
          sums[r * kIgemmCols + e->j] = static_cast<int32_t>(static_cast<uint32_t>(sums[r * kIgemmCols + e->j]) +
                                                             static_cast<uint32_t>(av[r * 4]) * static_cast<uint32_t>(e->r));
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const int32_t zai = za ? za[i * za_stride] : 0;
        const int32_t row_term = RowTerm(a.row_sums[static_cast<size_t>(i)], a.k, zai);
        alignas(32) int32_t v[kIgemmCols];
#ifdef NEE_IGEMM_X86
        if (avx2) FinishRowU8S8(sums + r * kIgemmCols, row_term, zai, zero_points, col_sums, v);
#endif
        if (!avx2) FinishRowU8S8Portable(sums + r * kIgemmCols, row_term, zai, zero_points, col_sums, v);
        if (fout) IgemmFloatRow(v, cols, scales, bias, fout->out + i * fout->ldo + j0);
        else std::memcpy(c + i * ldc + j0, v, static_cast<size_t>(cols) * sizeof(int32_t));
      }
    }
  }
}

void U8S8Range(const IgemmPackedAU8& a, const IgemmPackedBS8& b, const int32_t* za, int64_t za_stride,
               const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc, const IgemmFloatOut* fout,
               int64_t row_panel_begin, int64_t row_panel_end, int64_t col_panel_begin, int64_t col_panel_end) {
  if (IgemmUseVnni() && a.panel_rows == kIgemmRowsVnni && b.exact)
    U8S8RangeVnni(a, b, za, za_stride, zb, zb_stride, c, ldc, fout, row_panel_begin, row_panel_end, col_panel_begin,
                  col_panel_end);
  else
    U8S8RangeGeneric(a, b, za, za_stride, zb, zb_stride, c, ldc, fout, row_panel_begin, row_panel_end,
                     col_panel_begin, col_panel_end);
}

// sum of a row's k bytes (wrapping like the GEMM's sums).
uint32_t RowSumU8(const uint8_t* row, int64_t k) {
  uint32_t sum = 0;
  int64_t kk = 0;
#ifdef NEE_IGEMM_X86
  if (IgemmUseAvx2()) kk = RowSumU8Avx2(row, k, &sum);
#endif
  for (; kk < k; ++kk) sum += row[kk];
  return sum;
}

}  // namespace

bool IgemmU8S8Available() { return IgemmUseAvx2(); }

const char* IgemmU8S8KernelName() { return IgemmUseVnni() ? "vnni" : IgemmUseAvx2() ? "avx2" : "portable"; }

void IgemmPackAU8(int64_t m, int64_t k, const uint8_t* a, int64_t lda, IgemmPackedAU8* out) {
  const int64_t panel_rows = IgemmUseVnni() ? kIgemmRowsVnni : kIgemmRows;
  const int64_t quad_bytes = panel_rows * 4;
  const int64_t kquads = (k + 3) / 4;
  const int64_t panels = (m + panel_rows - 1) / panel_rows;
  out->m = m;
  out->k = k;
  out->panel_rows = panel_rows;
  out->data.resize(static_cast<size_t>(panels * kquads * quad_bytes));
  out->row_sums.resize(static_cast<size_t>(panels * panel_rows));
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t i0 = q * panel_rows, rows = std::min(panel_rows, m - i0);
    uint8_t* panel = out->data.data() + q * kquads * quad_bytes;
    // A whole 8-row panel's first k / 32 * 8 quads as 8x8 transposes of four-byte units (moves and
    // shuffles only: the bytes unchanged).
    int64_t done = 0;
#ifdef NEE_IGEMM_X86
    if (rows == kIgemmRowsVnni && panel_rows == kIgemmRowsVnni && lda % 4 == 0 && IgemmUseAvx2()) {
      done = PackAPanel8Avx2(a + i0 * lda, lda, k, panel);
    }
#endif
    for (int64_t r = 0; r < panel_rows; ++r) {
      uint8_t* d = panel + (done / 4) * quad_bytes + r * 4;
      if (r >= rows) {
        for (int64_t p = done / 4; p < kquads; ++p) std::memset(panel + p * quad_bytes + r * 4, 0, 4);
        out->row_sums[static_cast<size_t>(i0 + r)] = 0;
        continue;
      }
      const uint8_t* row = a + (i0 + r) * lda;
      int64_t kk = done;
      for (; kk + 4 <= k; kk += 4, d += quad_bytes) std::memcpy(d, row + kk, 4);
      if (kk < k) {
        uint8_t tail[4] = {};
        std::memcpy(tail, row + kk, static_cast<size_t>(k - kk));
        std::memcpy(d, tail, 4);
      }
      out->row_sums[static_cast<size_t>(i0 + r)] = static_cast<int32_t>(RowSumU8(row, k));
    }
  }
}

namespace {

#ifdef NEE_IGEMM_X86
// One k quad of a whole panel: four rows of 16 bytes transposed into 16
// columns of four bytes (byte then word interleaves).
__attribute__((target("avx2"))) void PackQuadAvx2(const int8_t* b, int64_t ldb, int8_t* d) {
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + ldb));
  const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * ldb));
  const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * ldb));
  const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
  const __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(lo01, lo23));       // columns 0-3
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), _mm_unpackhi_epi16(lo01, lo23));  // 4-7
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), _mm_unpacklo_epi16(hi01, hi23));  // 8-11
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), _mm_unpackhi_epi16(hi01, hi23));  // 12-15
}
#endif

// B as it is (the VNNI kernel's packing): each panel's quads written in
// order from four rows of 16 bytes; the column sums over whole rows.
void PackBS8Exact(int64_t k, int64_t n, const int8_t* b, int64_t ldb, IgemmPackedBS8* out) {
  const int64_t kquads = (k + 3) / 4;
  const int64_t panels = (n + kIgemmCols - 1) / kIgemmCols;
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t j0 = q * kIgemmCols, cols = std::min(kIgemmCols, n - j0);
    int8_t* d = out->data.data() + q * kquads * kQuadBytesB;
    for (int64_t p = 0; p < kquads; ++p, d += kQuadBytesB) {
#ifdef NEE_IGEMM_X86
      if (cols == kIgemmCols && 4 * p + 4 <= k) {
        PackQuadAvx2(b + 4 * p * ldb + j0, ldb, d);
        continue;
      }
#endif
      for (int64_t t = 0; t < 4 && 4 * p + t < k; ++t) {
        const int8_t* row = b + (4 * p + t) * ldb + j0;
        for (int64_t j = 0; j < cols; ++j) d[j * 4 + t] = row[j];
      }
    }
  }
  std::vector<uint32_t> sums(static_cast<size_t>(n), 0);
  for (int64_t kk = 0; kk < k; ++kk) {
    const int8_t* row = b + kk * ldb;
    for (int64_t j = 0; j < n; ++j) sums[static_cast<size_t>(j)] += static_cast<uint32_t>(static_cast<int32_t>(row[j]));
  }
  for (int64_t j = 0; j < n; ++j) out->col_sums[static_cast<size_t>(j)] = static_cast<int32_t>(sums[static_cast<size_t>(j)]);
}

}  // namespace

bool IgemmPackBS8(int64_t k, int64_t n, const int8_t* b, int64_t ldb, double max_remainder_fraction,
                  IgemmPackedBS8* out) {
  const int64_t kquads = (k + 3) / 4;
  const int64_t panels = (n + kIgemmCols - 1) / kIgemmCols;
  const int64_t pairs = (k + 1) / 2;
  const bool exact = IgemmUseVnni();  // vpdpbusd: no pair can saturate, nothing to clamp
  out->k = k;
  out->n = n;
  out->exact = exact;
  out->data.assign(static_cast<size_t>(panels * kquads * kQuadBytesB), 0);
  out->col_sums.assign(static_cast<size_t>(n), 0);
  out->remainder_begin.assign(static_cast<size_t>(panels + 1), 0);
  out->remainders.clear();
  if (exact) {
    PackBS8Exact(k, n, b, ldb, out);
    return true;
  }
  const double limit = max_remainder_fraction * static_cast<double>(pairs) * static_cast<double>(n);
  // Row pairs in order (B read row by row); the remainders gathered per column panel.
  std::vector<std::vector<IgemmPackedBS8::Remainder>> per_panel(static_cast<size_t>(panels));
  size_t count = 0;
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t k0 = 2 * p, k1 = 2 * p + 1;
    const int8_t* row0 = b + k0 * ldb;
    const int8_t* row1 = k1 < k ? b + k1 * ldb : nullptr;
    for (int64_t j = 0; j < n; ++j) {
      const int32_t b0 = row0[j];
      const int32_t b1 = row1 ? row1[j] : 0;
      int32_t& col_sum = out->col_sums[static_cast<size_t>(j)];
      col_sum = static_cast<int32_t>(static_cast<uint32_t>(col_sum) + static_cast<uint32_t>(b0 + b1));
      const int64_t q = j / kIgemmCols, jj = j % kIgemmCols;
      int32_t packed1 = b1;
      // |b0| + |b1| > 128 and one sign (both are then nonzero): the pair could
      // saturate; keep |b0| + |b1'| = 128. The rare magnitude test first, so
      // that the branch on the signs (random) is seldom taken.
      if (std::abs(b0) + std::abs(b1) > 128 && (b0 ^ b1) >= 0) {
        packed1 = (b1 > 0 ? 1 : -1) * (128 - std::abs(b0));
        per_panel[static_cast<size_t>(q)].push_back(
            {static_cast<int32_t>(k1), static_cast<int32_t>(jj), b1 - packed1});
        if (static_cast<double>(++count) > limit) return false;
      }
      int8_t* d = out->data.data() + (q * kquads + k0 / 4) * kQuadBytesB + jj * 4 + (k0 % 4);
      d[0] = static_cast<int8_t>(b0);
      d[1] = static_cast<int8_t>(packed1);
    }
  }
  out->remainders.reserve(count);
  for (int64_t q = 0; q < panels; ++q) {
    out->remainder_begin[static_cast<size_t>(q)] = static_cast<int64_t>(out->remainders.size());
    out->remainders.insert(out->remainders.end(), per_panel[static_cast<size_t>(q)].begin(),
                           per_panel[static_cast<size_t>(q)].end());
  }
  out->remainder_begin[static_cast<size_t>(panels)] = static_cast<int64_t>(out->remainders.size());
  return true;
}

void IgemmU8S8(const KernelContext* ctx, const IgemmPackedAU8& a, const IgemmPackedBS8& b, const int32_t* za,
               int64_t za_stride, const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc,
               const IgemmFloatOut* fout) {
  const int64_t row_panels = (a.m + a.panel_rows - 1) / a.panel_rows;
  const int64_t col_panels = (b.n + kIgemmCols - 1) / kIgemmCols;
  if (row_panels == 0 || col_panels == 0) return;
  auto range = [&](int64_t rp0, int64_t rp1, int64_t cp0, int64_t cp1) {
    U8S8Range(a, b, za, za_stride, zb, zb_stride, c, ldc, fout, rp0, rp1, cp0, cp1);
  };
  if (!ctx || !ctx->pool()) {
    range(0, row_panels, 0, col_panels);
    return;
  }
  // Tasks are runs of column blocks (two panels: the VNNI tile's width) of
  // at least ~64k multiply-adds; with fewer blocks than that, row panels.
  constexpr int64_t kBlockPanels = 2;
  const int64_t col_blocks = (col_panels + kBlockPanels - 1) / kBlockPanels;
  const int64_t work_per_block = std::max<int64_t>(1, a.m * a.k * kIgemmCols * kBlockPanels);
  const int64_t min_blocks = std::max<int64_t>(1, 65536 / work_per_block);
  if (col_blocks >= 2 * min_blocks || row_panels == 1) {
    ctx->ParallelFor(col_blocks, min_blocks, [&](int64_t begin, int64_t end) {
      range(0, row_panels, begin * kBlockPanels, std::min(end * kBlockPanels, col_panels));
    });
  } else {
    ctx->ParallelFor(row_panels, 1, [&](int64_t begin, int64_t end) { range(begin, end, 0, col_panels); });
  }
}

IgemmQuadTileFn IgemmQuadTile(int64_t rows, bool broadcast_unsigned) {
#ifdef NEE_IGEMM_X86
  return broadcast_unsigned ? QuadTileFor<true>(rows) : QuadTileFor<false>(rows);
#else
  (void)rows, (void)broadcast_unsigned;
  return nullptr;  // AVX2 only: callers check first (IgemmU8S8Available)
#endif
}

}  // namespace nee::cpu
