// QLinearConv's whole AVX2 tile requantized in registers (qconv_tile_avx2.h).
//
// The sums are igemm's quad tile's (QuadTileAvx2 in igemm_u8s8.cc: per k quad and row, vpmaddubsw of the
// pixels' unsigned quads by the row's broadcast signed quad, vpmaddwd by ones, vpaddd; each pair sum exact,
// as no packed pair saturates, so the int32 sums are exact modulo 2^32 in any order). The requantization is
// the AVX-512 tiles' float shortcut (qconv_requant_avx512.h, RequantRows4, where the proof is) on eight
// lanes: A = float(s), L = fma(A, m, yzp - delta), H = fma(A, m, yzp + delta), D (the reference's double
// value) strictly between L and H; both converted half to even and narrowed with saturation; where the bytes
// of L and H agree they are D's (delta 2^-13 here, a quarter of the AVX-512 tiles': see TileRequantAvx2). A pair of
// rows whose bytes differ somewhere (ties and near-ties, rare) has its sums formed again and goes through
// FinishTileAvx2, the reference's double arithmetic. Against igemm's tile plus FinishTileAvx2 this
// saves the twelve stores and reloads of the sums and half the conversion work (eight float lanes a step
// where the double path converts four): 1x1 convs over 64 channels spent a fifth of their time there.
// Where planning proved one fma exact for the node's multipliers (Requant::float_exact, RoundingFmaExact in
// qconv_common.cc: the fma itself rounds to an integer), the tiles (kExact) form one value a lane, no bracket
// and no compare: a third of a small-K tile's requantization.
#include "ep/cpu/qconv_tile_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>

namespace nee::cpu::qconv {

namespace {

constexpr int kTileRows = 6;

// One row's sixteen sums converted to float, then fma(a, m, z) for z = z_lo and z_hi, each converted half to
// even and narrowed to int16 with saturation (within 128-bit lanes: pixels 0-3, 8-11 in lane 0, 4-7, 12-15 in
// lane 1): the row's values done before the next row's are converted, so that few registers are live at once
// beside the other rows' accumulators (two rows' floats at once made the compiler spill).
__attribute__((target("avx2,fma"), always_inline)) inline void NarrowRow(__m256i s_lo, __m256i s_hi, __m256 m,
                                                                       __m256 z_lo, __m256 z_hi, __m256i* low,
                                                                       __m256i* high) {
  const __m256 a0 = _mm256_cvtepi32_ps(s_lo), a1 = _mm256_cvtepi32_ps(s_hi);
  *low = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_fmadd_ps(a0, m, z_lo)),
                            _mm256_cvtps_epi32(_mm256_fmadd_ps(a1, m, z_lo)));
  *high = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_fmadd_ps(a0, m, z_hi)),
                             _mm256_cvtps_epi32(_mm256_fmadd_ps(a1, m, z_hi)));
}

// What a row pair's fallback needs to form its sums again: the tile's arguments as TileRequantAvx2 got them.
struct TileArgs {
  const int8_t* w;
  const uint8_t* x;
  int64_t kquads;
  const TileRemainder* rem;
  const int64_t* rem_begin;
  const int32_t* sums = nullptr;  // the tile's sums as stored (rows kCols apart), or formed again if null
};

// Rows r0 .. r0 + rows - 1 of the tile (1 or 2) formed again, their constants and remainders included, and
// requantized by the reference's double arithmetic (FinishTileAvx2): for the rare pair whose float shortcut
// cannot tell (RequantRowPair). One k quad at a time whatever the packing: a paired panel's lanes fit two quads'
// pair sums in int16, so each quad's alone fits too, and the int32 sums wrap alike in any order. Forming them
// again here, not keeping the tile's, frees the four registers the sums held while the pair's floats are
// formed (the compiler spilled and reloaded accumulators around every pair's requantization).
__attribute__((target("avx2"), noinline)) void RequantPairByDouble(const TileArgs& t, int64_t r0, int64_t rows,
                                                                    const Requant& q, int64_t m, uint8_t* out,
                                                                    int64_t ld) {
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) int32_t sums[2 * kCols];
  for (int64_t r = 0; r < rows; ++r) {
    __m256i lo = _mm256_set1_epi32(q.constant[m + r]), hi = lo;
    const int8_t* w = t.w + 4 * (r0 + r);
    for (int64_t p = 0; p < t.kquads; ++p) {
      int32_t quad;
      std::memcpy(&quad, w + p * kTileRows * 4, sizeof quad);
      const __m256i av = _mm256_set1_epi32(quad);
      const uint8_t* xp = t.x + p * kCols * 4;
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp)), av), ones));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + 32)), av), ones));
    }
    for (const TileRemainder* e = t.rem + t.rem_begin[r0 + r]; e != t.rem + t.rem_begin[r0 + r + 1]; ++e) {
      const __m256i v = _mm256_set1_epi32(e->pair);
      const uint8_t* xq = t.x + (e->offset & ~kEvenBytes);
      const __m128i up = _mm_cvtsi32_si128((e->offset & kEvenBytes) * 8);
      const __m256i a = _mm256_sll_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), up);
      const __m256i b = _mm256_sll_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)), up);
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_srli_epi16(a, 8), v));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_srli_epi16(b, 8), v));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums + r * kCols), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums + r * kCols + 8), hi);
  }
  static constexpr int32_t kNoConstants[2] = {0, 0};  // the sums hold them already
  FinishTileAvx2(sums, rows, kCols, kNoConstants, q.mult + m, q, out, ld);
}

// Two rows' sixteen sums each (their constants included: rows r0 and r0 + 1 of the tile, channels m and m + 1)
// requantized, stored at out and out + ld; with kRows 1 the first row alone (the second is a copy of it, neither
// stored nor read past channel m). The sums are dead once converted to floats: a pair the shortcut cannot tell
// forms them again (RequantPairByDouble).
template <int kRows, bool kSigned, bool kExact>
__attribute__((target("avx2,fma"), always_inline)) inline void RequantRowPair(
    __m256i r0_lo, __m256i r0_hi, __m256i r1_lo, __m256i r1_hi, const Requant& q, int64_t m, __m256 z_lo,
    __m256 z_hi, uint8_t* out, int64_t ld, const TileArgs& t, int64_t r0) {
  const int64_t m_second = kRows == 2 ? m + 1 : m;
  if constexpr (kExact) {  // one fma a vector gives the reference's bytes (RoundingFma8): no bracket, no check
    const __m256 z = _mm256_set1_ps(static_cast<float>(q.yzp) + kRoundingBias);
    const __m256 m0 = _mm256_set1_ps(q.mult_f[m]), m1 = _mm256_set1_ps(q.mult_f[m_second]);
    const __m256i w0 = _mm256_packs_epi32(RoundingFma8(r0_lo, m0, z), RoundingFma8(r0_hi, m0, z));
    const __m256i w1 = _mm256_packs_epi32(RoundingFma8(r1_lo, m1, z), RoundingFma8(r1_hi, m1, z));
    const __m256i bytes = kSigned ? _mm256_packs_epi16(w0, w1) : _mm256_packus_epi16(w0, w1);
    const __m256i rows = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(rows));
    if constexpr (kRows == 2) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + ld), _mm256_extracti128_si256(rows, 1));
    return;
  }
  __m256i low0, high0, low1, high1;
  NarrowRow(r0_lo, r0_hi, _mm256_set1_ps(q.mult_f[m]), z_lo, z_hi, &low0, &high0);
  NarrowRow(r1_lo, r1_hi, _mm256_set1_ps(q.mult_f[m_second]), z_lo, z_hi, &low1, &high1);
  // Bytes: lane 0 holds row 0's pixels 0-3, 8-11, row 1's 0-3, 8-11; lane 1 the same rows' pixels 4-7, 12-15.
  const __m256i low = kSigned ? _mm256_packs_epi16(low0, low1) : _mm256_packus_epi16(low0, low1);
  const __m256i high = kSigned ? _mm256_packs_epi16(high0, high1) : _mm256_packus_epi16(high0, high1);
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(low, high)) == -1) {
    // Dwords in pixel order: row 0 in the low half, row 1 in the high half.
    const __m256i rows = _mm256_permutevar8x32_epi32(low, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(rows));
    if constexpr (kRows == 2) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + ld), _mm256_extracti128_si256(rows, 1));
    return;
  }
  if (t.sums) {  // the tile's sums kept (the paired tile stores them after each pass)
    static constexpr int32_t kNoConstants[2] = {0, 0};  // the sums hold them already
    FinishTileAvx2(t.sums + r0 * kCols, kRows, kCols, kNoConstants, q.mult + m, q, out, ld);
    return;
  }
  RequantPairByDouble(t, r0, kRows, q, m, out, ld);
}

// kRows (1-6) rows of the tile: the sums in registers (rows past kRows not computed), each row's clamped-weight
// remainders added (bytes 1 and 3, or 0 and 2, of each listed quad of X as 16-bit halves, times the two
// remainders by vpmaddwd: AddRemaindersAvx2 in qconv_fast.cc), requantized and stored.
// kSigned: int8 output (else uint8), fixed at compile time so that the narrowing has no branch.
// Weights packed paired take PairedTileRequantAvx2 below.
template <int kRows, bool kSigned, bool kExact>
__attribute__((target("avx2,fma"), noinline)) void TileRequantAvx2(const int8_t* w, const uint8_t* x, int64_t kquads,
                                                         const TileRemainder* rem, const int64_t* rem_begin,
                                                         const int64_t* rem_odd, const Requant& q, int64_t m0,
                                                         uint8_t* out, int64_t ld) {
  const uint8_t* const x0 = x;
  const TileArgs args{w, x, kquads, rem, rem_begin};
  // vpmaddwd reads the ones from memory: twelve accumulators, the two pixel vectors, the broadcast weights and
  // one product fill the sixteen registers, where a ones register made the compiler spill an accumulator and
  // reload and store it every k quad.
  alignas(32) static constexpr int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  // Each row's sums start from its constant (int32 sums wrap alike in any order), which saves the requantization
  // an add per vector.
#define NEE_TILE_START(r) (kRows > r ? _mm256_set1_epi32(q.constant[m0 + r]) : _mm256_setzero_si256())
  __m256i c00 = NEE_TILE_START(0), c01 = c00, c10 = NEE_TILE_START(1), c11 = c10, c20 = NEE_TILE_START(2), c21 = c20;
  __m256i c30 = NEE_TILE_START(3), c31 = c30, c40 = NEE_TILE_START(4), c41 = c40, c50 = NEE_TILE_START(5), c51 = c50;
#undef NEE_TILE_START
  for (int64_t p = 0; p < kquads; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
// Accumulators named, not indexed, so that they stay in registers.
#define NEE_TILE_ROW(r)                                                                            \
  if constexpr (kRows > r) {                                                                       \
    int32_t quad;                                                                                  \
    std::memcpy(&quad, w + 4 * r, sizeof quad);                                                    \
    __m256i av = _mm256_set1_epi32(quad);                                                          \
    __m256i t = _mm256_maddubs_epi16(b0, av);                                                      \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(t) : "m"(kOnes));                                         \
    c##r##0 = _mm256_add_epi32(c##r##0, t);                                                        \
    av = _mm256_maddubs_epi16(b1, av);                                                             \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(av) : "m"(kOnes));                                        \
    c##r##1 = _mm256_add_epi32(c##r##1, av);                                                       \
    __asm__ volatile("" : "+x"(c##r##0), "+x"(c##r##1));                                           \
  }
    NEE_TILE_ROW(0)
    NEE_TILE_ROW(1)
    NEE_TILE_ROW(2)
    NEE_TILE_ROW(3)
    NEE_TILE_ROW(4)
    NEE_TILE_ROW(5)
#undef NEE_TILE_ROW
    w += kTileRows * 4;
    x += kCols * 4;
  }
  if (rem_begin[0] != rem_begin[kTileRows]) {
    // Entries at bytes 0 and 2 of their quads first (each 16-bit half of X masked to its low byte), then those
    // at bytes 1 and 3 (shifted right by 8): one operation a vector, where a per-entry shift count took two
    // shifts and moving the count into a vector register (remainders were 8% of a 3x3 conv over 64 channels).
    alignas(32) static constexpr int16_t kLowBytes[16] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                          0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
#define NEE_TILE_REMAINDERS(r)                                                                                     \
  if constexpr (kRows > r) {                                                                                       \
    const TileRemainder* e = rem + rem_begin[r];                                                                   \
    for (const TileRemainder* odd = rem + rem_odd[r]; e != odd; ++e) {                                             \
      const __m256i v = _mm256_set1_epi32(e->pair);                                                                \
      const uint8_t* xq = x0 + (e->offset & ~kEvenBytes);                                                          \
      __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));                                       \
      __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32));                                  \
      __asm__("vpand %1, %0, %0" : "+x"(lo) : "m"(kLowBytes));                                                     \
      __asm__("vpand %1, %0, %0" : "+x"(hi) : "m"(kLowBytes));                                                     \
      c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(lo, v));                                               \
      c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(hi, v));                                               \
    }                                                                                                              \
    for (const TileRemainder* end = rem + rem_begin[r + 1]; e != end; ++e) {                                       \
      const __m256i v = _mm256_set1_epi32(e->pair);                                                                \
      const uint8_t* xq = x0 + e->offset;                                                                          \
      const __m256i lo = _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), 8);          \
      const __m256i hi = _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)), 8);     \
      c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(lo, v));                                               \
      c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(hi, v));                                               \
    }                                                                                                              \
  }
    NEE_TILE_REMAINDERS(0)
    NEE_TILE_REMAINDERS(1)
    NEE_TILE_REMAINDERS(2)
    NEE_TILE_REMAINDERS(3)
    NEE_TILE_REMAINDERS(4)
    NEE_TILE_REMAINDERS(5)
#undef NEE_TILE_REMAINDERS
  }
  // A quarter of the AVX-512 tiles' 2^-11, with room to spare: where |E| <= 512, |L - (E - delta)| <=
  // 767 * 2^-24 (A's rounding: |s m| <= 512 + 255) + 2^-15 (the fma's, half an ulp below 1024) < 7.7e-5 <
  // 2^-13 = 1.2e-4, so L < D < H still; yzp +- 2^-13 (yzp an integer of at most 255 in magnitude, 21 bits) is
  // exact in float. Near-ties within delta of a half send a pair to the double arithmetic: 1 in 2^12 values
  // (with 2^-11, 3% of the pairs of a 1x1 conv over 32 channels fell back, 4% of its time; RequantPairByDouble
  // was 1.3% of ResNet-50 int8 with 2^-12).
  const float delta = 1.0f / 8192;
  const __m256 z_lo = _mm256_set1_ps(static_cast<float>(q.yzp) - delta),
               z_hi = _mm256_set1_ps(static_cast<float>(q.yzp) + delta);
  if constexpr (kRows >= 2) RequantRowPair<2, kSigned, kExact>(c00, c01, c10, c11, q, m0, z_lo, z_hi, out, ld, args, 0);
  if constexpr (kRows == 1) RequantRowPair<1, kSigned, kExact>(c00, c01, c00, c01, q, m0, z_lo, z_hi, out, ld, args, 0);
  if constexpr (kRows >= 4) RequantRowPair<2, kSigned, kExact>(c20, c21, c30, c31, q, m0 + 2,
                                                               z_lo, z_hi, out + 2 * ld, ld, args, 2);
  if constexpr (kRows == 3) RequantRowPair<1, kSigned, kExact>(c20, c21, c20, c21, q, m0 + 2,
                                                               z_lo, z_hi, out + 2 * ld, ld, args, 2);
  if constexpr (kRows == 6) RequantRowPair<2, kSigned, kExact>(c40, c41, c50, c51, q, m0 + 4,
                                                               z_lo, z_hi, out + 4 * ld, ld, args, 4);
  if constexpr (kRows == 5) RequantRowPair<1, kSigned, kExact>(c40, c41, c40, c41, q, m0 + 4,
                                                               z_lo, z_hi, out + 4 * ld, ld, args, 4);
}

// Rows r0 .. r0 + kPass - 1 (at most 3) of a paired tile: each row's sums from its constant over the k quads two
// at a time (the two quads' vpmaddubsw pair sums added in int16, exactly, as the packing cut the weights for,
// then one vpmaddwd by ones), a last odd quad alone, then the rows' remainders; into acc[r][half].
// Three rows a pass, not six: each row's two broadcast quads serve both half panels (six rows kept all
// sixteen registers for the accumulators and the half's pixel vectors, so each half broadcast the weights
// again: twelve broadcasts a quad, which with the multiplies and adds filled the four vector pipes, 10.8 cycles
// a quad). Two passes read the pixels twice (loads, which have the room) and broadcast six times a quad:
// 10.1 cycles a quad on Zen 3 (microbenchmark, K = 960).
template <int kPass>
__attribute__((target("avx2,fma"), always_inline)) inline void PairedPass(const int8_t* w, const uint8_t* x,
                                                                         int64_t kquads, const TileRemainder* slots,
                                                                         const TileRemainder* slots_end,
                                                                         const Requant& q, int64_t m0, int r0,
                                                                         __m256i (&acc)[3][2]) {
  alignas(32) static constexpr int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const uint8_t* const x0 = x;
#pragma GCC unroll 3
  for (int r = 0; r < kPass; ++r) acc[r][0] = acc[r][1] = _mm256_set1_epi32(q.constant[m0 + r0 + r]);
  w += 4 * r0;
  int64_t p = 0;
  for (; p + 2 <= kquads; p += 2) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kCols * 4));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kCols * 4 + 32));
#pragma GCC unroll 3
    for (int r = 0; r < kPass; ++r) {
      const auto* wq = reinterpret_cast<const int32_t*>(w + 4 * r);
      __m256i t, u;
      __asm__ volatile("vpbroadcastd %1, %0" : "=x"(t) : "m"(wq[0]));
      __asm__ volatile("vpbroadcastd %1, %0" : "=x"(u) : "m"(wq[kTileRows]));
      __m256i lo = _mm256_add_epi16(_mm256_maddubs_epi16(a0, t), _mm256_maddubs_epi16(b0, u));
      __m256i hi = _mm256_add_epi16(_mm256_maddubs_epi16(a1, t), _mm256_maddubs_epi16(b1, u));
      __asm__("vpmaddwd %1, %0, %0" : "+x"(lo) : "m"(kOnes));
      __asm__("vpmaddwd %1, %0, %0" : "+x"(hi) : "m"(kOnes));
      acc[r][0] = _mm256_add_epi32(acc[r][0], lo);
      acc[r][1] = _mm256_add_epi32(acc[r][1], hi);
    }
    w += 2 * kTileRows * 4;
    x += 2 * kCols * 4;
  }
  if (p < kquads) {  // an odd last quad, packed alone (its lanes' pair sums fit int16 by themselves)
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
#pragma GCC unroll 3
    for (int r = 0; r < kPass; ++r) {
      int32_t quad;
      std::memcpy(&quad, w + 4 * r, sizeof quad);
      const __m256i t = _mm256_set1_epi32(quad);
      __m256i lo = _mm256_maddubs_epi16(a0, t), hi = _mm256_maddubs_epi16(a1, t);
      __asm__("vpmaddwd %1, %0, %0" : "+x"(lo) : "m"(kOnes));
      __asm__("vpmaddwd %1, %0, %0" : "+x"(hi) : "m"(kOnes));
      acc[r][0] = _mm256_add_epi32(acc[r][0], lo);
      acc[r][1] = _mm256_add_epi32(acc[r][1], hi);
    }
  }
  // The pass's remainders, slot by slot (QConvWeights::pass_slots), one entry per row: the quad's bytes 0 and 2
  // (kEvenBytes) or 1 and 3 picked into 16-bit halves by one vpshufb whose control the entry's kind selects (a
  // load, not a branch), times the two remainders by vpmaddwd. Zero entries add nothing.
  alignas(32) static constexpr int8_t kPick[2][32] = {
      {1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11, -1, 13, -1, 15, -1,
       1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11, -1, 13, -1, 15, -1},
      {0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1, 12, -1, 14, -1,
       0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1, 12, -1, 14, -1}};
  for (const TileRemainder* s = slots; s != slots_end; s += 3) {
#pragma GCC unroll 3
    for (int r = 0; r < kPass; ++r) {
      const __m256i v = _mm256_set1_epi32(s[r].pair);
      const __m256i pick = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick[s[r].offset & kEvenBytes]));
      const uint8_t* xq = x0 + (s[r].offset & ~kEvenBytes);
      const __m256i lo = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), pick);
      const __m256i hi = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)), pick);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(lo, v));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(hi, v));
    }
  }
}

// The paired tile (kRows 1-6) as two passes of at most three rows (PairedPass): rows 0-1 requantized after the
// first, row 2's sums read back from the stored ones once row 3's are formed, then rows 2-3 and 4-5 (a lone
// last row requantized by itself), so that every pair of rows is requantized together as in TileRequantAvx2.
template <int kRows, bool kSigned, bool kExact>
__attribute__((target("avx2,fma"), noinline)) void PairedTileRequantAvx2(
    const int8_t* w, const uint8_t* x, int64_t kquads, const TileRemainder* rem, const int64_t* rem_begin,
    const TileRemainder* slots, const int64_t* slot_begin, const Requant& q, int64_t m0, uint8_t* out, int64_t ld) {
  // The sums stored after each pass (six stores a pass), so that a pair the float shortcut cannot tell is
  // requantized from them, not formed again quad by quad (RequantPairByDouble was 0.8% of ResNet-50 int8).
  alignas(32) int32_t sums[kTileRows * kCols];
  const TileArgs args{w, x, kquads, rem, rem_begin, sums};
  const float delta = 1.0f / 8192;  // as TileRequantAvx2's (where the bound is argued)
  const __m256 z_lo = _mm256_set1_ps(static_cast<float>(q.yzp) - delta),
               z_hi = _mm256_set1_ps(static_cast<float>(q.yzp) + delta);
  constexpr int kFirst = kRows < 3 ? kRows : 3, kSecond = kRows - kFirst;
  __m256i acc[3][2];
  PairedPass<kFirst>(w, x, kquads, slots + slot_begin[0], slots + slot_begin[1], q, m0, 0, acc);
#pragma GCC unroll 3
  for (int r = 0; r < kFirst; ++r)
    for (int h = 0; h < 2; ++h) _mm256_store_si256(reinterpret_cast<__m256i*>(sums + r * kCols + 8 * h), acc[r][h]);
  if constexpr (kFirst >= 2)
    RequantRowPair<2, kSigned, kExact>(acc[0][0], acc[0][1], acc[1][0], acc[1][1], q, m0, z_lo, z_hi, out, ld, args, 0);
  if constexpr (kFirst == 1)
    RequantRowPair<1, kSigned, kExact>(acc[0][0], acc[0][1], acc[0][0], acc[0][1], q, m0, z_lo, z_hi, out, ld, args, 0);
  if constexpr (kRows == 3)
    RequantRowPair<1, kSigned, kExact>(acc[2][0], acc[2][1], acc[2][0], acc[2][1], q, m0 + 2,
                                       z_lo, z_hi, out + 2 * ld, ld,
                               args, 2);
  if constexpr (kSecond > 0) {
    PairedPass<kSecond>(w, x, kquads, slots + slot_begin[1], slots + slot_begin[2], q, m0, 3, acc);
#pragma GCC unroll 3
    for (int r = 0; r < kSecond; ++r)
      for (int h = 0; h < 2; ++h)
        _mm256_store_si256(reinterpret_cast<__m256i*>(sums + (3 + r) * kCols + 8 * h), acc[r][h]);
    const __m256i row2_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(sums + 2 * kCols)),
                  row2_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(sums + 2 * kCols + 8));
    RequantRowPair<2, kSigned, kExact>(row2_lo, row2_hi, acc[0][0], acc[0][1], q, m0 + 2,
                                       z_lo, z_hi, out + 2 * ld, ld, args,
                               2);
    if constexpr (kSecond == 3)
      RequantRowPair<2, kSigned, kExact>(acc[1][0], acc[1][1], acc[2][0], acc[2][1], q, m0 + 4,
                                         z_lo, z_hi, out + 4 * ld, ld,
                                 args, 4);
    if constexpr (kSecond == 2)
      RequantRowPair<1, kSigned, kExact>(acc[1][0], acc[1][1], acc[1][0], acc[1][1], q, m0 + 4,
                                         z_lo, z_hi, out + 4 * ld, ld,
                                 args, 4);
  }
}

}  // namespace

namespace {

// npanels whole tiles over consecutive pixel panels (x and out advancing by panel_bytes and kCols): the
// tile's function chosen once, called directly (not inlined: inlined into this loop it ran 4% slower on a
// 1x1 conv over 16 channels, 1% on 7x7 and 14x14 images over 576-960 channels).
template <int kRows, bool kSigned, bool kPaired, bool kExact>
__attribute__((target("avx2,fma"))) void TilesRequantAvx2(const int8_t* w, const uint8_t* x, int64_t panel_bytes,
                                                          int64_t npanels, int64_t kquads, const TileRemainder* rem,
                                                          const int64_t* rem_begin, const int64_t* rem_odd,
                                                          const TileRemainder* slots, const int64_t* slot_begin,
                                                          const Requant& q, int64_t m0, uint8_t* out, int64_t ld) {
  for (int64_t b = 0; b < npanels; ++b)
    if constexpr (kPaired)
      PairedTileRequantAvx2<kRows, kSigned, kExact>(w, x + b * panel_bytes, kquads, rem, rem_begin, slots,
                                                    slot_begin, q, m0, out + b * kCols, ld);
    else
      TileRequantAvx2<kRows, kSigned, kExact>(w, x + b * panel_bytes, kquads, rem, rem_begin, rem_odd, q, m0,
                                              out + b * kCols, ld);
}

}  // namespace

void WholeTilesRequantAvx2(int64_t rows, bool paired, const int8_t* w, const uint8_t* x, int64_t panel_bytes,
                           int64_t npanels, int64_t kquads, const TileRemainder* rem, const int64_t* rem_begin,
                           const int64_t* rem_odd, const TileRemainder* slots, const int64_t* slot_begin,
                           const Requant& q, int64_t m0, uint8_t* out, int64_t ld) {
  using Fn = void (*)(const int8_t*, const uint8_t*, int64_t, int64_t, int64_t, const TileRemainder*, const int64_t*,
                      const int64_t*, const TileRemainder*, const int64_t*, const Requant&, int64_t, uint8_t*, int64_t);
#define NEE_TILE_ROWS(s, p, e)                                                                                 \
  {TilesRequantAvx2<1, s, p, e>, TilesRequantAvx2<2, s, p, e>, TilesRequantAvx2<3, s, p, e>,                    \
   TilesRequantAvx2<4, s, p, e>, TilesRequantAvx2<5, s, p, e>, TilesRequantAvx2<6, s, p, e>}
  // [exact][paired][signed][rows - 1]: the one-fma requantization (Requant::float_exact) chosen at compile time,
  // as a branch per row pair slowed the tiles of convs it was not proven for by 1-3%.
  static constexpr Fn kByRows[2][2][2][kTileRows] = {
      {{NEE_TILE_ROWS(false, false, false), NEE_TILE_ROWS(true, false, false)},
       {NEE_TILE_ROWS(false, true, false), NEE_TILE_ROWS(true, true, false)}},
      {{NEE_TILE_ROWS(false, false, true), NEE_TILE_ROWS(true, false, true)},
       {NEE_TILE_ROWS(false, true, true), NEE_TILE_ROWS(true, true, true)}}};
#undef NEE_TILE_ROWS
  kByRows[q.float_exact ? 1 : 0][paired ? 1 : 0][q.y_signed ? 1 : 0][rows - 1](
      w, x, panel_bytes, npanels, kquads, rem, rem_begin, rem_odd, slots, slot_begin, q, m0, out, ld);
}

namespace {

// igemm's quad tile on the first half of a panel only (pixels 0-7, the first 32 bytes of each 64-byte quad),
// for a last panel with at most eight pixels: the same instructions per pixel, each sum the same, at half the
// cost. Sums of pixels 8-15 are left as they were (not stored). kPaired: two k quads a step, their pair sums
// added in int16 before one vpmaddwd (3 multiplies per two quads and row where one at a time takes 4).
template <int kRowsHere, bool kPaired>
__attribute__((target("avx2"))) void HalfTile(const int8_t* w, const uint8_t* x, int64_t kquads, int32_t* s) {
  constexpr int64_t kQuadA = kTileRows * 4, kQuadB = kCols * 4;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[6];
#pragma GCC unroll 6
  for (int r = 0; r < kRowsHere; ++r) c[r] = _mm256_setzero_si256();
  int64_t q = 0;
  if constexpr (kPaired) {
    for (; q + 2 <= kquads; q += 2) {
      const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + q * kQuadB));
      const __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + (q + 1) * kQuadB));
      const int8_t* wq = w + q * kQuadA;
#pragma GCC unroll 6
      for (int r = 0; r < kRowsHere; ++r) {
        int32_t a, b;
        std::memcpy(&a, wq + 4 * r, sizeof a);
        std::memcpy(&b, wq + kQuadA + 4 * r, sizeof b);
        const __m256i pair = _mm256_add_epi16(_mm256_maddubs_epi16(x0, _mm256_set1_epi32(a)),
                                              _mm256_maddubs_epi16(x1, _mm256_set1_epi32(b)));
        c[r] = _mm256_add_epi32(c[r], _mm256_madd_epi16(pair, ones));
      }
    }
  }
  for (; q < kquads; ++q) {
    const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + q * kQuadB));
    const int8_t* wq = w + q * kQuadA;
#pragma GCC unroll 6
    for (int r = 0; r < kRowsHere; ++r) {
      int32_t quad;
      std::memcpy(&quad, wq + 4 * r, sizeof quad);
      c[r] = _mm256_add_epi32(c[r], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, _mm256_set1_epi32(quad)), ones));
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kRowsHere; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * kCols), c[r]);
}

// A tile's sums for its first kPixels pixels only: each pixel's quad broadcast, a row panel's quad (six rows'
// four weights, 24 bytes, read as 32) the vector, so that int32 lanes 0-5 are the rows' sums (the same pairs
// of products as the tile, so the same sums; lanes 6 and 7 are never read). For last panels of a few pixels
// (one left over from a 7x7 image): two multiplies per quad and pixel where a half tile takes twelve; paired,
// three per two quads. x holds the pixels' quads side by side ([kquads][kPixels][4], CompactFewPixels).
template <int kPixels, bool kPaired>
__attribute__((target("avx2"))) void PixelTile(int64_t rows, const int8_t* w, const uint8_t* x, int64_t kquads,
                                               int32_t* s) {
  constexpr int64_t kQuadA = kTileRows * 4, kQuadB = kPixels * 4;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kPixels];
  for (int j = 0; j < kPixels; ++j) acc[j] = _mm256_setzero_si256();
  int64_t q = 0;
  if constexpr (kPaired) {
    for (; q + 2 <= kquads; q += 2) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q * kQuadA));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (q + 1) * kQuadA));
      for (int j = 0; j < kPixels; ++j) {
        int32_t a, b;
        std::memcpy(&a, x + q * kQuadB + 4 * j, sizeof a);
        std::memcpy(&b, x + (q + 1) * kQuadB + 4 * j, sizeof b);
        const __m256i pair = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(a), w0),
                                              _mm256_maddubs_epi16(_mm256_set1_epi32(b), w1));
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(pair, ones));
      }
    }
  }
  for (; q < kquads; ++q) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q * kQuadA));
    for (int j = 0; j < kPixels; ++j) {
      int32_t quad;
      std::memcpy(&quad, x + q * kQuadB + 4 * j, sizeof quad);
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(quad), wv), ones));
    }
  }
  for (int j = 0; j < kPixels; ++j) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[j]);
    for (int64_t r = 0; r < rows; ++r) s[r * kCols + j] = lanes[r];
  }
}

}  // namespace

void HalfTileAvx2(int64_t rows, bool paired, const int8_t* w, const uint8_t* x, int64_t kquads, int32_t* s) {
  using Fn = void (*)(const int8_t*, const uint8_t*, int64_t, int32_t*);
  static constexpr Fn kByRows[2][kTileRows] = {
      {HalfTile<1, false>, HalfTile<2, false>, HalfTile<3, false>, HalfTile<4, false>, HalfTile<5, false>,
       HalfTile<6, false>},
      {HalfTile<1, true>, HalfTile<2, true>, HalfTile<3, true>, HalfTile<4, true>, HalfTile<5, true>,
       HalfTile<6, true>}};
  kByRows[paired ? 1 : 0][rows - 1](w, x, kquads, s);
}

void PixelTileAvx2(int64_t pixels, bool paired, int64_t rows, const int8_t* w, const uint8_t* x, int64_t kquads,
                   int32_t* s) {
  using Fn = void (*)(int64_t, const int8_t*, const uint8_t*, int64_t, int32_t*);
  static constexpr Fn kByCount[2][kMaxPixelTile] = {{PixelTile<1, false>, PixelTile<2, false>, PixelTile<3, false>},
                                                    {PixelTile<1, true>, PixelTile<2, true>, PixelTile<3, true>}};
  kByCount[paired ? 1 : 0][pixels - 1](rows, w, x, kquads, s);
}

}  // namespace nee::cpu::qconv

#endif
