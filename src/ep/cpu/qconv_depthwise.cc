// QLinearConv with one input and one output channel per group (depthwise),
// AVX2, any stride, dilation and kernel of up to 127 taps: qconv_common.h.
// Small planes of 16+ channels take the channels-innermost kernel below;
// column stride 2 on larger planes qconv_depthwise_s2.cc; the rest this:
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
//    multipliers first in float, which RoundFma8 proves equal to it or hands
//    back to it. Into a flat byte row, whose rows are then copied out.
//
// Every output is computed by the same instructions whatever the thread
// count: threads split the (image, channel) planes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/qconv_common.h"
#include "ep/cpu/qconv_depthwise_s2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "ep/cpu/igemm.h"
#include "ep/cpu/qconv_depthwise_avx2.h"
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

// What one channel's flat run needs.
struct ChannelRun {
  const int16_t* planes;
  const int64_t* offsets;  // per tap (2 * pairs of them: an odd last tap's partner repeats it)
  const int32_t* pairs;    // per tap pair: (w[t] - zw, w[t + 1] - zw) as int16 halves of an int32
  int64_t npairs, flat;
  int32_t constant;
  double mult;
};

// The flat run's bytes into out (flat rounded up to 16: out has that room). kPairs: the number of tap
// pairs when fixed at compile time (5: 3x3), so that the loop over them unrolls; 0: any.
template <int kPairs, RequantMode kMode>
__attribute__((target("avx2,fma"))) void FlatRunAvx2(const ChannelRun& run, const Requant& q, uint8_t* out) {
  const int64_t npairs = kPairs > 0 ? kPairs : run.npairs;
  constexpr int kMax = kPairs > 0 ? kPairs : (kMaxTaps + 1) / 2;
  const int16_t* tap[2 * kMax];
  for (int64_t t = 0; t < 2 * npairs; ++t) tap[t] = run.planes + run.offsets[t];
  const __m256i constant = _mm256_set1_epi32(run.constant);
  const ChannelRequant16 requant(run.mult, q);
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
    const __m128i bytes = requant.Bytes<kMode>(lo, hi);
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
  if (q.float_exact) return PickFlatRunFor<RequantMode::kFloatExact>(npairs);
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

// ---- Channels innermost: small planes, sixteen channels a vector ----
//
// On planes of a few hundred pixels the flat runs above are short and each channel pays for its phase
// planes and its setup (7x7: a third of the vectors compute dropped positions, and building the planes
// cost about as much as the sums). There, sixteen channels at a time go through a zero-point-padded
// pixel-major copy, [hb][wb][16] bytes, made by 16x16 byte transposes: each output pixel is then one
// vector of sixteen channels, each tap one load at a fixed offset, whatever the stride and dilation;
// the weights are per-lane vectors instead of broadcasts. The same int32 sums (vpmaddwd over the same
// tap pairs) and the same requantization as the flat runs, lane by lane, so the same bytes; the
// [P][16] result is transposed back into the sixteen NCHW planes.

constexpr int64_t kGroup = 16;  // channels a vector

// Rows r[i] into o[j], o[j][i] = r[i][j], in each 128-bit lane on its own (two 16x16 byte blocks at
// once): four rounds of unpacks, each doubling the width of the interleaved units.
__attribute__((target("avx2"), always_inline)) inline void Transpose16x16x2(const __m256i r[16], __m256i o[16]) {
  __m256i a[16], b[16], c[16];
  for (int k = 0; k < 8; ++k) {  // a[h * 8 + k]: rows 2k, 2k + 1 as byte pairs, columns 8h .. 8h + 7
    a[k] = _mm256_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    a[8 + k] = _mm256_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h)  // b[q * 4 + k]: rows 4k .. 4k + 3, columns 4q .. 4q + 3
    for (int k = 0; k < 4; ++k) {
      b[(2 * h) * 4 + k] = _mm256_unpacklo_epi16(a[h * 8 + 2 * k], a[h * 8 + 2 * k + 1]);
      b[(2 * h + 1) * 4 + k] = _mm256_unpackhi_epi16(a[h * 8 + 2 * k], a[h * 8 + 2 * k + 1]);
    }
  for (int q = 0; q < 4; ++q)  // c[q * 4 + 2s + m]: rows 8m .. 8m + 7, columns 4q + 2s, 4q + 2s + 1
    for (int m = 0; m < 2; ++m) {
      c[q * 4 + m] = _mm256_unpacklo_epi32(b[q * 4 + 2 * m], b[q * 4 + 2 * m + 1]);
      c[q * 4 + 2 + m] = _mm256_unpackhi_epi32(b[q * 4 + 2 * m], b[q * 4 + 2 * m + 1]);
    }
  for (int q = 0; q < 4; ++q)
    for (int s = 0; s < 2; ++s) {
      o[4 * q + 2 * s] = _mm256_unpacklo_epi64(c[q * 4 + 2 * s], c[q * 4 + 2 * s + 1]);
      o[4 * q + 2 * s + 1] = _mm256_unpackhi_epi64(c[q * 4 + 2 * s], c[q * 4 + 2 * s + 1]);
    }
}

// Where the pixel-major copy is: hb x wb pixels, input pixel (iy, ix) at (iy + ph, ix + pw) when inside.
struct ChannelsLayout {
  int64_t hb = 0, wb = 0;
  int64_t npairs = 0;
  std::vector<int64_t> offsets;  // per tap (an odd last tap's partner repeats it), bytes from the window's corner
  int64_t buffer_bytes() const { return hb * wb * kGroup; }
};

ChannelsLayout PlanChannels(const QConvGeometry& g) {
  ChannelsLayout L;
  L.hb = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  L.wb = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  const int64_t K = g.kh * g.kw;
  L.npairs = (K + 1) / 2;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) L.offsets.push_back((i * g.dh * L.wb + j * g.dw) * kGroup);
  if (K % 2) L.offsets.push_back(L.offsets.back());
  return L;
}

// The copy's border (every position no input pixel lands on) filled with the zero point.
__attribute__((target("avx2"))) void FillChannelsBorder(const QConvGeometry& g, const ChannelsLayout& L, uint8_t zx,
                                                        uint8_t* buf) {
  const __m128i pad = _mm_set1_epi8(static_cast<char>(zx));
  for (int64_t by = 0; by < L.hb; ++by) {
    const bool row_inside = by >= g.ph && by < g.ph + g.ih;
    for (int64_t bx = 0; bx < L.wb; ++bx)
      if (!row_inside || bx < g.pw || bx >= g.pw + g.iw)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + (by * L.wb + bx) * kGroup), pad);
  }
}

// Where each input pixel lands in the copy (bytes from its start), or the dump slot past its end for
// pixels no window reads.
std::vector<int32_t> PixelOffsets(const QConvGeometry& g, const ChannelsLayout& L) {
  std::vector<int32_t> at(static_cast<size_t>(g.ih * g.iw));
  for (int64_t iy = 0; iy < g.ih; ++iy)
    for (int64_t ix = 0; ix < g.iw; ++ix) {
      const int64_t by = iy + g.ph, bx = ix + g.pw;
      at[static_cast<size_t>(iy * g.iw + ix)] =
          static_cast<int32_t>(by < L.hb && bx < L.wb ? (by * L.wb + bx) * kGroup : L.buffer_bytes());
    }
  return at;
}

// Sixteen consecutive input planes (from x0, ih x iw bytes each) into the copy's inside (pixel p at
// offsets[p]), flipped, 32 pixels at a time. The planes lie one after the other, so a read past a
// plane's end reads the next one (dropped); only past x_end (the tensor's end) does it go through a copy.
__attribute__((target("avx2"))) void TransposeIn(const QConvGeometry& g, const int32_t* offsets, const uint8_t* x0,
                                                 int64_t count, const uint8_t* x_end, uint8_t flip, uint8_t* buf) {
  const int64_t pixels = g.ih * g.iw;
  const __m256i flip_bytes = _mm256_set1_epi8(static_cast<char>(flip));
  for (int64_t p0 = 0; p0 < pixels; p0 += 32) {
    __m256i r[kGroup], o[kGroup];
    const int64_t n = std::min<int64_t>(32, pixels - p0);
    for (int64_t i = 0; i < kGroup; ++i) {
      const uint8_t* src = x0 + std::min(i, count - 1) * pixels + p0;  // lanes past the last channel: dropped
      if (src + 32 <= x_end) {
        r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      } else {
        alignas(32) uint8_t stage[32] = {};
        std::memcpy(stage, src, static_cast<size_t>(n));
        r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(stage));
      }
      r[i] = _mm256_xor_si256(r[i], flip_bytes);
    }
    Transpose16x16x2(r, o);
    const int32_t* at = offsets + p0;
    const int64_t low = std::min<int64_t>(16, n);
    for (int64_t j = 0; j < low; ++j)  // pixel p0 + j: o[j]'s low lane
      _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + at[j]), _mm256_castsi256_si128(o[j]));
    for (int64_t j = 16; j < n; ++j)  // pixel p0 + j: o[j - 16]'s high lane
      _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + at[j]), _mm256_extracti128_si256(o[j - 16], 1));
  }
}

// Where ChannelGroupAvx2 puts output pixel p's sixteen bytes: in blocks of 32 pixels, pixels j and j + 16
// of a block side by side, so that TransposeOut reads them as one vector.
inline int64_t OutSlot(int64_t p) { return ((p & ~int64_t{31}) + ((p & 15) << 1) + ((p >> 4) & 1)) * kGroup; }

// The result (out: pixel p at OutSlot(p), room for whole blocks of 32 pixels) into `count` consecutive
// output planes from y0, 32 pixels at a time, the last block first: a plane's whole-vector store runs into
// the planes after it, which their own stores (later in this block, or in the first block, which goes
// last) then write. Stores that would pass the group's last plane are exact (what follows may be another
// thread's).
__attribute__((target("avx2"))) void TransposeOut(const uint8_t* out, int64_t P, int64_t count, uint8_t* y0) {
  const int64_t blocks = (P + 31) / 32;
  const uint8_t* const y_end = y0 + count * P;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t p0 = (b == 0 ? blocks - 1 : b - 1) * 32;
    __m256i r[kGroup], o[kGroup];
    for (int j = 0; j < kGroup; ++j)
      r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + (p0 + 2 * j) * kGroup));
    Transpose16x16x2(r, o);
    const int64_t n = std::min<int64_t>(32, P - p0);
    for (int64_t c = 0; c < count; ++c) {
      uint8_t* dst = y0 + c * P + p0;
      if (dst + 32 <= y_end) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), o[c]);
      } else {
        alignas(32) uint8_t stage[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(stage), o[c]);
        std::memcpy(dst, stage, static_cast<size_t>(n));
      }
    }
  }
}

// One group's values from DepthwiseLanes: the lanes the sums have are lo = channels 0-3 and 8-11, hi =
// 4-7 and 12-15 (vpunpcklwd / vpunpckhwd of two taps' sixteen channels); mult_d in channel order.
struct GroupLanes {
  const int32_t* pairs;     // [pairs][16]: lo then hi
  const int32_t* constant;  // 16: lo then hi
  const float* mult_f;      // 16: lo then hi
  const double* mult_d;     // 16
};

// Sixteen sums with per-lane multipliers, as Requant16 rounds them.
template <bool kClamp>
__attribute__((target("avx2"))) inline __m128i Requant16Lanes(__m256i lo, __m256i hi, const double* mult_d,
                                                              __m256d yzp, __m256d low, __m256d high, bool y_signed) {
  const __m256d m0 = _mm256_loadu_pd(mult_d), m1 = _mm256_loadu_pd(mult_d + 4), m2 = _mm256_loadu_pd(mult_d + 8),
                m3 = _mm256_loadu_pd(mult_d + 12);
  const __m128i w0 = _mm_packs_epi32(Requant4<kClamp>(_mm256_castsi256_si128(lo), m0, yzp, low, high),
                                     Requant4<kClamp>(_mm256_castsi256_si128(hi), m1, yzp, low, high));
  const __m128i w1 = _mm_packs_epi32(Requant4<kClamp>(_mm256_extracti128_si256(lo, 1), m2, yzp, low, high),
                                     Requant4<kClamp>(_mm256_extracti128_si256(hi, 1), m3, yzp, low, high));
  return y_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
}

// Every output pixel of one group: sixteen bytes each into out (pixel p at OutSlot(p)).
template <int kPairs, RequantMode kMode>
__attribute__((target("avx2,fma"))) void ChannelGroupAvx2(const QConvGeometry& g, const ChannelsLayout& L,
                                                      const uint8_t* buf, const GroupLanes& lanes, const Requant& q,
                                                      uint8_t* out) {
  const int64_t npairs = kPairs > 0 ? kPairs : L.npairs;
  constexpr int kMax = kPairs > 0 ? kPairs : (kMaxTaps + 1) / 2;
  constexpr bool kClamp = kMode == RequantMode::kDoubleClamped;
  int64_t off[2 * kMax];
  for (int64_t t = 0; t < 2 * npairs; ++t) off[t] = L.offsets[static_cast<size_t>(t)];
  const int32_t* pairs = lanes.pairs;
  const __m256i constant_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes.constant)),
                constant_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes.constant + 8));
  const __m256 mult_lo = _mm256_loadu_ps(lanes.mult_f), mult_hi = _mm256_loadu_ps(lanes.mult_f + 8);
  const __m256d yzp = _mm256_set1_pd(q.yzp), low = _mm256_set1_pd(q.lo), high = _mm256_set1_pd(q.hi);
  const float delta = kFmaDelta;
  const __m256 z_lo = _mm256_set1_ps(static_cast<float>(q.yzp) - delta),
               z_hi = _mm256_set1_ps(static_cast<float>(q.yzp) + delta);
  const __m256 z_exact = _mm256_set1_ps(static_cast<float>(q.yzp) + kRoundingBias);
  const int64_t row_step = g.sh * L.wb * kGroup, col_step = g.sw * kGroup;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const uint8_t* row = buf + oy * row_step;
    const int64_t p_row = oy * g.ow;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const uint8_t* base = row + ox * col_step;
      __m256i lo = constant_lo, hi = constant_hi;
#pragma GCC unroll 8
      for (int64_t p = 0; p < npairs; ++p) {
        const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + off[2 * p])));
        const __m256i b =
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + off[2 * p + 1])));
        const __m256i* w = reinterpret_cast<const __m256i*>(pairs + 16 * p);
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), _mm256_loadu_si256(w)));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), _mm256_loadu_si256(w + 1)));
      }
      __m128i bytes;
      if constexpr (kMode == RequantMode::kFloatExact) {
        bytes = RoundFmaExact16(lo, hi, mult_lo, mult_hi, z_exact, q.y_signed);
      } else if constexpr (kMode == RequantMode::kFloatShortcut) {
        if (!TryRoundFma16(lo, hi, mult_lo, mult_hi, z_lo, z_hi, q.y_signed, &bytes))
          bytes = Requant16Lanes<false>(lo, hi, lanes.mult_d, yzp, low, high, q.y_signed);
      } else {
        bytes = Requant16Lanes<kClamp>(lo, hi, lanes.mult_d, yzp, low, high, q.y_signed);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + OutSlot(p_row + ox)), bytes);
    }
  }
}

using ChannelGroupFn = void (*)(const QConvGeometry&, const ChannelsLayout&, const uint8_t*, const GroupLanes&,
                                const Requant&, uint8_t*);

template <RequantMode kMode>
ChannelGroupFn PickChannelGroupFor(int64_t npairs) {
  return npairs == 5 ? ChannelGroupAvx2<5, kMode> : ChannelGroupAvx2<0, kMode>;
}

// Planes at most this many pixel-major bytes (16 channels) take the channels-innermost path: MobileNetV2's
// 7x7 and 14x14 ones at stride 1 and 2 (see RunDepthwiseQConv).
constexpr int64_t kChannelsMaxBufferBytes = 16 * 1024;

void RunChannelsInnermost(KernelContext& ctx, const QConvGeometry& g, const ChannelsLayout& L, const uint8_t* x,
                          uint8_t flip, uint8_t zx, const DepthwiseLanes& lanes, const Requant& q, uint8_t* y) {
  const int64_t P = g.P(), in_plane = g.ih * g.iw;
  const int64_t groups = (g.C + kGroup - 1) / kGroup;
  const ChannelGroupFn group_fn = !q.small_multipliers ? PickChannelGroupFor<RequantMode::kDoubleClamped>(L.npairs)
                                  : q.float_exact     ? PickChannelGroupFor<RequantMode::kFloatExact>(L.npairs)
                                                      : PickChannelGroupFor<RequantMode::kFloatShortcut>(L.npairs);
  const int64_t out_bytes = (P + 31) / 32 * 32 * kGroup;
  const uint8_t* x_end = x + g.N * g.C * in_plane;
  const std::vector<int32_t> offsets = PixelOffsets(g, L);
  ctx.ParallelFor(g.N * groups, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> t_buf, t_out;
    const int64_t buf_bytes = L.buffer_bytes() + kGroup;  // and the dump slot
    if (t_buf.size() < static_cast<size_t>(buf_bytes)) t_buf.resize(static_cast<size_t>(buf_bytes));
    if (t_out.size() < static_cast<size_t>(out_bytes)) t_out.resize(static_cast<size_t>(out_bytes));
    FillChannelsBorder(g, L, zx, t_buf.data());
    for (int64_t ng = begin; ng < end; ++ng) {
      const int64_t n = ng / groups, group = ng % groups, c0 = group * kGroup, count = std::min(kGroup, g.C - c0);
      const GroupLanes group_lanes{lanes.pairs.data() + group * L.npairs * 16, lanes.constant.data() + group * 16,
                                   lanes.mult_f.data() + group * 16, lanes.mult_d.data() + group * 16};
      TransposeIn(g, offsets.data(), x + (n * g.C + c0) * in_plane, count, x_end, flip, t_buf.data());
      group_fn(g, L, t_buf.data(), group_lanes, q, t_out.data());
      TransposeOut(t_out.data(), P, count, y + (n * g.C + c0) * P);
    }
  });
}

}  // namespace
#endif

DepthwiseLanes PackDepthwiseLanes(const ConvInt2D& g, const std::vector<int16_t>& taps, const int32_t* zw,
                                  const int32_t* constant, const double* mult) {
  DepthwiseLanes lanes;
  const int64_t K = g.kh * g.kw, groups = (g.C + 15) / 16;
  if (taps.size() != static_cast<size_t>(g.C * K)) return lanes;
  lanes.npairs = (K + 1) / 2;
  lanes.pairs.resize(static_cast<size_t>(groups * lanes.npairs * 16));
  lanes.constant.resize(static_cast<size_t>(groups * 16));
  lanes.mult_f.resize(static_cast<size_t>(groups * 16));
  lanes.mult_d.resize(static_cast<size_t>(groups * 16));
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t c0 = group * 16, last = std::min<int64_t>(16, g.C - c0) - 1;  // lanes past it repeat it
    for (int lane = 0; lane < 16; ++lane) {
      // Lanes 0-7 (lo) hold channels 0-3 and 8-11, lanes 8-15 (hi) 4-7 and 12-15.
      const int l = lane & 7;
      const int64_t c = c0 + std::min<int64_t>((lane < 8 ? 0 : 4) + (l < 4 ? l : l + 4), last);
      const size_t at = static_cast<size_t>(group * 16 + lane);
      lanes.constant[at] = constant[c];
      lanes.mult_f[at] = static_cast<float>(mult[c]);
      lanes.mult_d[at] = mult[c0 + std::min<int64_t>(lane, last)];
      const int16_t* w = taps.data() + c * K;
      for (int64_t t = 0; t < lanes.npairs; ++t) {
        const int32_t a = w[2 * t] - zw[c], b = 2 * t + 1 < K ? w[2 * t + 1] - zw[c] : 0;
        lanes.pairs[static_cast<size_t>((group * lanes.npairs + t) * 16 + lane)] =
            static_cast<int32_t>((static_cast<uint32_t>(b) << 16) | (static_cast<uint32_t>(a) & 0xFFFF));
      }
    }
  }
  return lanes;
}

bool RunDepthwiseQConv(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                       const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                       const double* mult, const DepthwiseLanes& lanes, const Requant& q, uint8_t* y) {
#ifdef NEE_QCONV_X86
  const int64_t K = g.kh * g.kw;
  if (!IgemmU8S8Available() || g.Cg != 1 || g.Mg != 1 || K > kMaxTaps || taps.empty() || g.sh < 1 || g.sw < 1 ||
      g.dh < 1 || g.dw < 1)
    return false;
  if (g.C >= kGroup && lanes.npairs == (K + 1) / 2 && !lanes.pairs.empty()) {
    const ChannelsLayout channels = PlanChannels(g);
    if (channels.buffer_bytes() <= kChannelsMaxBufferBytes) {
      RunChannelsInnermost(ctx, g, channels, x, flip, zx, lanes, q, y);
      return true;
    }
  }
  // Column stride 2 on larger planes: from bytes, without phase planes (qconv_depthwise_s2.cc).
  if (RunDepthwiseStride2(ctx, g, x, flip, zx, taps, zw, constant, mult, q, y)) return true;
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
  (void)ctx, (void)g, (void)x, (void)flip, (void)zx, (void)taps, (void)zw, (void)constant, (void)mult, (void)lanes,
      (void)q, (void)y;
  return false;
#endif
}

}  // namespace nee::cpu::qconv
