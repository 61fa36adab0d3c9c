// QLinearConv's panels of X (qconv_gather.h).
#include "ep/cpu/qconv_gather.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QCONV_X86 1
#endif

namespace nee::cpu::qconv {

namespace {
constexpr int64_t kQuadB = kPanelQuadBytes;
}  // namespace

void GatherPanelRows(const QConvGeometry& g, const uint8_t* padded, int64_t p0, uint8_t pad, uint8_t* rows) {
  const int64_t K = g.K(), P = g.P();
  // The panel's pixels as runs along output rows: where each starts in the panel and in a tap's plane.
  struct Run {
    int64_t at, offset, count;
  };
  Run runs[kCols];
  int64_t nruns = 0;
  for (int64_t p = p0; p < std::min(p0 + kCols, P);) {
    const int64_t oy = p / g.ow, ox = p % g.ow, count = std::min(g.ow - ox, std::min(p0 + kCols, P) - p);
    runs[nruns++] = {p - p0, oy * g.sh * g.wp + ox * g.sw, count};
    p += count;
  }
  const int64_t valid = std::min(kCols, P - p0);
  int64_t c = 0, i = 0, j = 0;  // row k's channel and tap, stepped along with k
  for (int64_t k = 0; k < K; ++k) {
    uint8_t* dst = rows + k * kCols;
    const uint8_t* plane = padded + c * g.hp * g.wp + i * g.dh * g.wp + j * g.dw;
    if (g.sw == 1) {
      // A whole vector whatever the run's length: the bytes past it are
      // overwritten by the next run or the next row (rows and the padded
      // copy have slack).
      for (int64_t r = 0; r < nruns; ++r) std::memcpy(dst + runs[r].at, plane + runs[r].offset, kCols);
#ifdef NEE_QCONV_X86
    } else if (g.sw == 2) {
      // The even bytes of 32: the low byte of each 16-bit word, packed.
      const __m128i low = _mm_set1_epi16(0xFF);
      for (int64_t r = 0; r < nruns; ++r) {
        const uint8_t* src = plane + runs[r].offset;
        const __m128i a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)), low);
        const __m128i b = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16)), low);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + runs[r].at), _mm_packus_epi16(a, b));
      }
#endif
    } else {
      for (int64_t r = 0; r < nruns; ++r)
        for (int64_t t = 0; t < runs[r].count; ++t) dst[runs[r].at + t] = plane[runs[r].offset + t * g.sw];
    }
    for (int64_t t = valid; t < kCols; ++t) dst[t] = pad;
    if (++j == g.kw) {
      j = 0;
      if (++i == g.kh) i = 0, ++c;
    }
  }
}

void PackPanelPortable(const uint8_t* rows, int64_t ld, int64_t K, uint8_t pad, uint8_t* dst) {
  const int64_t kquads = (K + 3) / 4;
  for (int64_t q = 0; q < kquads; ++q)
    for (int64_t t = 0; t < 4; ++t) {
      const int64_t k = 4 * q + t;
      for (int64_t p = 0; p < kCols; ++p) dst[q * kQuadB + p * 4 + t] = k < K ? rows[k * ld + p] : pad;
    }
}

#ifdef NEE_QCONV_X86
namespace {

// A panel's pixels as runs along output rows: where each starts in the panel and in a tap's plane, how
// many, and for the vector reads the shuffle that moves a run's bytes into place and the bytes it fills.
struct PanelRuns {
  int64_t n = 0, at[kCols], offset[kCols], count[kCols];
  __m128i shift[kCols], inside[kCols];
  int64_t stride = 1;
  // Rows k from this one on are gathered byte by byte (PackRowsAvx2): their whole-vector reads would pass the
  // end of what may be read (the last rows of a pointwise conv's last, partial panel read from x itself).
  int64_t k_vector = INT64_MAX;
  __m128i pad, flip;
};

// A run's bytes of the tap plane at `base`, from its first pixel on: one 16-byte read (stride 2: 32 bytes,
// the even ones kept: the low byte of each 16-bit word, packed).
template <int kStride>
__attribute__((target("avx2"))) inline __m128i ReadRun(const uint8_t* s) {
  if constexpr (kStride == 1) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i low = _mm_set1_epi16(0xFF);
  return _mm_packus_epi16(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), low),
                          _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)), low));
}

// Row k of the panel (the tap plane at `base`): kStride 1 or 2 reads whole vectors (kRuns 1: one run, the
// whole panel; 2: two runs that fill it; 0: any runs); kStride 0 gathers byte by byte. kFlip false: the source
// needs no flip (the padded copy, uint8 x), so the vector paths skip the xor (a fifth of a quad's operations).
template <int kStride, int kRuns, bool kFlip = true>
__attribute__((target("avx2"))) inline __m128i PanelRow(const PanelRuns& runs, const uint8_t* base, uint8_t pad,
                                                        uint8_t flip) {
  if constexpr (kStride == 0) {
    alignas(16) uint8_t bytes[kCols];
    std::memset(bytes, pad, sizeof bytes);
    for (int64_t r = 0; r < runs.n; ++r)
      for (int64_t t = 0; t < runs.count[r]; ++t)
        bytes[runs.at[r] + t] = static_cast<uint8_t>(base[runs.offset[r] + t * runs.stride] ^ flip);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
  } else if constexpr (kRuns == 1) {
    const __m128i v = ReadRun<kStride>(base + runs.offset[0]);
    return kFlip ? _mm_xor_si128(v, runs.flip) : v;
  } else if constexpr (kRuns == 2) {
    const __m128i second = _mm_shuffle_epi8(ReadRun<kStride>(base + runs.offset[1]), runs.shift[1]);
    const __m128i v = _mm_blendv_epi8(ReadRun<kStride>(base + runs.offset[0]), second, runs.inside[1]);
    return kFlip ? _mm_xor_si128(v, runs.flip) : v;
  } else {
    __m128i v = runs.pad;
    for (int64_t r = 0; r < runs.n; ++r)
      v = _mm_blendv_epi8(v, _mm_shuffle_epi8(_mm_xor_si128(ReadRun<kStride>(base + runs.offset[r]), runs.flip), runs.shift[r]),
                          runs.inside[r]);
    return v;
  }
}

// The panel's quads, row k (channel c, tap (i, j)) stepped along with k.
template <int kStride, int kRuns, bool kFlip = true>
__attribute__((target("avx2"))) void PackRowsAvx2(const QConvGeometry& g, const PanelSource& src, const PanelRuns& runs,
                                                  uint8_t pad, uint8_t* dst) {
  const int64_t K = g.K(), kquads = (K + 3) / 4;
  const int64_t* taps = src.taps;
  for (int64_t q = 0; q < kquads; ++q) {
    __m128i rows[4];
    // Unrolled, so that rows stays in registers (a loop kept it on the stack: a store and reload per row, a
    // fifth of a 1x1 conv over 32 channels at 112x112 went to packing).
    if (4 * q + 4 <= K && 4 * q + 4 <= runs.k_vector) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) rows[t] = PanelRow<kStride, kRuns, kFlip>(runs, src.image + taps[4 * q + t], pad, src.flip);
    } else {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const int64_t k = 4 * q + t;
        rows[t] = k >= K                ? runs.pad
                  : k < runs.k_vector ? PanelRow<kStride, kRuns, kFlip>(runs, src.image + taps[k], pad, src.flip)
                                      : PanelRow<0, 0>(runs, src.image + taps[k], pad, src.flip);
      }
    }
    const __m128i a_lo = _mm_unpacklo_epi8(rows[0], rows[1]), a_hi = _mm_unpackhi_epi8(rows[0], rows[1]);
    const __m128i b_lo = _mm_unpacklo_epi8(rows[2], rows[3]), b_hi = _mm_unpackhi_epi8(rows[2], rows[3]);
    __m128i* d = reinterpret_cast<__m128i*>(dst + q * kQuadB);
    _mm_store_si128(d + 0, _mm_unpacklo_epi16(a_lo, b_lo));  // pixels 0-3
    _mm_store_si128(d + 1, _mm_unpackhi_epi16(a_lo, b_lo));  // 4-7
    _mm_store_si128(d + 2, _mm_unpacklo_epi16(a_hi, b_hi));  // 8-11
    _mm_store_si128(d + 3, _mm_unpackhi_epi16(a_hi, b_hi));  // 12-15
  }
}

// Two adjacent whole panels of a pointwise conv (32 pixels in a row of each tap plane) at once: 32-byte reads,
// the unpacks in both 128-bit lanes (lane 0 the first panel, lane 1 the second), each quad's halves regrouped
// per panel by one vperm2i128 a store: 20 operations a quad for two panels where the 16-byte version takes 16
// for one (the packing was a tenth of MobileNetV2's 1x1 conv over 32 channels at 112x112).
template <bool kFlip>
__attribute__((target("avx2"))) inline __m256i PairRow(const uint8_t* s, __m256i flip) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  return kFlip ? _mm256_xor_si256(v, flip) : v;
}

template <bool kFlip>
__attribute__((target("avx2"))) void PackRowsPairAvx2(const QConvGeometry& g, const PanelSource& src, int64_t p0,
                                                      uint8_t pad, uint8_t* dst0, uint8_t* dst1) {
  const int64_t K = g.K(), kquads = (K + 3) / 4;
  const int64_t* taps = src.taps;
  const uint8_t* image = src.image + p0;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(src.flip)), pads = _mm256_set1_epi8(static_cast<char>(pad));
  for (int64_t q = 0; q < kquads; ++q) {
    __m256i rows[4];
    if (4 * q + 4 <= K) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) rows[t] = PairRow<kFlip>(image + taps[4 * q + t], flip);
    } else {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) rows[t] = 4 * q + t < K ? PairRow<kFlip>(image + taps[4 * q + t], flip) : pads;
    }
    const __m256i a_lo = _mm256_unpacklo_epi8(rows[0], rows[1]), a_hi = _mm256_unpackhi_epi8(rows[0], rows[1]);
    const __m256i b_lo = _mm256_unpacklo_epi8(rows[2], rows[3]), b_hi = _mm256_unpackhi_epi8(rows[2], rows[3]);
    const __m256i q0 = _mm256_unpacklo_epi16(a_lo, b_lo), q1 = _mm256_unpackhi_epi16(a_lo, b_lo);  // pixels 0-3, 4-7
    const __m256i q2 = _mm256_unpacklo_epi16(a_hi, b_hi), q3 = _mm256_unpackhi_epi16(a_hi, b_hi);  // 8-11, 12-15
    __m256i* d0 = reinterpret_cast<__m256i*>(dst0 + q * kQuadB);
    __m256i* d1 = reinterpret_cast<__m256i*>(dst1 + q * kQuadB);
    _mm256_store_si256(d0, _mm256_permute2x128_si256(q0, q1, 0x20));
    _mm256_store_si256(d0 + 1, _mm256_permute2x128_si256(q2, q3, 0x20));
    _mm256_store_si256(d1, _mm256_permute2x128_si256(q0, q1, 0x31));
    _mm256_store_si256(d1 + 1, _mm256_permute2x128_si256(q2, q3, 0x31));
  }
}

#define NEE_VBMI_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vbmi")))

// GCC 12 warns about the self-initialized _mm512_undefined_* inside its own intrinsics once they are inlined
// here (a false positive, as activation_fast.cc notes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// kStride for PackRowsVbmi: stride 1 with masked reads of exactly each run's bytes, for panels whose whole
// 16-byte reads would pass the end of what may be read (the last panels of a pointwise conv reading x
// itself), where AVX2 gathers byte by byte.
constexpr int kStride1Masked = 3;

// Row k of the panel by masked reads (stride 1, any runs): bytes past a run are not read.
NEE_VBMI_TARGET inline __m128i PanelRowMasked(const PanelRuns& runs, const uint8_t* base) {
  __m128i v = runs.pad;
  for (int64_t r = 0; r < runs.n; ++r) {
    const auto mask = static_cast<__mmask16>((1u << runs.count[r]) - 1);
    const __m128i read = _mm_xor_si128(_mm_maskz_loadu_epi8(mask, base + runs.offset[r]), runs.flip);
    v = _mm_blendv_epi8(v, _mm_shuffle_epi8(read, runs.shift[r]), runs.inside[r]);
  }
  return v;
}

template <int kStride, int kRuns>
NEE_VBMI_TARGET inline __m128i PanelRowVbmi(const PanelRuns& runs, const uint8_t* base, uint8_t pad, uint8_t flip) {
  if constexpr (kStride == kStride1Masked) return PanelRowMasked(runs, base);
  else return PanelRow<kStride, kRuns>(runs, base, pad, flip);
}

// The same on AVX-512 VBMI: the four rows of a quad side by side in one zmm, one vpermb (byte 4p + t of
// the quad is row t's byte p) and one 64-byte store, where AVX2 takes eight unpacks and four stores.
template <int kStride, int kRuns>
NEE_VBMI_TARGET void PackRowsVbmi(const QConvGeometry& g, const PanelSource& src, const PanelRuns& runs, uint8_t pad,
                                  uint8_t* dst) {
  const int64_t K = g.K(), kquads = (K + 3) / 4;
  const int64_t* taps = src.taps;
  const __m512i transpose = _mm512_load_si512(kQuadTranspose);
  for (int64_t q = 0; q < kquads; ++q) {
    __m128i rows[4];
    // Unrolled, so that rows stays in registers (a loop kept it on the stack: a store and reload per row).
    if (4 * q + 4 <= K) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) rows[t] = PanelRowVbmi<kStride, kRuns>(runs, src.image + taps[4 * q + t], pad, src.flip);
    } else {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t)
        rows[t] = 4 * q + t < K ? PanelRowVbmi<kStride, kRuns>(runs, src.image + taps[4 * q + t], pad, src.flip) : runs.pad;
    }
    __m512i quad = _mm512_castsi128_si512(rows[0]);
    quad = _mm512_inserti32x4(quad, rows[1], 1);
    quad = _mm512_inserti32x4(quad, rows[2], 2);
    quad = _mm512_inserti32x4(quad, rows[3], 3);
    _mm512_store_si512(dst + q * kQuadB, _mm512_permutexvar_epi8(transpose, quad));
  }
}

// Four adjacent whole panels of a pointwise conv, pixels [p0, p0 + 4 kCols), panel j at dst + j * panel_bytes:
// each row's 64 bytes by one load, where PackRowsVbmi reads each 64-byte line of a row 16 bytes at a time, once a
// panel. The 16-byte chunk j of a quad's four rows is gathered into one zmm by two rounds of lane shuffles, then
// permuted as there: the same bytes.
NEE_VBMI_TARGET void PackFourPanelsVbmi(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad,
                                        uint8_t* dst, int64_t panel_bytes) {
  const int64_t K = g.K(), kquads = (K + 3) / 4;
  const int64_t* taps = src.taps;
  const uint8_t* image = src.image + p0;
  const __m512i transpose = _mm512_load_si512(kQuadTranspose);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(src.flip)), pads = _mm512_set1_epi8(static_cast<char>(pad));
  for (int64_t q = 0; q < kquads; ++q) {
    __m512i r[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t)
      r[t] = 4 * q + t < K ? _mm512_xor_si512(_mm512_loadu_si512(image + taps[4 * q + t]), flip) : pads;
    const __m512i lo01 = _mm512_shuffle_i32x4(r[0], r[1], _MM_SHUFFLE(1, 0, 1, 0));  // r0.0 r0.1 r1.0 r1.1
    const __m512i hi01 = _mm512_shuffle_i32x4(r[0], r[1], _MM_SHUFFLE(3, 2, 3, 2));  // r0.2 r0.3 r1.2 r1.3
    const __m512i lo23 = _mm512_shuffle_i32x4(r[2], r[3], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i hi23 = _mm512_shuffle_i32x4(r[2], r[3], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i chunk[4] = {_mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0)),  // r0.0 r1.0 r2.0 r3.0
                              _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1))};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      _mm512_store_si512(dst + j * panel_bytes + q * kQuadB, _mm512_permutexvar_epi8(transpose, chunk[j]));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool GatherPackFourPanelsVbmi(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad, uint8_t* dst,
                              int64_t panel_bytes) {
  if (!g.pointwise() || src.row != g.ow || p0 + 4 * kCols > g.P() ||
      src.taps[g.K() - 1] + p0 + 4 * kCols > src.end - src.image)
    return false;
  PackFourPanelsVbmi(g, src, p0, pad, dst, panel_bytes);
  return true;
}

bool GatherPackPanelPairAvx2(const QConvGeometry& g, const PanelSource& src, int64_t p0, uint8_t pad, uint8_t* dst0,
                             uint8_t* dst1) {
  if (!g.pointwise() || src.row != g.ow || p0 + 2 * kCols > g.P() ||
      src.taps[g.K() - 1] + p0 + 2 * kCols > src.end - src.image)
    return false;
  (src.flip ? PackRowsPairAvx2<true> : PackRowsPairAvx2<false>)(g, src, p0, pad, dst0, dst1);
  return true;
}

// One panel straight into the layout [k quads][kCols][4], without the K x kCols rows between: each row k
// as a vector, from one read per run of the panel's pixels along an output row, runs after the first
// shifted into place (pshufb) and blended in; pixels past P and rows past K read as `pad`. Strides above 2,
// and panels whose whole-vector reads would pass src.end, gather their bytes one by one.
__attribute__((target("avx2"))) void GatherPackPanelAvx2(const QConvGeometry& g, const PanelSource& src, int64_t p0,
                                                         uint8_t pad, uint8_t* dst, bool vbmi) {
  const int64_t P = g.P(), last = std::min(p0 + kCols, P);
  // A whole panel of a pointwise conv (output rows as long as the input's): one run from pixel p0 of each
  // plane, without the general setup's division per output row it touches (4% of a 1x1 conv over 32
  // channels at 112x112, where the packing is shared by three row panels only).
  if (g.pointwise() && src.row == g.ow && last - p0 == kCols && src.taps[g.K() - 1] + p0 + kCols <= src.end - src.image) {
    PanelRuns whole;
    whole.n = 1;
    whole.at[0] = 0, whole.offset[0] = p0, whole.count[0] = kCols;
    whole.pad = _mm_set1_epi8(static_cast<char>(pad));
    whole.flip = _mm_set1_epi8(static_cast<char>(src.flip));
    return (vbmi ? PackRowsVbmi<1, 1> : src.flip ? PackRowsAvx2<1, 1> : PackRowsAvx2<1, 1, false>)(g, src, whole, pad, dst);
  }
  const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  PanelRuns runs;
  runs.stride = g.sw;
  runs.pad = _mm_set1_epi8(static_cast<char>(pad));
  runs.flip = _mm_set1_epi8(static_cast<char>(src.flip));
  for (int64_t p = p0; p < last;) {
    const int64_t oy = p / g.ow, ox = p % g.ow, n = std::min(g.ow - ox, last - p), r = runs.n;
    const int64_t offset = oy * g.sh * src.row + ox * g.sw;
    p += n;
    // A run that goes on where the previous one ends in the tap plane (a 1x1 stride-1 conv reading x
    // itself: rows follow each other) extends it, so such panels take one read per row.
    if (r > 0 && runs.offset[r - 1] + runs.count[r - 1] * g.sw == offset) {
      runs.count[r - 1] += n;
      continue;
    }
    runs.at[r] = p - n - p0, runs.offset[r] = offset, runs.count[r] = n;
    ++runs.n;
  }
  for (int64_t r = 0; r < runs.n; ++r) {
    const __m128i a = _mm_set1_epi8(static_cast<char>(runs.at[r])),
                  b = _mm_set1_epi8(static_cast<char>(runs.at[r] + runs.count[r]));
    runs.shift[r] = _mm_sub_epi8(iota, a);  // byte i takes the run's byte i - at; negative (top bit set): zero
    runs.inside[r] = _mm_andnot_si128(_mm_cmpgt_epi8(a, iota), _mm_cmpgt_epi8(b, iota));
  }
  // One run filling the panel, two that fill it, or any.
  const int runs_kind = runs.at[runs.n - 1] + runs.count[runs.n - 1] < kCols ? 0 : runs.n <= 2 ? static_cast<int>(runs.n) : 0;
  const int64_t span = g.sw == 1 ? kCols : 2 * kCols;
  // The furthest whole-vector read: the last run of the last row's tap plane (offsets compared, not pointers
  // formed past the end).
  const int64_t furthest = src.taps[g.K() - 1] + runs.offset[runs.n - 1] + span;
  if (vbmi && g.sw == 1 && furthest > src.end - src.image)
    return PackRowsVbmi<kStride1Masked, 0>(g, src, runs, pad, dst);
  if (furthest > src.end - src.image && !vbmi && g.sw <= 2) {
    // Only the rows whose reads pass the end byte by byte (PanelRuns::k_vector): a 7x7 pointwise conv's last
    // panel (one pixel) had gathered all of its rows so, 8% of a 1x1 conv over 960 channels.
    const int64_t limit = src.end - src.image - runs.offset[runs.n - 1] - span;
    runs.k_vector = 0;
    while (runs.k_vector < g.K() && src.taps[runs.k_vector] <= limit) ++runs.k_vector;
  } else if (g.sw > 2 || furthest > src.end - src.image) {
    return (vbmi ? PackRowsVbmi<0, 0> : PackRowsAvx2<0, 0>)(g, src, runs, pad, dst);
  }
  using Pack = void (*)(const QConvGeometry&, const PanelSource&, const PanelRuns&, uint8_t, uint8_t*);
  // [0]: AVX2 flipping as it reads (int8 x itself), [1]: AVX2 without (the padded copy, uint8 x), [2]: VBMI.
  static constexpr Pack kStride1[3][3] = {{PackRowsAvx2<1, 0>, PackRowsAvx2<1, 1>, PackRowsAvx2<1, 2>},
                                          {PackRowsAvx2<1, 0>, PackRowsAvx2<1, 1, false>, PackRowsAvx2<1, 2, false>},
                                          {PackRowsVbmi<1, 0>, PackRowsVbmi<1, 1>, PackRowsVbmi<1, 2>}};
  static constexpr Pack kStride2[3][3] = {{PackRowsAvx2<2, 0>, PackRowsAvx2<2, 1>, PackRowsAvx2<2, 2>},
                                          {PackRowsAvx2<2, 0>, PackRowsAvx2<2, 1, false>, PackRowsAvx2<2, 2, false>},
                                          {PackRowsVbmi<2, 0>, PackRowsVbmi<2, 1>, PackRowsVbmi<2, 2>}};
  (g.sw == 1 ? kStride1 : kStride2)[vbmi ? 2 : src.flip ? 0 : 1][runs_kind](g, src, runs, pad, dst);
}
#endif

}  // namespace nee::cpu::qconv
