// QLinearConv's shared pieces (qconv_common.h).
#include "ep/cpu/qconv_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ep/cpu/no_fp_contract.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QCONV_X86 1
#endif

// The float steps below must round as the reference's separate operations do (NEE_NO_FP_CONTRACT).

namespace nee::cpu::qconv {

bool PlanGeometry(const KernelContext& ctx, const Tensor& x, const Tensor& w, QConvGeometry& g) {
  if (!PlanConvInt(ctx, x, w, g)) return false;
  if (g.Cg <= 0 || g.kh <= 0 || g.kw <= 0 || g.ph < 0 || g.pw < 0) return false;
  // Every tap of every output pixel inside the padded copy.
  g.hp = std::max(g.ih + g.ph, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1);
  g.wp = std::max(g.iw + g.pw, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  return true;
}

void PadImage(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* dst) {
  for (int64_t c = 0; c < g.Cg; ++c) {
    uint8_t* plane = dst + c * g.hp * g.wp;
    // Only the border: the rows' interiors are copied below.
    std::memset(plane, pad, static_cast<size_t>(g.ph * g.wp));
    std::memset(plane + (g.ph + g.ih) * g.wp, pad, static_cast<size_t>((g.hp - g.ph - g.ih) * g.wp));
    for (int64_t y = g.ph; y < g.ph + g.ih; ++y) {
      std::memset(plane + y * g.wp, pad, static_cast<size_t>(g.pw));
      std::memset(plane + y * g.wp + g.pw + g.iw, pad, static_cast<size_t>(g.wp - g.pw - g.iw));
    }
    for (int64_t y = 0; y < g.ih; ++y) {
      const uint8_t* src = x + (c * g.ih + y) * g.iw;
      uint8_t* row = plane + (y + g.ph) * g.wp + g.pw;
      if (flip == 0) {
        std::memcpy(row, src, static_cast<size_t>(g.iw));
      } else {
        for (int64_t i = 0; i < g.iw; ++i) row[i] = static_cast<uint8_t>(src[i] ^ flip);
      }
    }
  }
}

#ifdef NEE_QCONV_X86
__attribute__((target("avx2"))) void PadImageAvx2(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad,
                                                  uint8_t* dst, int64_t c_begin, int64_t c_end) {
  const __m256i f32 = _mm256_set1_epi8(static_cast<char>(flip));
  const __m128i f16 = _mm_set1_epi8(static_cast<char>(flip));
  const int64_t right = g.wp - g.pw - g.iw;
  for (int64_t c = c_begin; c < c_end; ++c) {
    uint8_t* plane = dst + c * g.hp * g.wp;
    if (g.ih == 0 || g.iw == 0) {
      std::memset(plane, pad, static_cast<size_t>(g.hp * g.wp));
      continue;
    }
    std::memset(plane, pad, static_cast<size_t>(g.ph * g.wp + g.pw));
    std::memset(plane + (g.ph + g.ih) * g.wp - right, pad, static_cast<size_t>((g.hp - g.ph - g.ih) * g.wp + right));
    for (int64_t y = 0; y < g.ih; ++y) {
      const uint8_t* src = x + (c * g.ih + y) * g.iw;
      uint8_t* row = plane + (y + g.ph) * g.wp + g.pw;
      // The row in whole vectors, the last one overlapping the one before it (no byte past the row written).
      if (g.iw >= 32) {
        for (int64_t i = 0;; i += 32) {
          const int64_t at = std::min(i, g.iw - 32);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + at),
                              _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + at)), f32));
          if (at == g.iw - 32) break;
        }
      } else if (g.iw >= 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row),
                         _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)), f16));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row + g.iw - 16),
                         _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + g.iw - 16)), f16));
      } else {
        for (int64_t i = 0; i < g.iw; ++i) row[i] = static_cast<uint8_t>(src[i] ^ flip);
      }
      // The border between this row and the next: its right pad and the next row's left pad (the last row's
      // right pad is in the bottom memset).
      if (y + 1 < g.ih)
        for (int64_t i = g.iw; i < g.iw + right + g.pw; ++i) row[i] = pad;
    }
  }
}
#endif

// The reference's double arithmetic: clamp(double(acc) * mult + yzp), rounded half to even.
namespace {
NEE_NO_FP_CONTRACT inline uint8_t RequantOne(int32_t acc, double mult, const Requant& q) {
  double v = static_cast<double>(acc) * mult + q.yzp;
  v = std::nearbyint(std::clamp(v, q.lo, q.hi));
  return q.y_signed ? static_cast<uint8_t>(static_cast<int8_t>(v)) : static_cast<uint8_t>(v);
}

}  // namespace

void CompactFewPixels(const uint8_t* panel, int64_t kquads, int64_t pixels, uint8_t* dst) {
  const auto bytes = static_cast<size_t>(4 * pixels);
  for (int64_t q = 0; q < kquads; ++q) std::memcpy(dst + q * 4 * pixels, panel + q * 64, bytes);
}

void RequantRowPortable(const int32_t* acc, int64_t count, double mult, const Requant& q, uint8_t* out) {
  for (int64_t j = 0; j < count; ++j) out[j] = RequantOne(acc[j], mult, q);
}

#ifdef NEE_QCONV_X86
// A whole tile (rows x kCols sums, kCols apart) plus each row's constant, requantized and stored at out
// (rows P bytes apart, count pixels each), for small multipliers (see Requant).
__attribute__((target("avx2"))) void FinishTileAvx2(const int32_t* sums, int64_t rows, int64_t count,
                                                    const int32_t* constant, const double* mult, const Requant& q,
                                                    uint8_t* out, int64_t ld) {
  const __m256d z = _mm256_set1_pd(q.yzp);
  for (int64_t r = 0; r < rows; ++r) {
    const __m256i c = _mm256_set1_epi32(constant[r]);
    const __m256d m = _mm256_set1_pd(mult[r]);
    const __m256i s0 = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * kCols)), c);
    const __m256i s1 = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * kCols + 8)), c);
#define convert(v) _mm256_cvtpd_epi32(_mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(v), m), z))
    const __m128i w0 = _mm_packs_epi32(convert(_mm256_castsi256_si128(s0)), convert(_mm256_extracti128_si256(s0, 1)));
    const __m128i w1 = _mm_packs_epi32(convert(_mm256_castsi256_si128(s1)), convert(_mm256_extracti128_si256(s1, 1)));
#undef convert
    const __m128i bytes = q.y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
    uint8_t* dst = out + r * ld;
    if (count == kCols) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), bytes);
    } else {
      alignas(16) uint8_t tmp[kCols];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
      std::memcpy(dst, tmp, static_cast<size_t>(count));
    }
  }
}

// FinishTileAvx2 converted all sixteen pixels of each row: for one pixel left over from a 7x7 image that was 5%
// of a 1x1 conv over 160 channels (a row panel of six channels per pixel).
__attribute__((target("avx2"))) void FinishFewPixelsAvx2(const int32_t* sums, int64_t rows, int64_t count,
                                                         const int32_t* constant, const double* mult,
                                                         const Requant& q, uint8_t* out, int64_t ld) {
  // Lanes r < rows; masked loads and gathers (a vector built by scalar stores and read back whole stalled the
  // store forwarding: the first version took as long as the sixteen-pixel conversion).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rows)), lane);
  const __m256i valid_lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(valid)),
                valid_hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(valid, 1));
  const __m256d z = _mm256_set1_pd(q.yzp), m0 = _mm256_maskload_pd(mult, valid_lo),
                m1 = _mm256_maskload_pd(mult + 4, valid_hi);
  const __m256i c = _mm256_maskload_epi32(constant, valid);
  const __m256i rows_apart = _mm256_mullo_epi32(lane, _mm256_set1_epi32(kCols));
  for (int64_t j = 0; j < count; ++j) {
    const __m256i column = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), sums + j, rows_apart, valid, 4);
    const __m256i s = _mm256_add_epi32(column, c);
    const __m256d s_lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(s)),
                  s_hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(s, 1));
    const __m128i lo = _mm256_cvtpd_epi32(_mm256_add_pd(_mm256_mul_pd(s_lo, m0), z));
    const __m128i hi = _mm256_cvtpd_epi32(_mm256_add_pd(_mm256_mul_pd(s_hi, m1), z));
    const __m128i w = _mm_packs_epi32(lo, hi);
    alignas(16) uint8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes), q.y_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    for (int64_t r = 0; r < rows; ++r) out[r * ld + j] = bytes[r];
  }
}

// kCols sums at once (count of them stored). No FMA in this target, so mul and add round separately.
__attribute__((target("avx2"))) void RequantRowAvx2(const int32_t* acc, int64_t count, double mult, const Requant& q,
                                                    uint8_t* out) {
  const __m256d m = _mm256_set1_pd(mult), z = _mm256_set1_pd(q.yzp), lo = _mm256_set1_pd(q.lo),
                hi = _mm256_set1_pd(q.hi);
  __m128i parts[4];
  for (int h = 0; h < 4; ++h) {
    __m256d v = _mm256_cvtepi32_pd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + 4 * h)));
    v = _mm256_add_pd(_mm256_mul_pd(v, m), z);
    v = _mm256_min_pd(_mm256_max_pd(v, lo), hi);
    v = _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    parts[h] = _mm256_cvtpd_epi32(v);
  }
  const __m128i w0 = _mm_packs_epi32(parts[0], parts[1]), w1 = _mm_packs_epi32(parts[2], parts[3]);
  const __m128i bytes = q.y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
  if (count == kCols) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
  } else {
    alignas(16) uint8_t tmp[kCols];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
    std::memcpy(out, tmp, static_cast<size_t>(count));
  }
}
#endif

}  // namespace nee::cpu::qconv
