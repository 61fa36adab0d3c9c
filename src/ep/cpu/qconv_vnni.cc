// QLinearConv's tiles on AVX-512 VNNI (qconv_vnni.h).
#include "ep/cpu/qconv_vnni.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ep/cpu/qconv_requant_avx512.h"
#include "ep/cpu/qconv_vnni_step.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QCONV_X86 1
#define NEE_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#endif

namespace nee::cpu::qconv {

bool QConvVnniActive() {
#ifdef NEE_QCONV_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has && SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced();
#else
  return false;
#endif
}

bool QConvHasVbmi() {
#ifdef NEE_QCONV_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi");
  return has;
#else
  return false;
#endif
}

#ifdef NEE_QCONV_X86
NEE_QCONV_AVX512_WARNINGS_OFF  // GCC 12's false positives inside its intrinsics
namespace {

constexpr int64_t kQuadW = kRowsPerPanel * 4;  // one k quad of a weight panel
constexpr int64_t kQuadX = kCols * 4;          // one k quad of a pixel panel

inline int32_t LoadQuad(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// kR rows x kP pixel panels. The loops are unrolled completely so that acc stays in registers (24 of the 32
// zmm at most; two more hold X's quads). vpdpbusd's second operand is the unsigned one (X), its third the
// signed one (the broadcast weights).
template <int kR, int kP>
NEE_VNNI_TARGET __attribute__((always_inline)) inline void AccumulateVnni(__m512i (&acc)[kR][kP], const int8_t* w,
                                                                         int64_t w_panel, const uint8_t* x,
                                                                         int64_t x_panel, int64_t kquads) {
  static_assert(kR >= 1 && kR <= kVnniRows && kP >= 1 && kP <= kVnniPanels, "tile shape");
  const int8_t* w1 = w + w_panel;
  for (int64_t q = 0; q < kquads; ++q) {
    __m512i xv[kP];
#pragma GCC unroll 2
    for (int p = 0; p < kP; ++p) xv[p] = _mm512_load_si512(x + p * x_panel + q * kQuadX);
    VnniQuadStep<kR, kP>(acc, xv, w + q * kQuadW, w1 + q * kQuadW);
  }
}

template <int kR, int kP>
NEE_VNNI_TARGET void TileVnni(const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t x_panel, int64_t kquads,
                              int32_t* s) {
  __m512i acc[kR][kP];
  ZeroVnniAcc<kR, kP>(acc);
  AccumulateVnni<kR, kP>(acc, w, w_panel, x, x_panel, kquads);
  StoreVnniSums<kR, kP>(acc, s);
}

}  // namespace

// One k quad of a whole tile's loop: row r's weight quad (byte `at` of the first weight panel, or of the second,
// w_panel bytes further) broadcast by vpdpbusd itself against the sixteen pixels' quads in zmm31.
#define NEE_WHOLE_ROW(r, at) "vpdpbusd " #at "(%[w])%{1to16%}, %%zmm31, %[a" #r "]\n\t"
#define NEE_WHOLE_ROW2(r, at) "vpdpbusd " #at "(%[w],%[wp])%{1to16%}, %%zmm31, %[a" #r "]\n\t"

// A whole tile of one pixel panel requantized in registers (RequantStoreVnniTile), its accumulators started at
// the constants. The k loop is written out: with the accumulators read by the requantization afterwards,
// GCC 12 copied all twelve into other registers and back every k quad. One panel, not two: the
// requantization's temporaries beside 24 live accumulators spilled them in the loop (measured 2x slower),
// and twelve rows of a panel leave room for them (a 64-channel 1x1 conv at 56x56 ran 6% faster than as
// 12 x 32 tiles requantized from memory). (30 asm operands at most: the pixels' register is a clobber.)
NEE_VNNI_TARGET void WholeTileVnni(const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t kquads,
                                   const VnniTileOut& out) {
  static_assert(kQuadW == 24 && kQuadX == 64, "the loop's strides");
  const int32_t* c = out.q->constant + out.m0;
  __m512i a0 = _mm512_set1_epi32(c[0]), a1 = _mm512_set1_epi32(c[1]), a2 = _mm512_set1_epi32(c[2]),
          a3 = _mm512_set1_epi32(c[3]), a4 = _mm512_set1_epi32(c[4]), a5 = _mm512_set1_epi32(c[5]),
          a6 = _mm512_set1_epi32(c[6]), a7 = _mm512_set1_epi32(c[7]), a8 = _mm512_set1_epi32(c[8]),
          a9 = _mm512_set1_epi32(c[9]), a10 = _mm512_set1_epi32(c[10]), a11 = _mm512_set1_epi32(c[11]);
  const uint8_t* x_end = x + kquads * kQuadX;
  if (kquads > 0)
    __asm__(
        "1:\n\t"
        "vmovdqa64 (%[x]), %%zmm31\n\t"
        NEE_WHOLE_ROW(0, 0) NEE_WHOLE_ROW(1, 4) NEE_WHOLE_ROW(2, 8) NEE_WHOLE_ROW(3, 12) NEE_WHOLE_ROW(4, 16)
        NEE_WHOLE_ROW(5, 20) NEE_WHOLE_ROW2(6, 0) NEE_WHOLE_ROW2(7, 4) NEE_WHOLE_ROW2(8, 8)
        NEE_WHOLE_ROW2(9, 12) NEE_WHOLE_ROW2(10, 16) NEE_WHOLE_ROW2(11, 20)
        "add $24, %[w]\n\t"
        "add $64, %[x]\n\t"
        "cmp %[x_end], %[x]\n\t"
        "jne 1b\n\t"
        : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5),
          [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11),
          [w] "+r"(w), [x] "+r"(x)
        : [wp] "r"(w_panel), [x_end] "r"(x_end)
        : "xmm31", "cc", "memory");
  const __m512i acc[kVnniRows][1] = {{a0}, {a1}, {a2}, {a3}, {a4}, {a5}, {a6}, {a7}, {a8}, {a9}, {a10}, {a11}};
  RequantStoreVnniTile<1>(acc, out);
}
#undef NEE_WHOLE_ROW2
#undef NEE_WHOLE_ROW

namespace {

// The first eight pixels of one panel (the first 32 bytes of each 64-byte quad), on ymm.
template <int kR>
NEE_VNNI_TARGET void HalfTileVnni(const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t, int64_t kquads,
                                  int32_t* s) {
  __m256i acc[kR];
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_si256();
  const int8_t* w1 = w + w_panel;
  for (int64_t q = 0; q < kquads; ++q) {
    const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + q * kQuadX));
#pragma GCC unroll 12
    for (int r = 0; r < kR; ++r) {
      const int8_t* quad = r < kRowsPerPanel ? w + q * kQuadW + 4 * r : w1 + q * kQuadW + 4 * (r - kRowsPerPanel);
      acc[r] = _mm256_dpbusd_epi32(acc[r], xv, _mm256_set1_epi32(LoadQuad(quad)));
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * kCols), acc[r]);
}

// The first kPixels pixels of one panel, each pixel's quads broadcast against the weights: a zmm of a weight
// panel at quad q holds quads q (lanes 0-5: six rows' four bytes) and q + 1 (lanes 6-11) of the panel, and
// 4 rows of q + 2 (lanes 12-15); the pixel's vector holds its quad q in lanes 0-5, q + 1 in lanes 6-11 and
// zeros in 12-15, so one vpdpbusd does two k quads of six rows. Both weight panels
// (rows past six) share the pixel's vectors. kChains chains of accumulators over the steps, so that the
// short tiles do not wait out vpdpbusd's latency; chains and the two halves added at the end (int32 sums
// wrap alike in any order). The last quads are read by masked loads (nothing past the panel).
// One step: two quads from q (one when `pair` is false) of every pixel times kPanels weight panels, into
// one chain of accumulators.
template <int kPixels, int kPanels>
NEE_VNNI_TARGET __attribute__((always_inline)) inline void PixelStep(__m512i (&acc)[kPanels][kPixels],
                                                                   const __m512i (&deal)[kPixels], const int8_t* w,
                                                                   int64_t w_panel, const uint8_t* x, int64_t q,
                                                                   __mmask16 wmask, bool pair) {
  // The pixels' quads q (dwords 0 .. kPixels - 1) and q + 1 (kPixels ..), side by side in x ([kquads][kPixels][4]),
  // then each pixel's two dealt out by one vpermd (lanes 12-15 zeroed by its mask; 6-11 too for a lone quad).
  const __m512i both = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << ((pair ? 2 : 1) * kPixels)) - 1),
                                                x + q * kPixels * 4);
  __m512i xv[kPixels];
#pragma GCC unroll 5
  for (int j = 0; j < kPixels; ++j) xv[j] = _mm512_maskz_permutexvar_epi32(pair ? 0x0FFF : 0x003F, deal[j], both);
#pragma GCC unroll 2
  for (int p = 0; p < kPanels; ++p) {
    const __m512i wv = _mm512_maskz_loadu_epi32(wmask, w + p * w_panel + q * kQuadW);
#pragma GCC unroll 5
    for (int j = 0; j < kPixels; ++j) acc[p][j] = _mm512_dpbusd_epi32(acc[p][j], xv[j], wv);
  }
}

template <int kPixels, int kPanels>
NEE_VNNI_TARGET void PixelTilePanels(int64_t rows, const int8_t* w, int64_t w_panel, const uint8_t* x,
                                     int64_t kquads, int32_t* s) {
  constexpr int kChains = kPixels * kPanels <= 2 ? 4 : kPixels * kPanels <= 4 ? 2 : 1;
  __m512i deal[kPixels];  // pixel j: dword j six times, then dword kPixels + j six times
#pragma GCC unroll 5
  for (int j = 0; j < kPixels; ++j) deal[j] = _mm512_mask_set1_epi32(_mm512_set1_epi32(j), 0x0FC0, kPixels + j);
  __m512i acc[kChains][kPanels][kPixels];
#pragma GCC unroll 4
  for (int c = 0; c < kChains; ++c)
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p)
#pragma GCC unroll 5
      for (int j = 0; j < kPixels; ++j) acc[c][p][j] = _mm512_setzero_si512();
  int64_t q = 0;
  // Whole loads while quad q + 2 exists (its four rows in lanes 12-15 are read, times zero).
  for (; q + 2 * kChains + 1 <= kquads; q += 2 * kChains)
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) PixelStep<kPixels, kPanels>(acc[c], deal, w, w_panel, x, q + 2 * c, 0xFFFF, true);
  for (; q + 3 <= kquads; q += 2) PixelStep<kPixels, kPanels>(acc[0], deal, w, w_panel, x, q, 0xFFFF, true);
  if (q + 2 == kquads) PixelStep<kPixels, kPanels>(acc[0], deal, w, w_panel, x, q, 0x0FFF, true);
  if (q + 1 == kquads) PixelStep<kPixels, kPanels>(acc[0], deal, w, w_panel, x, q, 0x003F, false);
  const __m512i upper = _mm512_setr_epi32(6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  // Unrolled like the loops above, so that acc stays in registers (an indexed acc lives on the stack).
#pragma GCC unroll 2
  for (int p = 0; p < kPanels; ++p)
#pragma GCC unroll 5
    for (int j = 0; j < kPixels; ++j) {
      __m512i sum = acc[0][p][j];
#pragma GCC unroll 4
      for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c][p][j]);
      sum = _mm512_add_epi32(sum, _mm512_permutexvar_epi32(upper, sum));
      alignas(64) int32_t lanes[16];
      _mm512_store_si512(lanes, sum);
      for (int64_t r = 0; r < kRowsPerPanel && p * kRowsPerPanel + r < rows; ++r)
        s[(p * kRowsPerPanel + r) * kCols + j] = lanes[r];
    }
}

template <int kPixels>
void PixelTileVnni(int64_t rows, const int8_t* w, int64_t w_panel, const uint8_t* x, int64_t kquads, int32_t* s) {
  if (rows > kRowsPerPanel) return PixelTilePanels<kPixels, 2>(rows, w, w_panel, x, kquads, s);
  PixelTilePanels<kPixels, 1>(rows, w, w_panel, x, kquads, s);
}

template <int kP, int... kR>
VnniTileFn TileByRows(int64_t rows, std::integer_sequence<int, kR...>) {
  static constexpr VnniTileFn kTiles[] = {TileVnni<kR + 1, kP>...};
  return kTiles[rows - 1];
}

template <int... kR>
VnniTileFn HalfByRows(int64_t rows, std::integer_sequence<int, kR...>) {
  static constexpr VnniTileFn kTiles[] = {HalfTileVnni<kR + 1>...};
  return kTiles[rows - 1];
}

}  // namespace

VnniTileFn VnniTile(int64_t rows, int64_t panels) {
  const auto all = std::make_integer_sequence<int, kVnniRows>();
  return panels == 1 ? TileByRows<1>(rows, all) : TileByRows<2>(rows, all);
}

VnniTileFn VnniHalfTile(int64_t rows) { return HalfByRows(rows, std::make_integer_sequence<int, kVnniRows>()); }

VnniPixelTileFn VnniPixelTile(int64_t pixels) {
  static constexpr VnniPixelTileFn kByCount[kVnniFewPixels] = {PixelTileVnni<1>, PixelTileVnni<2>, PixelTileVnni<3>,
                                                               PixelTileVnni<4>, PixelTileVnni<5>};
  return kByCount[pixels - 1];
}

// Padded rows of at most 64 bytes (images up to 62 wide with a pad of one) are written whole, once: the row's
// bytes loaded into place by one masked load from x - pw (the zero point, flipped back and forth, in the other
// lanes), flipped, and stored by one masked store; the rows above and below by one store each. Wider rows: each
// plane filled with the pad first, then each row's bytes copied (flipped) by masked 64-byte loads and stores.
NEE_VNNI_TARGET void PadImageAvx512(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad,
                                    uint8_t* dst) {
  const __m512i flip_bytes = _mm512_set1_epi8(static_cast<char>(flip)), fill = _mm512_set1_epi8(static_cast<char>(pad));
  if (g.wp <= 64) {
    const __mmask64 row_mask = g.wp == 64 ? ~__mmask64{0} : (__mmask64{1} << g.wp) - 1;
    const __mmask64 data = ((g.iw == 64 ? ~__mmask64{0} : (__mmask64{1} << g.iw) - 1) << g.pw);
    const __m512i fill_flipped = _mm512_xor_si512(fill, flip_bytes);
    for (int64_t c = 0; c < g.Cg; ++c) {
      uint8_t* plane = dst + c * g.hp * g.wp;
      for (int64_t y = 0; y < g.hp; ++y) {
        const int64_t iy = y - g.ph;
        __m512i row = fill;
        if (iy >= 0 && iy < g.ih)
          row = _mm512_xor_si512(_mm512_mask_loadu_epi8(fill_flipped, data, x + (c * g.ih + iy) * g.iw - g.pw),
                                 flip_bytes);
        _mm512_mask_storeu_epi8(plane + y * g.wp, row_mask, row);
      }
    }
    return;
  }
  for (int64_t c = 0; c < g.Cg; ++c) {
    uint8_t* plane = dst + c * g.hp * g.wp;
    std::memset(plane, pad, static_cast<size_t>(g.hp * g.wp));
    for (int64_t y = 0; y < g.ih; ++y) {
      const uint8_t* src = x + (c * g.ih + y) * g.iw;
      uint8_t* row = plane + (y + g.ph) * g.wp + g.pw;
      for (int64_t k = 0; k < g.iw; k += 64) {
        const int64_t n = std::min<int64_t>(64, g.iw - k);
        const __mmask64 m = n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
        _mm512_mask_storeu_epi8(row + k, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + k), flip_bytes));
      }
    }
  }
}


// Sixteen lanes at once (RequantRow16), four whole rows narrowed and checked together (RequantRows4); with
// `pair`, the second pixel panel's sums (kVnniRows * kCols further, stored kCols further) in the same loop, its
// four rows beside the first panel's, so that their long convert chains overlap.
NEE_VNNI_TARGET void FinishTilesAvx512(const int32_t* sums, int64_t rows, int64_t count, bool pair,
                                       int64_t second_count, const int32_t* constant, const double* mult,
                                       const float* mult_f, const Requant& q, uint8_t* out, int64_t ld) {
  const RequantZ z = MakeRequantZ(q.yzp, q.float_exact);
  const int32_t* sums2 = sums + kVnniRows * kCols;
  uint8_t* out2 = out + kCols;
  auto with_constant = [&](const int32_t* s, int64_t r) NEE_VNNI_TARGET {
    return _mm512_add_epi32(_mm512_loadu_si512(s + r * kCols), _mm512_set1_epi32(constant[r]));
  };
  const bool whole = count == kCols, whole2 = pair && second_count == kCols;
  int64_t r = 0;
  if (whole)
    for (; r + 4 <= rows; r += 4) {
      const __m512i s[4] = {with_constant(sums, r), with_constant(sums, r + 1), with_constant(sums, r + 2),
                            with_constant(sums, r + 3)};
      const __m512i bytes = RequantRows4(s, mult_f + r, mult + r, z, q.y_signed);
      if (whole2) {
        const __m512i s2[4] = {with_constant(sums2, r), with_constant(sums2, r + 1), with_constant(sums2, r + 2),
                               with_constant(sums2, r + 3)};
        StoreRows4x16(RequantRows4(s2, mult_f + r, mult + r, z, q.y_signed), out2 + r * ld, ld);
      }
      StoreRows4x16(bytes, out + r * ld, ld);
    }
  const int64_t done2 = whole2 ? r : 0;  // the second panel's rows already stored
  const __mmask16 store = static_cast<__mmask16>((1u << count) - 1);
  for (; r < rows; ++r)
    StoreRow16(RequantRow16(with_constant(sums, r), mult_f[r], mult[r], z), q.y_signed, store, whole,
               out + r * ld);
  if (!pair) return;
  const __mmask16 store2 = static_cast<__mmask16>((1u << second_count) - 1);
  for (r = done2; r < rows; ++r)
    StoreRow16(RequantRow16(with_constant(sums2, r), mult_f[r], mult[r], z), q.y_signed, store2, whole2,
               out2 + r * ld);
}

NEE_VNNI_TARGET void FinishTileAvx512(const int32_t* sums, int64_t rows, int64_t count, const int32_t* constant,
                                      const double* mult, const float* mult_f, const Requant& q, uint8_t* out,
                                      int64_t ld) {
  FinishTilesAvx512(sums, rows, count, false, 0, constant, mult, mult_f, q, out, ld);
}

NEE_QCONV_AVX512_WARNINGS_ON
#endif

}  // namespace nee::cpu::qconv
