// QLinearConv with one input and one output channel per group (depthwise),
// AVX2, any stride, dilation and kernel of up to 127 taps: qconv_common.h.
//
// Per (image, channel):
//
// 1. Phase planes. The zero-point-padded input plane, widened to int16 and
//    split by stride phase: phase (a, b) holds padded rows a, a + sh, ... and
//    columns b, b + sw, ..., as an H' x W' plane. Output (oy, ox)'s tap (i, j)
//    is then phase ((i dh) % sh, (j dw) % sw) at row oy + (i dh) / sh, column
//    ox + (j dw) / sw: at the flat position f = oy W' + ox plus a fixed
//    offset. Every tap of sixteen consecutive f is one plain load, whatever
//    the stride, and the loads need no widening (that had been one shuffle per
//    tap).
// 2. Flat sums. The positions f in [0, oh W') sixteen at a time, all rows in
//    one run: the W' - ow positions past each row's end (2 for a 3x3 stride 1,
//    1 for stride 2) are computed and dropped, so a 7-wide image fills the
//    vectors (4 per 7x7 channel, where one per row used 7 lanes of 16). Two
//    taps per vpmaddwd: taps t and t + 1 interleaved, times the pair
//    (W'[t] - zw, W'[t + 1] - zw), exact in int32 (|x| <= 255, |w| <= 255).
//    acc = bias + sum x (w - zw) - zx * sum (w - zw): padding reads zx and adds
//    nothing.
// 3. Requantization right there, on the registers (the shared FinishTileAvx2 /
//    RequantRowAvx2 take sums from memory, one call per sixteen: a store, a
//    call and a reload per vector, and no overlap between vectors' long
//    convert chains, so this file has its own): the reference's double
//    arithmetic, double(acc) * mult + yzp without contraction, clamped unless
//    the multipliers are small (see Requant), rounded half to even; for small
//    multipliers first in float, which RoundFloat8 proves equal to it or hands
//    back to it. Into a flat byte row, whose rows are then copied out.
//
// Every output is computed by the same instructions whatever the thread
// count: threads split the (image, channel) planes.
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

constexpr int64_t kMaxTaps = 127;
constexpr int64_t kSlack = 32;  // int16 past each phase plane: whole-vector reads past the last row

// Where the phase planes are and what each tap reads.
struct PhaseLayout {
  int64_t hq = 0, wq = 0;        // H' x W' per phase plane
  int64_t stride = 0;            // int16 per phase plane, slack included
  int64_t flat = 0;              // oh * W' positions
  std::vector<bool> used;        // per phase (a * sw + b)
  // Per column phase b: column c reads input column sw c + b - pw, inside [0, iw) for c in [c0, c1).
  std::vector<int64_t> c0, c1;
  std::vector<int64_t> offsets;  // per tap: phase * stride + row * W' + column
};

PhaseLayout PlanPhases(const QConvGeometry& g) {
  PhaseLayout L;
  const int64_t row_reach = ((g.kh - 1) * g.dh) / g.sh, col_reach = ((g.kw - 1) * g.dw) / g.sw;
  L.hq = g.oh + row_reach;
  L.wq = g.ow + col_reach;
  L.flat = g.oh * L.wq;
  // Past the last row: the flat run's last vector (up to 15 positions past oh * W') plus the farthest
  // tap offset, which is less than row_reach * W' (inside H') plus W'.
  L.stride = L.hq * L.wq + L.wq + kSlack;
  L.used.assign(static_cast<size_t>(g.sh * g.sw), false);
  for (int64_t b = 0; b < g.sw; ++b) {
    const int64_t c0 = std::min(L.wq, std::max<int64_t>(0, (g.pw - b + g.sw - 1) / g.sw));
    L.c0.push_back(c0);
    L.c1.push_back(std::max(c0, std::min(L.wq, (g.iw + g.pw - b + g.sw - 1) / g.sw)));
  }
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t phase = ((i * g.dh) % g.sh) * g.sw + (j * g.dw) % g.sw;
      L.used[static_cast<size_t>(phase)] = true;
      L.offsets.push_back(phase * L.stride + ((i * g.dh) / g.sh) * L.wq + (j * g.dw) / g.sw);
    }
  return L;
}

// n int16 of the zero point from dst, sixteen at a time: up to 15 past dst + n are written too.
__attribute__((target("avx2"))) inline void FillPad(int16_t* dst, int64_t n, __m256i pad) {
  for (int64_t k = 0; k < n; k += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), pad);
}

// n input bytes, `step` apart, flipped and widened into dst. Whole vectors may read past the n bytes
// (up to `readable` bytes from src) and write up to 15 int16 past dst + n.
__attribute__((target("avx2"))) inline void WidenRow(const uint8_t* src, int64_t n, int64_t step, int64_t readable,
                                                     __m256i flip, int16_t* dst) {
  int64_t k = 0;
  if (step == 1) {
    for (; k < n && k + 16 <= readable; k += 16) {
      const __m128i v =
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)), _mm256_castsi256_si128(flip));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_cvtepu8_epi16(v));
    }
  } else if (step == 2) {
    // The low byte of each 16-bit word is an even byte: already an int16 once masked.
    const __m256i low = _mm256_set1_epi16(0xFF);
    for (; k < n && 2 * k + 32 <= readable; k += 16) {
      const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * k)), flip);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_and_si256(v, low));
    }
  }
  const uint8_t f = static_cast<uint8_t>(_mm256_extract_epi8(flip, 0));
  for (; k < n; ++k) dst[k] = static_cast<int16_t>(src[k * step] ^ f);
}

// One (image, channel)'s phase planes from its input plane x; x_end bounds what whole-vector reads may
// touch (the end of the input tensor). Whole-vector writes run up to 15 int16 past where they should
// stop: always forward, into what is written next (the row's next part, the next row) or into the
// plane's slack. The slack is not filled: only dropped positions read it (see PhaseLayout), and it holds
// whatever it last held (zeros at first).
__attribute__((target("avx2"))) void BuildPhasePlanes(const QConvGeometry& g, const PhaseLayout& L, const uint8_t* x,
                                                      const uint8_t* x_end, uint8_t flip, uint8_t zx,
                                                      int16_t* planes) {
  const __m256i pad = _mm256_set1_epi16(zx), flip_bytes = _mm256_set1_epi8(static_cast<char>(flip));
  for (int64_t a = 0; a < g.sh; ++a)
    for (int64_t b = 0; b < g.sw; ++b) {
      if (!L.used[static_cast<size_t>(a * g.sw + b)]) continue;
      int16_t* plane = planes + (a * g.sw + b) * L.stride;
      const int64_t c0 = L.c0[static_cast<size_t>(b)], c1 = L.c1[static_cast<size_t>(b)];
      const int64_t first = c0 * g.sw + b - g.pw;  // the input column of c0
      for (int64_t r = 0; r < L.hq; ++r) {
        int16_t* row = plane + r * L.wq;
        const int64_t iy = r * g.sh + a - g.ph;
        if (iy < 0 || iy >= g.ih || c0 == c1) {
          FillPad(row, L.wq, pad);
          continue;
        }
        FillPad(row, c0, pad);
        const uint8_t* src = x + iy * g.iw + first;
        WidenRow(src, c1 - c0, g.sw, x_end - src, flip_bytes, row + c0);
        FillPad(row + c1, L.wq - c1, pad);
      }
    }
}

// Four sums to int32 as the reference rounds them: double(acc) * mult + yzp (no contraction: this target
// has no FMA), clamped unless the multipliers are small (see Requant), half to even.
template <bool kClamp>
__attribute__((target("avx2"))) inline __m128i Requant4(__m128i acc, __m256d mult, __m256d yzp, __m256d low,
                                                        __m256d high) {
  __m256d d = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(acc), mult), yzp);
  if (kClamp) {
    d = _mm256_min_pd(_mm256_max_pd(d, low), high);
    d = _mm256_round_pd(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  return _mm256_cvtpd_epi32(d);
}

// Sixteen sums (lo: positions 0-3 and 8-11, hi: 4-7 and 12-15, as vpunpck leaves them), the channel's
// constant included, requantized to sixteen bytes in position order.
template <bool kClamp>
__attribute__((target("avx2"))) inline __m128i Requant16(__m256i lo, __m256i hi, __m256d mult, __m256d yzp,
                                                         __m256d low, __m256d high, bool y_signed) {
  const __m128i w0 = _mm_packs_epi32(Requant4<kClamp>(_mm256_castsi256_si128(lo), mult, yzp, low, high),
                                     Requant4<kClamp>(_mm256_castsi256_si128(hi), mult, yzp, low, high));
  const __m128i w1 = _mm_packs_epi32(Requant4<kClamp>(_mm256_extracti128_si256(lo, 1), mult, yzp, low, high),
                                     Requant4<kClamp>(_mm256_extracti128_si256(hi, 1), mult, yzp, low, high));
  return y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
}

// The float shortcut, for small multipliers (every |mult| < 1/2), proven to give the reference's bytes
// or to say it cannot. The reference: D = double(acc) * m + yzp in double, clamped to [lo, hi] (the
// output type's whole range), rounded half to even. Here F = float(float(float(acc) * m) + yzp): m (a
// float, as the multipliers are formed) and yzp (an integer of at most 255) are exact in float, so F
// carries three float roundings, each within 2^-24 relative (2^-23 in any rounding mode), D two
// double ones. Where |F| <= 512, |acc * m| <= 768 and |F - D| < 1.3e-4 (2.6e-4 in any mode), well
// below delta = 2^-11. Then F - delta and F + delta (both exact: delta is a multiple of F's ulp) round
// to the same integer k only if [F - delta, F + delta] lies within [k - 1/2, k + 1/2], so D, strictly
// inside it, lies strictly inside (k - 1/2, k + 1/2) and rounds to k too; clamping commutes with that
// rounding (lo and hi are integers), and the saturating packs clamp. Where |F| > 512, D has F's sign
// and |D| > 256, so both clamp to the same end: k from F - delta does too (small multipliers keep
// |F| < 2^31, so it converts). Lanes whose two roundings differ (about 1 in 1000) send the whole
// vector to the double arithmetic. Eight sums: the rounded values, and which lanes agreed.
__attribute__((target("avx2"))) inline __m256i RoundFloat8(__m256i acc, __m256 mult, __m256 yzp, __m256i* agree) {
  const __m256 delta = _mm256_set1_ps(1.0f / 2048);
  const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), mult), yzp);
  const __m256i below = _mm256_cvtps_epi32(_mm256_sub_ps(v, delta));
  *agree = _mm256_cmpeq_epi32(below, _mm256_cvtps_epi32(_mm256_add_ps(v, delta)));
  return below;
}

// What one channel's flat run needs.
struct ChannelRun {
  const int16_t* planes;
  const int64_t* offsets;  // per tap (2 * pairs of them: an odd last tap's partner repeats it)
  const int32_t* pairs;    // per tap pair: (w[t] - zw, w[t + 1] - zw) as int16 halves of an int32
  int64_t npairs, flat;
  int32_t constant;
  double mult;
};

// How a flat run requantizes: the reference's double arithmetic, clamped (any multipliers), or for small
// multipliers the float shortcut (RoundFloat8), falling back to that arithmetic unclamped (see Requant).
enum class RequantMode { kDoubleClamped, kFloatShortcut };

// The flat run's bytes into out (flat rounded up to 16: out has that room). kPairs: the number of tap
// pairs when fixed at compile time (5: 3x3), so that the loop over them unrolls; 0: any.
template <int kPairs, RequantMode kMode>
__attribute__((target("avx2"))) void FlatRunAvx2(const ChannelRun& run, const Requant& q, uint8_t* out) {
  const int64_t npairs = kPairs > 0 ? kPairs : run.npairs;
  constexpr int kMax = kPairs > 0 ? kPairs : (kMaxTaps + 1) / 2;
  constexpr bool kClamp = kMode == RequantMode::kDoubleClamped;
  const int16_t* tap[2 * kMax];
  for (int64_t t = 0; t < 2 * npairs; ++t) tap[t] = run.planes + run.offsets[t];
  const __m256i constant = _mm256_set1_epi32(run.constant);
  const __m256d mult = _mm256_set1_pd(run.mult), yzp = _mm256_set1_pd(q.yzp), low = _mm256_set1_pd(q.lo),
                high = _mm256_set1_pd(q.hi);
  const __m256 mult_f = _mm256_set1_ps(static_cast<float>(run.mult)), yzp_f = _mm256_set1_ps(static_cast<float>(q.yzp));
  for (int64_t f = 0; f < run.flat; f += 16) {
    __m256i lo = constant, hi = constant;
#pragma GCC unroll 8
    for (int64_t p = 0; p < npairs; ++p) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tap[2 * p] + f));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tap[2 * p + 1] + f));
      const __m256i w = _mm256_set1_epi32(run.pairs[p]);
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w));
    }
    __m128i bytes;
    if (kMode == RequantMode::kFloatShortcut) {
      __m256i agree_lo, agree_hi;
      const __m256i r_lo = RoundFloat8(lo, mult_f, yzp_f, &agree_lo), r_hi = RoundFloat8(hi, mult_f, yzp_f, &agree_hi);
      if (_mm256_movemask_epi8(_mm256_and_si256(agree_lo, agree_hi)) == -1) {
        const __m256i w = _mm256_packs_epi32(r_lo, r_hi);  // positions 0-7 | 8-15
        const __m128i w0 = _mm256_castsi256_si128(w), w1 = _mm256_extracti128_si256(w, 1);
        bytes = q.y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
      } else {
        bytes = Requant16<false>(lo, hi, mult, yzp, low, high, q.y_signed);
      }
    } else {
      bytes = Requant16<kClamp>(lo, hi, mult, yzp, low, high, q.y_signed);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + f), bytes);
  }
}

using FlatRunFn = void (*)(const ChannelRun&, const Requant&, uint8_t*);

template <RequantMode kMode>
FlatRunFn PickFlatRunFor(int64_t npairs) {
  return npairs == 5 ? FlatRunAvx2<5, kMode> : FlatRunAvx2<0, kMode>;
}

FlatRunFn PickFlatRun(int64_t npairs, const Requant& q) {
  if (!q.small_multipliers) return PickFlatRunFor<RequantMode::kDoubleClamped>(npairs);
  return PickFlatRunFor<RequantMode::kFloatShortcut>(npairs);
}

// `size` bytes (a constant, so that memcpy is a plain move) from src + at to dst + at.
template <int size>
inline void CopyPiece(uint8_t* dst, const uint8_t* src, int64_t at) {
  std::memcpy(dst + at, src + at, size);
}

// n bytes exactly, without a call: 16 at a time, the last 16 ending at n (overlapping the ones before),
// or two overlapping halves of 8, 4 or 2 bytes for short rows.
inline void CopyExact(uint8_t* dst, const uint8_t* src, int64_t n) {
  if (n >= 16) {
    for (int64_t k = 0; k + 16 < n; k += 16) CopyPiece<16>(dst, src, k);
    CopyPiece<16>(dst, src, n - 16);
  } else if (n >= 8) {
    CopyPiece<8>(dst, src, 0), CopyPiece<8>(dst, src, n - 8);
  } else if (n >= 4) {
    CopyPiece<4>(dst, src, 0), CopyPiece<4>(dst, src, n - 4);
  } else if (n >= 2) {
    CopyPiece<2>(dst, src, 0), CopyPiece<2>(dst, src, n - 2);
  } else if (n == 1) {
    dst[0] = src[0];
  }
}

// The flat rows (W' bytes apart, ow of each kept) into y's contiguous plane of oh x ow. Sixteen bytes at
// a time where the overrun stays inside the plane (a later row overwrites it); exactly for the rest.
__attribute__((target("avx2"))) void CopyRowsOut(const uint8_t* flat, int64_t wq, int64_t oh, int64_t ow,
                                                 uint8_t* y) {
  const int64_t plane = oh * ow, chunks = (ow + 15) / 16;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const uint8_t* src = flat + oy * wq;
    uint8_t* dst = y + oy * ow;
    if (oy * ow + chunks * 16 <= plane) {
      for (int64_t k = 0; k < chunks; ++k)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * k),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * k)));
    } else {
      CopyExact(dst, src, ow);
    }
  }
}

}  // namespace
#endif

bool RunDepthwiseQConv(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                       const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                       const double* mult, const Requant& q, uint8_t* y) {
#ifdef NEE_QCONV_X86
  const int64_t K = g.kh * g.kw;
  if (!IgemmU8S8Available() || g.Cg != 1 || g.Mg != 1 || K > kMaxTaps || taps.empty() || g.sh < 1 || g.sw < 1 ||
      g.dh < 1 || g.dw < 1)
    return false;
  const PhaseLayout L = PlanPhases(g);
  const int64_t P = g.P(), npairs = (K + 1) / 2;
  const int64_t plane_count = g.sh * g.sw;
  const int64_t flat_bytes = (L.flat + 15) / 16 * 16 + 16;  // whole vectors, and CopyRowsOut's reads past
  const uint8_t* x_end = x + g.N * g.C * g.ih * g.iw;
  const FlatRunFn flat_run = PickFlatRun(npairs, q);
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<int16_t> t_planes;
    thread_local std::vector<uint8_t> t_flat;
    if (t_planes.size() < static_cast<size_t>(plane_count * L.stride + 16))
      t_planes.resize(static_cast<size_t>(plane_count * L.stride + 16));
    if (t_flat.size() < static_cast<size_t>(flat_bytes)) t_flat.resize(static_cast<size_t>(flat_bytes));
    int64_t offsets[kMaxTaps + 1];
    int32_t pairs[(kMaxTaps + 1) / 2];
    for (int64_t t = 0; t < K; ++t) offsets[t] = L.offsets[static_cast<size_t>(t)];
    offsets[K] = offsets[K - 1];  // an odd last tap's partner (weight 0)
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t c = nc % g.C;
      const int16_t* w = taps.data() + c * K;
      for (int64_t t = 0; t < npairs; ++t) {
        const int32_t lo = w[2 * t] - zw[c], hi = 2 * t + 1 < K ? w[2 * t + 1] - zw[c] : 0;
        pairs[t] = static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) | (static_cast<uint32_t>(lo) & 0xFFFF));
      }
      BuildPhasePlanes(g, L, x + nc * g.ih * g.iw, x_end, flip, zx, t_planes.data());
      // zw[c] is W's zero point shifted as W' is; constant[c] holds bias - zx * sum W' + K zx zw, i.e.
      // bias - zx * sum (W' - zw).
      const ChannelRun run{t_planes.data(), offsets, pairs, npairs, L.flat, constant[c], mult[c]};
      flat_run(run, q, t_flat.data());
      CopyRowsOut(t_flat.data(), L.wq, g.oh, g.ow, y + nc * P);
    }
  });
  return true;
#else
  (void)ctx, (void)g, (void)x, (void)flip, (void)zx, (void)taps, (void)zw, (void)constant, (void)mult, (void)q, (void)y;
  return false;
#endif
}

}  // namespace nee::cpu::qconv
