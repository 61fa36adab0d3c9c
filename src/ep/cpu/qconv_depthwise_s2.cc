// Depthwise QLinearConv at column stride 2 (undilated columns) on AVX2, for planes too large for the
// sixteen-channel groups of qconv_depthwise.cc: MobileNetV2's 112x112 -> 56x56 and 56x56 -> 28x28.
//
// The phase planes of qconv_depthwise.cc cost as much as the sums there: each channel's input widened
// to int16 and split four ways (twice its bytes written, each row read once per column phase), and
// every flat row computes one dropped position. Here the input stays bytes: per (image, channel) a
// zero-point-padded copy of the plane (its rows whole 32-byte vectors apart, the border filled once per
// thread and call), then sixteen outputs of a row at a time straight from it. At stride 2, the 32 bytes
// from padded column 2 ox + j hold, as byte pairs, taps j and j + 1 of outputs ox .. ox + 15: vpunpcklbw
// / vpunpckhbw with zero make them the int16 pairs of one vpmaddwd each, with no shuffle. An odd
// kernel width's last tap is the even bytes of the load at 2 ox + kw - 1 (its words masked to their
// low byte), paired with the next kernel row's. The same exact int32 sums (acc = constant + sum
// x (w - zw)) and the same requantization (qconv_depthwise_avx2.h) as the other depthwise kernels, so
// the reference's bytes. Threads split the (image, channel) planes.
#include "ep/cpu/qconv_depthwise_s2.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/qconv_depthwise_avx2.h"
#define NEE_QCONV_S2_X86 1
#endif

namespace nee::cpu::qconv {

#ifdef NEE_QCONV_S2_X86
namespace {

constexpr int64_t kMaxKernelWidth = 8;
constexpr int64_t kMaxKernelHeight = 16;

// The padded copy: hb rows of `pitch` bytes, input pixel (iy, ix) at row iy + ph, column ix + pw.
struct PaddedPlane {
  int64_t hb = 0, pitch = 0;
  int64_t bytes() const { return hb * pitch; }
};

PaddedPlane PlanPadded(const QConvGeometry& g) {
  PaddedPlane L;
  L.hb = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  const int64_t last_vector = (g.ow - 1) / 16 * 16;  // the first output of the row's last vector
  const int64_t reach = 2 * last_vector + (g.kw - 1) + 32;  // past the last byte its loads read
  L.pitch = (std::max(reach, g.pw + g.iw) + 31) / 32 * 32;
  return L;
}

// n bytes from src to dst, flipped; exact (the row's right border follows).
__attribute__((target("avx2"))) inline void CopyRowFlipped(uint8_t* dst, const uint8_t* src, int64_t n,
                                                           __m256i flip) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k),
                        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k)), flip));
  if (k == n) return;
  if (n >= 32) {  // the last 32 bytes again, overlapping what is written
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - 32),
                        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - 32)), flip));
    return;
  }
  const uint8_t f = static_cast<uint8_t>(_mm256_extract_epi8(flip, 0));
  for (; k < n; ++k) dst[k] = static_cast<uint8_t>(src[k] ^ f);
}

// The first `rows` input rows of one plane into the padded copy's inside, flipped.
__attribute__((target("avx2"))) void CopyPlane(const QConvGeometry& g, const PaddedPlane& L, const uint8_t* plane,
                                               int64_t rows, uint8_t flip, uint8_t* buf) {
  const __m256i flip_bytes = _mm256_set1_epi8(static_cast<char>(flip));
  for (int64_t iy = 0; iy < rows; ++iy)
    CopyRowFlipped(buf + (iy + g.ph) * L.pitch + g.pw, plane + iy * g.iw, g.iw, flip_bytes);
}

// One channel's weights as the kernel pairs them: per kernel row, (w[i][j] - zw, w[i][j + 1] - zw) for
// even j < kw - 1 as int16 halves of an int32; then for an odd kw, the last column's taps of rows
// (0, 1), (2, 3), ... (a lone last row paired with 0).
struct ChannelWeights {
  int32_t row_pairs[kMaxKernelHeight * (kMaxKernelWidth / 2)];
  int32_t column_pairs[(kMaxKernelHeight + 1) / 2];
};

inline int32_t Pair(int32_t a, int32_t b) {
  return static_cast<int32_t>((static_cast<uint32_t>(b) << 16) | (static_cast<uint32_t>(a) & 0xFFFF));
}

void FormWeights(const QConvGeometry& g, const int16_t* w, int32_t zw, ChannelWeights& cw) {
  const int64_t half = g.kw / 2;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t p = 0; p < half; ++p)
      cw.row_pairs[i * half + p] = Pair(w[i * g.kw + 2 * p] - zw, w[i * g.kw + 2 * p + 1] - zw);
  if (g.kw % 2)
    for (int64_t i = 0; i < g.kh; i += 2)
      cw.column_pairs[i / 2] =
          Pair(w[i * g.kw + g.kw - 1] - zw, i + 1 < g.kh ? w[(i + 1) * g.kw + g.kw - 1] - zw : 0);
}

// Every output of one channel from its padded copy. kKh, kKw: the kernel when fixed at compile time (3x3),
// so that the tap loops unroll; 0: any (up to kMaxKernelHeight x kMaxKernelWidth).
template <int kKh, int kKw, RequantMode kMode>
__attribute__((target("avx2,fma"))) void ChannelStride2(const QConvGeometry& g, const PaddedPlane& L,
                                                        const uint8_t* buf, const ChannelWeights& cw,
                                                        int32_t constant_value, double mult_value, const Requant& q,
                                                        uint8_t* y) {
  const int64_t kh = kKh > 0 ? kKh : g.kh, kw = kKw > 0 ? kKw : g.kw, half = kw / 2;
  const __m256i zero = _mm256_setzero_si256(), low_byte = _mm256_set1_epi16(0xFF);
  const __m256i constant = _mm256_set1_epi32(constant_value);
  const ChannelRequant16 requant(mult_value, q);
  const int64_t P = g.P(), row_step = g.dh * L.pitch;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const uint8_t* top = buf + oy * g.sh * L.pitch;
    for (int64_t ox = 0; ox < g.ow; ox += 16) {
      const uint8_t* base = top + 2 * ox;
      __m256i lo = constant, hi = constant;
#pragma GCC unroll 16
      for (int64_t i = 0; i < kh; ++i) {
#pragma GCC unroll 4
        for (int64_t p = 0; p < half; ++p) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i * row_step + 2 * p));
          const __m256i w = _mm256_set1_epi32(cw.row_pairs[i * half + p]);
          lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi8(v, zero), w));
          hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi8(v, zero), w));
        }
      }
      if (kw % 2) {
#pragma GCC unroll 8
        for (int64_t i = 0; i < kh; i += 2) {
          const uint8_t* at = base + i * row_step + kw - 1;
          const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)), low_byte);
          const __m256i b =
              i + 1 < kh
                  ? _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + row_step)), low_byte)
                  : zero;
          const __m256i w = _mm256_set1_epi32(cw.column_pairs[i / 2]);
          lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w));
          hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w));
        }
      }
      const __m128i bytes = requant.Bytes<kMode>(lo, hi);
      // Sixteen bytes at once where they stay inside the plane: past the row's end they land on the next
      // row's first outputs, which are written after them. The plane's last bytes exactly.
      const int64_t at = oy * g.ow + ox;
      if (at + 16 <= P) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + at), bytes);
      } else {
        alignas(16) uint8_t stage[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(stage), bytes);
        std::memcpy(y + at, stage, static_cast<size_t>(std::min<int64_t>(16, g.ow - ox)));
      }
    }
  }
}

using ChannelFn = void (*)(const QConvGeometry&, const PaddedPlane&, const uint8_t*, const ChannelWeights&, int32_t,
                           double, const Requant&, uint8_t*);

template <RequantMode kMode>
ChannelFn PickChannelFor(const QConvGeometry& g) {
  return g.kh == 3 && g.kw == 3 ? ChannelStride2<3, 3, kMode> : ChannelStride2<0, 0, kMode>;
}

}  // namespace
#endif

bool RunDepthwiseStride2(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                         const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                         const double* mult, const Requant& q, uint8_t* y) {
#ifdef NEE_QCONV_S2_X86
  const int64_t K = g.kh * g.kw;
  if (g.Cg != 1 || g.Mg != 1 || g.sw != 2 || g.dw != 1 || g.sh < 1 || g.dh < 1 || g.kw > kMaxKernelWidth ||
      g.kh > kMaxKernelHeight || taps.size() != static_cast<size_t>(g.C * K) || g.oh < 1 || g.ow < 1)
    return false;
  const PaddedPlane L = PlanPadded(g);
  const int64_t in_plane = g.ih * g.iw, P = g.P();
  const int64_t rows = std::min(g.ih, L.hb - g.ph);  // input rows the windows read
  const ChannelFn channel_fn = !q.small_multipliers ? PickChannelFor<RequantMode::kDoubleClamped>(g)
                               : q.float_exact     ? PickChannelFor<RequantMode::kFloatExact>(g)
                                                   : PickChannelFor<RequantMode::kFloatShortcut>(g);
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> t_buf;
    if (t_buf.size() < static_cast<size_t>(L.bytes())) t_buf.resize(static_cast<size_t>(L.bytes()));
    uint8_t* buf = t_buf.data();
    std::memset(buf, zx, static_cast<size_t>(L.bytes()));  // the border: the rows' copies never touch it
    ChannelWeights cw;
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t c = nc % g.C;
      CopyPlane(g, L, x + nc * in_plane, rows, flip, buf);
      FormWeights(g, taps.data() + c * K, zw[c], cw);
      channel_fn(g, L, buf, cw, constant[c], mult[c], q, y + nc * P);
    }
  });
  return true;
#else
  (void)ctx, (void)g, (void)x, (void)flip, (void)zx, (void)taps, (void)zw, (void)constant, (void)mult, (void)q,
      (void)y;
  return false;
#endif
}

}  // namespace nee::cpu::qconv
