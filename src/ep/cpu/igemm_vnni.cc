// The u8 x s8 GEMM's AVX-512 VNNI tile (igemm_internal.h): kIgemmRowsVnni
// rows x 32 columns, 16 zmm accumulators; per k quad two 64-byte loads of B
// (one per 16-column panel), one broadcast of each row's four bytes of A and
// a vpdpbusd per row and panel, which adds the four u8 x s8 products of each
// lane into int32 without saturating: exact for any bytes, so B is packed
// without clamping (IgemmPackedBS8::exact). The zero points and, for
// MatMulIntegerToFloat, the dequantization are applied to the accumulators in
// registers before anything is stored (no scratch tile, masked stores at a
// ragged edge).
#include "ep/cpu/igemm_internal.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace nee::cpu {
namespace {

#define NEE_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

// GCC 12 warns about the self-initialized _mm512_undefined_ps inside its own
// intrinsics once they are inlined here; nothing of ours is uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The epilogue of one row: v = S - zb * row_term - za * col_sum (wrapping,
// as vpsubd / vpmulld do), then int32 out or float(v) * scale (+ bias). The
// float steps use the explicit-rounding forms (round to nearest, as the
// default), which a compiler never fuses into an FMA: each is rounded once,
// as Cast, Mul and Add are.
template <int kPanels>
NEE_VNNI_TARGET inline void StoreRowVnni(const __m512i (&acc)[kPanels], int64_t r, const U8S8VnniTile& t,
                                         const __m512i (&zb)[kPanels], const __m512i (&col_sum)[kPanels],
                                         const __mmask16 (&mask)[kPanels]) {
  const __m512i row_term = _mm512_set1_epi32(t.row_term[r]), za = _mm512_set1_epi32(t.za ? t.za[r] : 0);
  for (int p = 0; p < kPanels; ++p) {
    __m512i v = acc[p];
    if (!t.zb_zero) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(zb[p], row_term));
    // col_sum[p] holds za * col_sum when t.za_col_sum is set.
    v = _mm512_sub_epi32(v, t.za_col_sum ? col_sum[p] : _mm512_mullo_epi32(za, col_sum[p]));
    if (!t.scale) {
      _mm512_mask_storeu_epi32(t.c + r * t.ldc + 16 * p, mask[p], v);
      continue;
    }
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512 y = _mm512_mul_round_ps(_mm512_cvtepi32_ps(v), _mm512_loadu_ps(t.scale + 16 * p), kNearest);
    if (t.bias) y = _mm512_add_round_ps(y, _mm512_maskz_loadu_ps(mask[p], t.bias + 16 * p), kNearest);
    _mm512_mask_storeu_ps(t.out + r * t.ldo + 16 * p, mask[p], y);
  }
}

// The k loop in assembly: GCC's register allocation of the intrinsics
// renamed accumulators through vmovdqa copies inside the loop (half the full
// tile's instructions, seen in BERT's profile). zmm0-15 accumulate (row r,
// panel p in zmm(2r + p) for two panels, zmm(r) for one), zmm16-17 hold B's
// vectors and zmm18 A's broadcast; all sixteen are stored to `s` (16 x 16
// int32, by register number) for the epilogue, which reads them from L1.
// AT&T operand order: vpdpbusd signed (B), unsigned (A), accumulator.
#define NEE_VNNI_ROW2(r, lo, hi)                                                           \
  "vpbroadcastd " #r "*4(%[a]), %%zmm18\n\t"                                               \
  "vpdpbusd %%zmm16, %%zmm18, %%zmm" #lo "\n\t"                                            \
  "vpdpbusd %%zmm17, %%zmm18, %%zmm" #hi "\n\t"
#define NEE_VNNI_ROW1(r)                                                                   \
  "vpbroadcastd " #r "*4(%[a]), %%zmm18\n\t"                                               \
  "vpdpbusd %%zmm16, %%zmm18, %%zmm" #r "\n\t"
#define NEE_VNNI_LOAD2 "vmovdqu64 (%[b]), %%zmm16\n\tvmovdqu64 (%[b],%[stride]), %%zmm17\n\t"
#define NEE_VNNI_LOAD1 "vmovdqu64 (%[b]), %%zmm16\n\t"
#define NEE_VNNI_ZERO(x) "vpxord %%zmm" #x ", %%zmm" #x ", %%zmm" #x "\n\t"
#define NEE_VNNI_STORE(x) "vmovdqu64 %%zmm" #x ", " #x "*64(%[s])\n\t"
#define NEE_VNNI_LOOP(load, rows)                                                                            \
  __asm__ volatile(NEE_VNNI_ZERO(0) NEE_VNNI_ZERO(1) NEE_VNNI_ZERO(2) NEE_VNNI_ZERO(3) NEE_VNNI_ZERO(4)       \
                       NEE_VNNI_ZERO(5) NEE_VNNI_ZERO(6) NEE_VNNI_ZERO(7) NEE_VNNI_ZERO(8) NEE_VNNI_ZERO(9)   \
                           NEE_VNNI_ZERO(10) NEE_VNNI_ZERO(11) NEE_VNNI_ZERO(12) NEE_VNNI_ZERO(13)           \
                               NEE_VNNI_ZERO(14) NEE_VNNI_ZERO(15)                                           \
                   "test %[n], %[n]\n\t"                                                                     \
                   "jle 2f\n\t"                                                                              \
                   "1:\n\t" load rows                                                                        \
                   "add $32, %[a]\n\t"                                                                       \
                   "add $64, %[b]\n\t"                                                                       \
                   "dec %[n]\n\t"                                                                            \
                   "jnz 1b\n\t"                                                                              \
                   "2:\n\t" NEE_VNNI_STORE(0) NEE_VNNI_STORE(1) NEE_VNNI_STORE(2) NEE_VNNI_STORE(3)          \
                       NEE_VNNI_STORE(4) NEE_VNNI_STORE(5) NEE_VNNI_STORE(6) NEE_VNNI_STORE(7)               \
                           NEE_VNNI_STORE(8) NEE_VNNI_STORE(9) NEE_VNNI_STORE(10) NEE_VNNI_STORE(11)         \
                               NEE_VNNI_STORE(12) NEE_VNNI_STORE(13) NEE_VNNI_STORE(14) NEE_VNNI_STORE(15)   \
                   : [a] "+r"(a), [b] "+r"(b), [n] "+r"(kquads)                                              \
                   : [stride] "r"(panel_bytes), [s] "r"(s)                                                   \
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
                     "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "memory", "cc")
#define NEE_VNNI_R2_1 NEE_VNNI_ROW2(0, 0, 1)
#define NEE_VNNI_R2_2 NEE_VNNI_R2_1 NEE_VNNI_ROW2(1, 2, 3)
#define NEE_VNNI_R2_3 NEE_VNNI_R2_2 NEE_VNNI_ROW2(2, 4, 5)
#define NEE_VNNI_R2_4 NEE_VNNI_R2_3 NEE_VNNI_ROW2(3, 6, 7)
#define NEE_VNNI_R2_5 NEE_VNNI_R2_4 NEE_VNNI_ROW2(4, 8, 9)
#define NEE_VNNI_R2_6 NEE_VNNI_R2_5 NEE_VNNI_ROW2(5, 10, 11)
#define NEE_VNNI_R2_7 NEE_VNNI_R2_6 NEE_VNNI_ROW2(6, 12, 13)
#define NEE_VNNI_R2_8 NEE_VNNI_R2_7 NEE_VNNI_ROW2(7, 14, 15)
#define NEE_VNNI_R1_1 NEE_VNNI_ROW1(0)
#define NEE_VNNI_R1_2 NEE_VNNI_R1_1 NEE_VNNI_ROW1(1)
#define NEE_VNNI_R1_3 NEE_VNNI_R1_2 NEE_VNNI_ROW1(2)
#define NEE_VNNI_R1_4 NEE_VNNI_R1_3 NEE_VNNI_ROW1(3)
#define NEE_VNNI_R1_5 NEE_VNNI_R1_4 NEE_VNNI_ROW1(4)
#define NEE_VNNI_R1_6 NEE_VNNI_R1_5 NEE_VNNI_ROW1(5)
#define NEE_VNNI_R1_7 NEE_VNNI_R1_6 NEE_VNNI_ROW1(6)
#define NEE_VNNI_R1_8 NEE_VNNI_R1_7 NEE_VNNI_ROW1(7)

template <int kRows, int kPanels>
NEE_VNNI_TARGET void LoopVnni(const uint8_t* a, const int8_t* b, int64_t kquads, int32_t* s) {
  const int64_t panel_bytes = kquads * 64;
  if constexpr (kPanels == 2) {
    if constexpr (kRows == 1) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_1);
    if constexpr (kRows == 2) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_2);
    if constexpr (kRows == 3) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_3);
    if constexpr (kRows == 4) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_4);
    if constexpr (kRows == 5) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_5);
    if constexpr (kRows == 6) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_6);
    if constexpr (kRows == 7) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_7);
    if constexpr (kRows == 8) NEE_VNNI_LOOP(NEE_VNNI_LOAD2, NEE_VNNI_R2_8);
  } else {
    if constexpr (kRows == 1) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_1);
    if constexpr (kRows == 2) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_2);
    if constexpr (kRows == 3) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_3);
    if constexpr (kRows == 4) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_4);
    if constexpr (kRows == 5) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_5);
    if constexpr (kRows == 6) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_6);
    if constexpr (kRows == 7) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_7);
    if constexpr (kRows == 8) NEE_VNNI_LOOP(NEE_VNNI_LOAD1, NEE_VNNI_R1_8);
  }
}

#undef NEE_VNNI_ROW2
#undef NEE_VNNI_ROW1
#undef NEE_VNNI_LOAD2
#undef NEE_VNNI_LOAD1
#undef NEE_VNNI_ZERO
#undef NEE_VNNI_STORE
#undef NEE_VNNI_LOOP
#undef NEE_VNNI_R2_1
#undef NEE_VNNI_R2_2
#undef NEE_VNNI_R2_3
#undef NEE_VNNI_R2_4
#undef NEE_VNNI_R2_5
#undef NEE_VNNI_R2_6
#undef NEE_VNNI_R2_7
#undef NEE_VNNI_R2_8
#undef NEE_VNNI_R1_1
#undef NEE_VNNI_R1_2
#undef NEE_VNNI_R1_3
#undef NEE_VNNI_R1_4
#undef NEE_VNNI_R1_5
#undef NEE_VNNI_R1_6
#undef NEE_VNNI_R1_7
#undef NEE_VNNI_R1_8

// One row of A (a matrix-vector product: DynamicQuantizeLSTM's steps, a
// batch-1 MatMulInteger): with one or two accumulators the loop above waits
// on each vpdpbusd's latency. Here four accumulators a panel take the k
// quads in turn and are added at the end; int32 adds wrap and commute, so the
// sums are the same bits. Sums land where LoopVnni puts row 0's.
template <int kPanels>
NEE_VNNI_TARGET inline void StepOneRow(__m512i (&acc)[kPanels], const uint8_t* a, const int8_t* b, int64_t q,
                                       int64_t panel_bytes) {
  int32_t quad;
  std::memcpy(&quad, a + q * 4 * kIgemmRowsVnni, sizeof(quad));  // row 0's four bytes of quad q
  const __m512i av = _mm512_set1_epi32(quad);
  for (int p = 0; p < kPanels; ++p)
    acc[p] = _mm512_dpbusd_epi32(acc[p], av, _mm512_loadu_si512(b + q * 64 + p * panel_bytes));
}

template <int kPanels>
NEE_VNNI_TARGET void LoopVnniOneRow(const uint8_t* a, const int8_t* b, int64_t kquads, int32_t* s) {
  constexpr int kChains = 4;
  const int64_t panel_bytes = kquads * 64;
  __m512i acc[kChains][kPanels];
  for (int c = 0; c < kChains; ++c)
    for (int p = 0; p < kPanels; ++p) acc[c][p] = _mm512_setzero_si512();
  int64_t q = 0;
  for (; q + kChains <= kquads; q += kChains) {
    StepOneRow<kPanels>(acc[0], a, b, q, panel_bytes);
    StepOneRow<kPanels>(acc[1], a, b, q + 1, panel_bytes);
    StepOneRow<kPanels>(acc[2], a, b, q + 2, panel_bytes);
    StepOneRow<kPanels>(acc[3], a, b, q + 3, panel_bytes);
  }
  for (int c = 0; q < kquads; ++q, ++c) StepOneRow<kPanels>(acc[c], a, b, q, panel_bytes);
  for (int p = 0; p < kPanels; ++p)
    _mm512_store_si512(s + 16 * p, _mm512_add_epi32(_mm512_add_epi32(acc[0][p], acc[1][p]),
                                                    _mm512_add_epi32(acc[2][p], acc[3][p])));
}

template <int kRows, int kPanels>
NEE_VNNI_TARGET void TileVnni(const U8S8VnniTile& t) {
  static_assert(kRows >= 1 && kRows <= kIgemmRowsVnni && (kPanels == 1 || kPanels == 2), "tile shape");
  alignas(64) int32_t sums[16 * 16];
  if constexpr (kRows == 1) LoopVnniOneRow<kPanels>(t.a, t.b, t.kquads, sums);
  else LoopVnni<kRows, kPanels>(t.a, t.b, t.kquads, sums);
  __m512i acc[kRows][kPanels];
  for (int r = 0; r < kRows; ++r)
    for (int p = 0; p < kPanels; ++p) acc[r][p] = _mm512_load_si512(sums + (kPanels * r + p) * 16);
  __m512i zb[kPanels], col_sum[kPanels];
  __mmask16 mask[kPanels];
  for (int p = 0; p < kPanels; ++p) {
    zb[p] = _mm512_loadu_si512(t.zb + 16 * p);
    col_sum[p] = _mm512_loadu_si512((t.za_col_sum ? t.za_col_sum : t.col_sum) + 16 * p);
    const int64_t left = t.cols - 16 * p;
    mask[p] = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) StoreRowVnni<kPanels>(acc[r], r, t, zb, col_sum, mask);
}

using TileFn = void (*)(const U8S8VnniTile&);

template <int kPanels>
TileFn TileFor(int64_t rows) {
  switch (rows) {
    case 1: return TileVnni<1, kPanels>;
    case 2: return TileVnni<2, kPanels>;
    case 3: return TileVnni<3, kPanels>;
    case 4: return TileVnni<4, kPanels>;
    case 5: return TileVnni<5, kPanels>;
    case 6: return TileVnni<6, kPanels>;
    case 7: return TileVnni<7, kPanels>;
    default: return TileVnni<8, kPanels>;
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void U8S8TileVnni(int64_t rows, int64_t panels, const U8S8VnniTile& t) {
  (panels == 2 ? TileFor<2>(rows) : TileFor<1>(rows))(t);
}

}  // namespace nee::cpu

#else

namespace nee::cpu {
// Not reached: IgemmUseVnni() is false off x86.
void U8S8TileVnni(int64_t, int64_t, const U8S8VnniTile&) {}
}  // namespace nee::cpu

#endif
