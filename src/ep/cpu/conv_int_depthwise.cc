// Depthwise ConvInteger (conv_int_depthwise.h), plane by plane (image,
// channel), over a copy of the plane padded with the zero point. With AVX2
// (column stride 1 or 2) eight output columns at a time in one register: eight
// input bytes widened to int32 lanes, less the zero point, times the tap's
// weight, added; otherwise output by output.
// Sums wrap in 32 bits (as the reference's int64 sums cast to int32 do) and
// take the taps in the same order for every column, so any split of the work
// gives the same bits.
#include "ep/cpu/conv_int_depthwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kBlock = 8;

// One plane's input bytes, taps (weights minus their zero point) and output.
struct Plane {
  const ConvInt2D* g;
  const uint8_t* x;
  const int32_t* taps;  // kh * kw
  int32_t zx;
  int32_t* y;
};

template <bool kSigned>
inline int32_t Byte(const uint8_t* p) {
  return kSigned ? static_cast<int32_t>(static_cast<int8_t>(*p)) : static_cast<int32_t>(*p);
}

// The plane copied with its padding written out as the zero point's byte
// (adding nothing to a sum), as wide as whole blocks of eight output columns
// read, so that every column is computed alike: no bounds checks or edge
// cases, and on AVX2 a plane narrower than a block (MobileNet's 7x7) still
// runs eight lanes at a time.
struct PaddedPlane {
  const uint8_t* data;
  int64_t width;
};

PaddedPlane PadPlane(const Plane& p, int64_t blocks, std::vector<uint8_t>& buffer) {
  const ConvInt2D& g = *p.g;
  const int64_t width = (blocks * kBlock - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  const int64_t height = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  buffer.assign(static_cast<size_t>(width * height), static_cast<uint8_t>(p.zx));
  for (int64_t r = 0; r < height; ++r) {
    const int64_t iy = r - g.ph;
    if (iy < 0 || iy >= g.ih) continue;
    // Input columns [c0, c1) land at padded columns [c0 + pw, c1 + pw) within the row.
    const int64_t c0 = std::max<int64_t>(0, -g.pw), c1 = std::min(g.iw, width - g.pw);
    if (c1 > c0)
      std::memcpy(buffer.data() + r * width + c0 + g.pw, p.x + iy * g.iw + c0, static_cast<size_t>(c1 - c0));
  }
  return {buffer.data(), width};
}

// Portable, any stride: each output's sum over the padded plane, tap by tap.
template <bool kSigned>
void PlanePortable(const Plane& p) {
  const ConvInt2D& g = *p.g;
  thread_local std::vector<uint8_t> t_padded;
  const PaddedPlane in = PadPlane(p, (g.ow + kBlock - 1) / kBlock, t_padded);
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      uint32_t sum = 0;
      for (int64_t i = 0; i < g.kh; ++i) {
        const uint8_t* src = in.data + (oy * g.sh + i * g.dh) * in.width + ox * g.sw;
        for (int64_t j = 0; j < g.kw; ++j) {
          const int32_t v = Byte<kSigned>(src + j * g.dw) - p.zx;
          sum += static_cast<uint32_t>(v) * static_cast<uint32_t>(p.taps[i * g.kw + j]);
        }
      }
      p.y[oy * g.ow + ox] = static_cast<int32_t>(sum);
    }
}

#if defined(__x86_64__) || defined(__i386__)
// Eight input bytes at column stride kStride (1 or 2) from `src`, as int32 lanes. Reads src[0, 8 * kStride - 1).
template <bool kSigned, int kStride>
__attribute__((target("avx2,fma"), always_inline)) inline __m256i EightBytes(const uint8_t* src) {
  __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  if constexpr (kStride == 2) {
    // src[0..7] and src[7..14] (not src[15]: past the padded row), then the even columns.
    const __m128i high = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 7));
    const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    bytes = _mm_shuffle_epi8(_mm_unpacklo_epi64(bytes, high), even);
  }
  return kSigned ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
}

// AVX2, column stride 1 or 2: over the padded plane, blocks of eight output
// columns, each block's sums in one register over every tap: eight bytes
// widened to int32 lanes, less the zero point, times the tap's weight, added
// (the portable sum's int32 operations, so the same bits).
template <bool kSigned, int kStride>
__attribute__((target("avx2,fma"))) void PlaneAvx2(const Plane& p) {
  const ConvInt2D& g = *p.g;
  const int64_t blocks = (g.ow + kBlock - 1) / kBlock;
  thread_local std::vector<uint8_t> t_padded;
  const PaddedPlane in = PadPlane(p, blocks, t_padded);
  const __m256i zx = _mm256_set1_epi32(p.zx);
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    int32_t* out = p.y + oy * g.ow;
    for (int64_t b = 0; b < blocks; ++b) {
      __m256i acc = _mm256_setzero_si256();
      for (int64_t i = 0; i < g.kh; ++i) {
        const uint8_t* src = in.data + (oy * g.sh + i * g.dh) * in.width + b * kBlock * kStride;
        for (int64_t j = 0; j < g.kw; ++j) {
          const __m256i v = _mm256_sub_epi32(EightBytes<kSigned, kStride>(src + j * g.dw), zx);
          acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, _mm256_set1_epi32(p.taps[i * g.kw + j])));
        }
      }
      const int64_t ox = b * kBlock;
      if (ox + kBlock <= g.ow) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ox), acc);
      } else {
        alignas(32) int32_t last[kBlock];
        _mm256_store_si256(reinterpret_cast<__m256i*>(last), acc);
        std::memcpy(out + ox, last, static_cast<size_t>(g.ow - ox) * sizeof(int32_t));
      }
    }
  }
}
#endif

using PlaneFn = void (*)(const Plane&);

template <bool kSigned>
PlaneFn SelectPlane(int64_t stride) {
#if defined(__x86_64__) || defined(__i386__)
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) {
    if (stride == 1) return PlaneAvx2<kSigned, 1>;
    if (stride == 2) return PlaneAvx2<kSigned, 2>;
  }
#endif
  return PlanePortable<kSigned>;
}

}  // namespace

bool IsConvIntDepthwise(const ConvInt2D& g) { return g.Cg == 1 && g.Mg == 1 && g.group == g.C && g.C > 0; }

void ConvIntDepthwise(const KernelContext& ctx, const ConvInt2D& g, const uint8_t* x, bool x_signed, int32_t zx,
                      const uint8_t* w, bool w_signed, const int32_t* zw, int32_t* y) {
  const int64_t taps = g.kh * g.kw;
  std::vector<int32_t> tap_weights(static_cast<size_t>(g.M * taps));
  for (int64_t c = 0; c < g.M; ++c)
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t v = w_signed ? Byte<true>(w + c * taps + t) : Byte<false>(w + c * taps + t);
      tap_weights[static_cast<size_t>(c * taps + t)] = v - zw[c];
    }
  const PlaneFn plane = x_signed ? SelectPlane<true>(g.sw) : SelectPlane<false>(g.sw);
  ParallelTasks(ctx, g.N * g.C, [&](int64_t task) {
    const int64_t c = task % g.C;
    plane(Plane{&g, x + task * g.ih * g.iw, tap_weights.data() + c * taps, zx, y + task * g.oh * g.ow});
  });
}

}  // namespace nee::cpu
