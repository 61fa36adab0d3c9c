// QLinearConv with one input and one output channel per group (depthwise),
// AVX2, strides 1 and 2: qconv_common.h.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/qconv_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "ep/cpu/igemm.h"
#define NEE_QCONV_X86 1
#endif

namespace nee::cpu::qconv {

#ifdef NEE_QCONV_X86
namespace {

//
// Per channel, sixteen output pixels of a row at a time from the channel's padded copy, two taps per
// vpmaddwd: the pixels of taps t and t + 1 widened to int16 and interleaved, times the pair
// (W'[t] - zw, W'[t + 1] - zw), exact in int32 (|x| <= 255, |w| <= 255). acc = bias + sum x (w - zw) -
// zx * sum (w - zw): padding reads zx and adds nothing. Strides 1 and 2.

// Sixteen taps of one output row chunk: x at columns col, col + stride, ... of `row`, as int16.
__attribute__((target("avx2"))) inline __m256i LoadTaps16(const uint8_t* src, int64_t stride) {
  __m128i v;
  if (stride == 1) {
    v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  } else {
    const __m128i low = _mm_set1_epi16(0xFF);
    const __m128i a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)), low);
    const __m128i b = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16)), low);
    v = _mm_packus_epi16(a, b);
  }
  return _mm256_cvtepu8_epi16(v);
}

__attribute__((target("avx2"))) void DepthwiseChannelAvx2(const QConvGeometry& g, const uint8_t* plane,
                                                          const int16_t* taps, int32_t zw, int32_t constant,
                                                          double mult, const Requant& q, uint8_t* out) {
  const int64_t K = g.kh * g.kw;
  int32_t pairs[64];  // (w[t] - zw, w[t + 1] - zw) as one int32 per tap pair; K <= 128
  const int64_t npairs = (K + 1) / 2;
  for (int64_t t = 0; t < npairs; ++t) {
    const int32_t a = taps[2 * t] - zw, b = 2 * t + 1 < K ? taps[2 * t + 1] - zw : 0;
    pairs[t] = static_cast<int32_t>((static_cast<uint32_t>(b) << 16) | (static_cast<uint32_t>(a) & 0xFFFF));
  }
  int64_t offsets[128];  // each tap's offset in the padded plane
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) offsets[i * g.kw + j] = i * g.dh * g.wp + j * g.dw;
  offsets[K] = offsets[K - 1];  // an odd last tap's partner (weight 0)
  alignas(32) int32_t sums[kCols];
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const uint8_t* row = plane + oy * g.sh * g.wp;
    for (int64_t ox = 0; ox < g.ow; ox += kCols) {
      const uint8_t* base = row + ox * g.sw;
      __m256i lo = _mm256_setzero_si256(), hi = lo;
      for (int64_t t = 0; t < npairs; ++t) {
        const __m256i a = LoadTaps16(base + offsets[2 * t], g.sw);
        const __m256i b = LoadTaps16(base + offsets[2 * t + 1], g.sw);
        const __m256i w = _mm256_set1_epi32(pairs[t]);
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w));  // pixels 0-3, 8-11
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w));  // pixels 4-7, 12-15
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
      const int64_t count = std::min(kCols, g.ow - ox);
      uint8_t* dst = out + oy * g.ow + ox;
      if (q.small_multipliers) {
        FinishTileAvx2(sums, 1, count, &constant, &mult, q, dst, 0);
      } else {
        for (int64_t j = 0; j < kCols; ++j)
          sums[j] = static_cast<int32_t>(static_cast<uint32_t>(sums[j]) + static_cast<uint32_t>(constant));
        RequantRowAvx2(sums, count, mult, q, dst);
      }
    }
  }
}

}  // namespace
#endif

bool RunDepthwiseQConv(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                       const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                       const double* mult, const Requant& q, uint8_t* y) {
#ifdef NEE_QCONV_X86
  if (!IgemmU8S8Available() || g.Cg != 1 || g.Mg != 1 || !(g.sw == 1 || g.sw == 2) || g.kh * g.kw > 127 ||
      taps.empty())
    return false;
  const int64_t K = g.kh * g.kw, P = g.P();
  const int64_t plane_bytes = g.hp * g.wp + 2 * kCols;
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> t_plane;
    if (t_plane.size() < static_cast<size_t>(plane_bytes)) t_plane.resize(static_cast<size_t>(plane_bytes));
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t c = nc % g.C;
      PadImage(g, x + nc * g.ih * g.iw, flip, zx, t_plane.data());
      // zw[c] is W's zero point shifted as W' is; constant[c] holds bias - zx * sum W' + K zx zw, i.e.
      // bias - zx * sum (W' - zw).
      DepthwiseChannelAvx2(g, t_plane.data(), taps.data() + c * K, zw[c], constant[c], mult[c], q, y + nc * P);
    }
  });
  return true;
#else
  (void)ctx, (void)g, (void)x, (void)flip, (void)zx, (void)taps, (void)zw, (void)constant, (void)mult, (void)q, (void)y;
  return false;
#endif
}

}  // namespace nee::cpu::qconv
