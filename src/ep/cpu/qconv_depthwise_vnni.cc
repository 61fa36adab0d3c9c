// Depthwise QLinearConv on AVX-512 VNNI + VBMI (qconv_vnni.h): sixteen output pixels of one channel per
// zmm, four taps per vpdpbusd.
//
// Where every weight minus its zero point fits a signed byte (int8 weights with a zero point of 0, as
// ONNX Runtime's quantizer writes them, always do), a channel's taps are packed once per session as signed
// byte quads, kernel row by kernel row (3x3: three quads, one zero weight each). Per channel the input plane
// is copied, zero-point padded and flipped to unsigned, as bytes (PadImageAvx512). Each quad of a run of
// sixteen output pixels is then one 64-byte load from the padded plane at the quad's first tap, one vpermb
// that deals each pixel its four tap bytes (pixel k, slot s: byte k * sw + s * dw), and one vpdpbusd:
// 3x3 is nine instructions per sixteen outputs where the AVX2 kernel (qconv_depthwise.cc) needs forty on
// int16 phase planes. The sums are exact (vpdpbusd adds four u8 x s8 products to int32 without
// saturating), and acc = constant + sum x (w - zw) with padding read as zx is the AVX2 kernel's, so the
// requantization (qconv_requant_avx512.h) gives the reference's bytes.
//
// Runs: convs on small images (a vector's whole output rows and their taps' input rows within 127 bytes:
// 14x14 and 7x7 at stride 1, 14x14 and 28x28 at stride 2) read x itself, no padded plane (PlanPlaneFree). Other stride-1 convs on narrow images
// compute "flat" runs over the padded plane (position f = oy * wp
// + ox reads f plus the tap's offset, so rows follow each other in one run, the wp - ow positions past each
// row's end computed and dropped: a 7x7 output is 4 vectors, not 7), squeezed in a register when at most 64
// positions (RunSmallFlat), else through a scratch row copied out; outputs at most 8 wide several rows to a
// vector (lane k: row k / ow, column k % ow), straight into y; the others one output row at a time, straight
// into y (masked at the row's end). Threads split the channels;
// every output is computed by the same instructions at any thread count.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/qconv_vnni.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/qconv_requant_avx512.h"
#define NEE_DW_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#endif

namespace nee::cpu::qconv {

namespace {
constexpr int64_t kMaxQuads = 64;    // quads per channel: kh * ceil(kw / 4)
constexpr int64_t kLoadBytes = 64;   // what one quad's load spans
constexpr int64_t kPlaneSlack = 2 * kLoadBytes;  // plus 4 dw and 16 sw: see RunDepthwiseQConvVnni

int64_t QuadsPerRow(const QConvGeometry& g) { return (g.kw + 3) / 4; }

// The last byte a run of sixteen pixels reads from its quad's first tap: pixel 15, slot 3.
bool FitsOneLoad(const QConvGeometry& g) { return 15 * g.sw + 3 * g.dw < kLoadBytes; }
}  // namespace

std::vector<int32_t> PackDepthwiseQuads(const QConvGeometry& g, const std::vector<int16_t>& taps,
                                        const int32_t* zw) {
  const int64_t K = g.kh * g.kw, per_row = QuadsPerRow(g);
  if (g.Cg != 1 || g.Mg != 1 || taps.size() != static_cast<size_t>(g.M * K) || !FitsOneLoad(g) ||
      g.kh * per_row > kMaxQuads)
    return {};
  std::vector<int32_t> quads(static_cast<size_t>(g.M * g.kh * per_row), 0);
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const int32_t v = taps[static_cast<size_t>(m * K + i * g.kw + j)] - zw[m];
        if (v < -128 || v > 127) return {};  // the AVX2 kernel's int16 pairs take these
        auto& quad = quads[static_cast<size_t>((m * g.kh + i) * per_row + j / 4)];
        quad = static_cast<int32_t>(static_cast<uint32_t>(quad) | ((static_cast<uint32_t>(v) & 0xFF) << (8 * (j % 4))));
      }
  return quads;
}

#if defined(__x86_64__) || defined(__i386__)
NEE_QCONV_AVX512_WARNINGS_OFF
namespace {

// What one channel's runs read and how they requantize.
struct DwChannel {
  const int32_t* quads;    // kh * per_row signed quads
  const int64_t* offsets;  // per quad: its first tap's offset in the plane
  int64_t nquads;
  __m512i deal;            // vpermb's indices: pixel k's slot s reads byte k * sw + s * dw of a load
  __m512i constant;
  float mult_f;
  double mult;
  RequantZ z;              // RequantRow16's constants
};

// The sums (constant included) of sixteen output pixels whose first tap reads `first` (pixel k: first + k * sw).
// kQuads: the quads when fixed at compile time (3: 3x3), so that their loop unrolls; 0: any.
template <int kQuads>
NEE_DW_VNNI_TARGET inline __m512i SixteenSums(const DwChannel& ch, const uint8_t* first) {
  const int64_t nquads = kQuads > 0 ? kQuads : ch.nquads;
  __m512i acc = ch.constant;
#pragma GCC unroll 4
  for (int64_t t = 0; t < nquads; ++t) {
    const __m512i bytes = _mm512_loadu_si512(first + ch.offsets[t]);
    acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(ch.deal, bytes), _mm512_set1_epi32(ch.quads[t]));
  }
  return acc;
}

// The same sixteen pixels requantized to int32.
template <int kQuads>
NEE_DW_VNNI_TARGET inline __m512i Sixteen(const DwChannel& ch, const uint8_t* first) {
  return RequantRow16(SixteenSums<kQuads>(ch, first), ch.mult_f, ch.mult, ch.z);
}

// `count` output pixels from `first` on, sixteen `step` bytes apart (16 * sw), their bytes stored at out.
template <int kQuads>
NEE_DW_VNNI_TARGET void RunPixels(const DwChannel& ch, const uint8_t* first, int64_t count, int64_t step,
                                  bool y_signed, uint8_t* out) {
  for (int64_t p = 0; p < count; p += kCols, first += step) {
    const int64_t n = std::min<int64_t>(kCols, count - p);
    StoreRow16(Sixteen<kQuads>(ch, first), y_signed, static_cast<__mmask16>((1u << n) - 1), n == kCols, out + p);
  }
}

// `rows` runs of `count` output pixels each (RunPixels), the first reading `first` and each next one `in_step`
// bytes further, stored `out_step` bytes apart: one call per channel, not one per row (a 14x14 output's rows
// are one vector each, and the call around each cost a fifth of the time).
template <int kQuads>
NEE_DW_VNNI_TARGET void RunRows(const DwChannel& ch, const uint8_t* first, int64_t rows, int64_t in_step,
                                int64_t count, int64_t step, bool y_signed, uint8_t* out, int64_t out_step) {
  const __mmask16 last = static_cast<__mmask16>((1u << ((count - 1) % kCols + 1)) - 1);
  for (int64_t r = 0; r < rows; ++r, first += in_step, out += out_step) {
    const uint8_t* from = first;
    for (int64_t p = 0; p < count; p += kCols, from += step) {
      const bool whole = count - p >= kCols;
      StoreRow16(Sixteen<kQuads>(ch, from), y_signed, whole ? __mmask16(0xFFFF) : last, whole, out + p);
    }
  }
}

// A flat run of at most 64 positions (a 7x7 output: 4 vectors): its four vectors of sums requantized together
// and narrowed by two packs (RequantRows4, as the GEMM path's tiles: the same bytes as one vector at a time),
// the dropped positions squeezed out and PackRows4's interleaving undone by one vpermb (`keep`: output byte
// i's byte in the packed vector), and the plane stored by one masked store (`store`: its oh * ow bytes).
// Vectors past the run's (images of at most 48 positions) are zero sums, never stored.
template <int kQuads>
NEE_DW_VNNI_TARGET void RunSmallFlat(const DwChannel& ch, const uint8_t* plane, int64_t vectors, __m512i keep,
                                     __mmask64 store, bool y_signed, uint8_t* out) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i s[4] = {SixteenSums<kQuads>(ch, plane),
                        vectors > 1 ? SixteenSums<kQuads>(ch, plane + kCols) : zero,
                        vectors > 2 ? SixteenSums<kQuads>(ch, plane + 2 * kCols) : zero,
                        vectors > 3 ? SixteenSums<kQuads>(ch, plane + 3 * kCols) : zero};
  const float mult_f[4] = {ch.mult_f, ch.mult_f, ch.mult_f, ch.mult_f};
  const double mult[4] = {ch.mult, ch.mult, ch.mult, ch.mult};
  const __m512i bytes = RequantRows4(s, mult_f, mult, ch.z, y_signed);
  _mm512_mask_storeu_epi8(out, store, _mm512_permutexvar_epi8(keep, bytes));
}

// The flat run's rows (wp bytes apart, ow of each kept) into y's plane.
NEE_DW_VNNI_TARGET void CopyFlatRows(const uint8_t* flat, int64_t wp, int64_t oh, int64_t ow, uint8_t* y) {
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t k = 0; k < ow; k += kLoadBytes) {
      const int64_t n = std::min(kLoadBytes, ow - k);
      const __mmask64 m = n == kLoadBytes ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
      _mm512_mask_storeu_epi8(y + oy * ow + k, m, _mm512_maskz_loadu_epi8(m, flat + oy * wp + k));
    }
}

// One channel's padded plane, rows of at most 64 bytes: each row's bytes by one masked load from x (the
// zero point, flipped back and forth, in the other lanes), flipped, and one whole 64-byte store, whose tail
// the next row's store overwrites (the last one's lands in the plane's slack). PadImageAvx512's masked
// stores measured slower here (a 7x7 channel: 9 of them).
NEE_DW_VNNI_TARGET void PadNarrowPlane(const QConvGeometry& g, const uint8_t* x, __m512i flip, __m512i fill,
                                       uint8_t* dst) {
  const __mmask64 data = (g.iw == 64 ? ~__mmask64{0} : (__mmask64{1} << g.iw) - 1) << g.pw;
  const __m512i fill_flipped = _mm512_xor_si512(fill, flip);
  for (int64_t y = 0; y < g.hp; ++y) {
    const int64_t iy = y - g.ph;
    __m512i row = fill;
    if (iy >= 0 && iy < g.ih) row = _mm512_xor_si512(_mm512_mask_loadu_epi8(fill_flipped, data, x + iy * g.iw - g.pw), flip);
    _mm512_storeu_si512(dst + y * g.wp, row);
  }
}

// Byte i (i < count <= 64) of a vpermb index: index(i), at most 63.
NEE_DW_VNNI_TARGET __m512i ByteIndices(int64_t count, const std::function<int64_t(int64_t)>& index) {
  alignas(64) uint8_t idx[kLoadBytes] = {};
  for (int64_t i = 0; i < count; ++i) idx[i] = static_cast<uint8_t>(std::min<int64_t>(index(i), 63));
  return _mm512_load_si512(idx);
}

// Convs on small images without the padded plane: a vector of sixteen lanes covers `group` whole output rows
// (group * ow <= 16), whose taps lie in (group - 1) * sh + (kh - 1) * dh + 1 consecutive input rows of fewer
// than 128 bytes, read straight from x by two masked loads (the bytes outside the image, and past the rows,
// the zero point); per quad one vpermt2b deals each lane its four tap bytes, those of taps outside the image
// from byte 127 (always the zero point). Padding the plane first (16 stores a 14x14 channel) and reading it
// back measured as most of such a channel's time.
constexpr int64_t kPairBytes = 2 * kLoadBytes;

struct PlaneFreeRows {
  int64_t group = 0, vectors = 0;  // output rows a vector, vectors a channel
  std::vector<std::array<uint8_t, kLoadBytes>> index;  // per quad: lane byte b's byte of the two loads
  std::vector<__mmask64> load;     // per vector, two each: the loads' bytes in the image
  std::vector<int64_t> first_row;  // per vector: the loads' first input row (may be negative)
};

// Empty (group 0) where the path does not apply.
PlaneFreeRows PlanPlaneFree(const QConvGeometry& g, int64_t nquads) {
  PlaneFreeRows plan;
  if (g.ow > kCols || g.iw * ((g.kh - 1) * g.dh + 1) >= kPairBytes) return plan;
  const int64_t per_row = QuadsPerRow(g), taps_rows = (g.kh - 1) * g.dh;
  int64_t group = kCols / g.ow;
  while (group > 0 && ((group - 1) * g.sh + taps_rows + 1) * g.iw >= kPairBytes) --group;
  if (group == 0) return plan;
  const int64_t span = (group - 1) * g.sh + taps_rows + 1;  // input rows the loads cover
  plan.group = group, plan.vectors = (g.oh + group - 1) / group;
  for (int64_t t = 0; t < nquads; ++t) {
    std::array<uint8_t, kLoadBytes> idx{};
    for (int64_t b = 0; b < kLoadBytes; ++b) {
      // Lane byte b: pixel b / 4 (output row k / ow of the vector, column k % ow), tap slot b % 4.
      const int64_t k = b / 4, i = t / per_row, j = 4 * (t % per_row) + b % 4;
      const int64_t col = (k % g.ow) * g.sw + j * g.dw - g.pw, row = (k / g.ow) * g.sh + i * g.dh;
      const bool inside = k < group * g.ow && j < g.kw && col >= 0 && col < g.iw;
      idx[static_cast<size_t>(b)] = static_cast<uint8_t>(inside ? row * g.iw + col : kPairBytes - 1);
    }
    plan.index.push_back(idx);
  }
  auto bytes_mask = [](int64_t from, int64_t to) {  // bytes [from, to) of a 64-byte load, clipped
    from = std::clamp<int64_t>(from, 0, kLoadBytes), to = std::clamp<int64_t>(to, 0, kLoadBytes);
    const auto below = [](int64_t n) { return n >= kLoadBytes ? ~__mmask64{0} : (__mmask64{1} << n) - 1; };
    return from >= to ? __mmask64{0} : below(to) & ~below(from);
  };
  for (int64_t v = 0; v < plan.vectors; ++v) {
    const int64_t first = v * group * g.sh - g.ph;  // the loads' first input row
    const int64_t lo = std::max<int64_t>(0, -first) * g.iw, hi = std::min(span, g.ih - first) * g.iw;
    plan.first_row.push_back(first);
    plan.load.push_back(bytes_mask(lo, hi));
    plan.load.push_back(bytes_mask(lo - kLoadBytes, hi - kLoadBytes));
  }
  return plan;
}

// One channel (x: its input plane) by PlanPlaneFree's vectors; pad: the (flipped) zero point. kQuads as
// Sixteen's (3: 3x3, its loop unrolled).
template <int kQuads>
NEE_DW_VNNI_TARGET void RunPlaneFree(const DwChannel& ch, const PlaneFreeRows& plan, const QConvGeometry& g,
                                     const uint8_t* x, __m512i flip, __m512i pad, bool y_signed, uint8_t* out) {
  const int64_t nquads = kQuads > 0 ? kQuads : ch.nquads;
  const __m512i pad_flipped = _mm512_xor_si512(pad, flip);  // flipped back by the xor after the loads
  for (int64_t v = 0; v < plan.vectors; ++v) {
    // The masked loads read only the image's bytes; the addresses of rows above it are never dereferenced.
    const auto from = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(x) + plan.first_row[v] * g.iw);
    const __m512i a = _mm512_xor_si512(_mm512_mask_loadu_epi8(pad_flipped, plan.load[2 * v], from), flip);
    const __m512i b =
        _mm512_xor_si512(_mm512_mask_loadu_epi8(pad_flipped, plan.load[2 * v + 1], from + kLoadBytes), flip);
    __m512i acc = ch.constant;
#pragma GCC unroll 4
    for (int64_t t = 0; t < nquads; ++t) {
      const __m512i index = _mm512_loadu_si512(plan.index[static_cast<size_t>(t)].data());
      acc = _mm512_dpbusd_epi32(acc, _mm512_permutex2var_epi8(a, index, b), _mm512_set1_epi32(ch.quads[t]));
    }
    const int64_t count = std::min(plan.group, g.oh - v * plan.group) * g.ow;
    StoreRow16(RequantRow16(acc, ch.mult_f, ch.mult, ch.z), y_signed,
               static_cast<__mmask16>((1u << count) - 1), count == kCols, out + v * plan.group * g.ow);
  }
}

}  // namespace

NEE_DW_VNNI_TARGET void RunDepthwiseQConvVnni(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x,
                                              uint8_t flip, uint8_t zx, const std::vector<int32_t>& quads,
                                              const Requant& q, uint8_t* y) {
  const int64_t per_row = QuadsPerRow(g), nquads = g.kh * per_row, P = g.P();
  int64_t offsets[kMaxQuads];
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < per_row; ++j) offsets[i * per_row + j] = i * g.dh * g.wp + 4 * j * g.dw;
  const __m512i deal = ByteIndices(kLoadBytes, [&](int64_t b) { return (b / 4) * g.sw + (b % 4) * g.dw; });
  // Flat runs where they take fewer vectors than rows do (stride 1 only: positions then step by one,
  // across row ends).
  const int64_t flat_count = (g.oh - 1) * g.wp + g.ow, row_vectors = (g.ow + kCols - 1) / kCols;
  const int64_t flat_vectors = (flat_count + kCols - 1) / kCols;
  const bool flat = g.sh == 1 && g.sw == 1 && flat_vectors < g.oh * row_vectors;
  const bool small_flat = flat && flat_count <= kLoadBytes;
  // Row groups: outputs at most 8 wide share a vector among `group` consecutive output rows (lane k: row
  // k / ow, column k % ow; the rows lie one after another in y too), where every lane's taps lie within one
  // load: a 14x14 stride-2 input's 7x7 output is 4 vectors, not 7.
  int64_t group = g.ow <= kCols / 2 ? kCols / g.ow : 1;
  while (group > 1 && (group - 1) * g.sh * g.wp + (g.ow - 1) * g.sw + 3 * g.dw >= kLoadBytes) --group;
  const bool grouped = !small_flat && group > 1 && (!flat || (g.oh + group - 1) / group <= flat_vectors);
  const __m512i group_deal = ByteIndices(grouped ? kLoadBytes : 0, [&](int64_t b) {
    const int64_t k = b / 4;
    return k < group * g.ow ? (k / g.ow) * g.sh * g.wp + (k % g.ow) * g.sw + (b % 4) * g.dw : 0;
  });
  // Flat position f is lane f % 16 of vector f / 16, which PackRows4 leaves at byte 16 * (lane / 4) + 4 * vector
  // + lane % 4.
  const __m512i keep = ByteIndices(small_flat ? P : 0, [&](int64_t i) {
    const int64_t f = (i / g.ow) * g.wp + i % g.ow, lane = f % kCols;
    return 16 * (lane / 4) + 4 * (f / kCols) + lane % 4;
  });
  const __mmask64 store = P >= kLoadBytes ? ~__mmask64{0} : (__mmask64{1} << P) - 1;
  // Whole-vector reads run up to 16 pixels and one load past the last tap (see the header comment).
  const int64_t plane_bytes = g.hp * g.wp + kPlaneSlack + 4 * g.dw + kCols * g.sw;
  const int64_t flat_bytes = flat_vectors * kCols;
  const bool pad_narrow = g.wp <= kLoadBytes;
  const auto run_pixels = nquads == 3 ? RunPixels<3> : RunPixels<0>;
  const auto run_rows = nquads == 3 ? RunRows<3> : RunRows<0>;
  const auto run_small_flat = nquads == 3 ? RunSmallFlat<3> : RunSmallFlat<0>;
  const __m512i flip_bytes = _mm512_set1_epi8(static_cast<char>(flip)), fill = _mm512_set1_epi8(static_cast<char>(zx));
  const RequantZ z = MakeRequantZ(q.yzp, q.float_exact);
  // Plane-free where it takes no more vectors than the flat run or the row groups.
  const PlaneFreeRows plane_free = PlanPlaneFree(g, nquads);
  const int64_t current = small_flat || flat ? flat_vectors : grouped ? (g.oh + group - 1) / group : g.oh * row_vectors;
  const bool free_of_plane = plane_free.group > 0 && plane_free.vectors <= current;
  if (free_of_plane) {
    const auto run_plane_free = nquads == 3 ? RunPlaneFree<3> : RunPlaneFree<0>;
    ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) NEE_DW_VNNI_TARGET {
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t c = nc % g.C;
        const DwChannel ch{quads.data() + c * nquads, offsets, nquads, deal, _mm512_set1_epi32(q.constant[c]),
                           q.mult_f[c], q.mult[c], z};
        run_plane_free(ch, plane_free, g, x + nc * g.ih * g.iw, flip_bytes, fill, q.y_signed, y + nc * P);
      }
    });
    return;
  }
  auto pad = [&](int64_t nc, uint8_t* plane) NEE_DW_VNNI_TARGET {
    if (pad_narrow)
      PadNarrowPlane(g, x + nc * g.ih * g.iw, flip_bytes, fill, plane);
    else
      PadImageAvx512(g, x + nc * g.ih * g.iw, flip, zx, plane);
  };
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) NEE_DW_VNNI_TARGET {
    // Two planes: the next channel's padded while this one's is read, so that its stores are written when
    // its loads come (a load spanning stores still in flight waits for them to be written).
    thread_local std::vector<uint8_t> t_plane, t_flat;
    if (t_plane.size() < static_cast<size_t>(2 * plane_bytes)) t_plane.resize(static_cast<size_t>(2 * plane_bytes));
    if (flat && t_flat.size() < static_cast<size_t>(flat_bytes)) t_flat.resize(static_cast<size_t>(flat_bytes));
    if (begin < end) pad(begin, t_plane.data());
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t c = nc % g.C;
      uint8_t* plane = t_plane.data() + (nc - begin) % 2 * plane_bytes;
      if (nc + 1 < end) pad(nc + 1, t_plane.data() + (nc + 1 - begin) % 2 * plane_bytes);
      const DwChannel ch{quads.data() + c * nquads, offsets, nquads, grouped ? group_deal : deal, _mm512_set1_epi32(q.constant[c]),
                         q.mult_f[c], q.mult[c], z};
      uint8_t* y_plane = y + nc * P;
      if (small_flat) {
        run_small_flat(ch, plane, flat_vectors, keep, store, q.y_signed, y_plane);
      } else if (grouped) {
        for (int64_t oy = 0; oy < g.oh; oy += group)
          run_pixels(ch, plane + oy * g.sh * g.wp, std::min(group, g.oh - oy) * g.ow, 0, q.y_signed, y_plane + oy * g.ow);
      } else if (flat) {
        run_pixels(ch, plane, flat_count, kCols, q.y_signed, t_flat.data());
        CopyFlatRows(t_flat.data(), g.wp, g.oh, g.ow, y_plane);
      } else {
        run_rows(ch, plane, g.oh, g.sh * g.wp, g.ow, kCols * g.sw, q.y_signed, y_plane, g.ow);
      }
    }
  });
}
NEE_QCONV_AVX512_WARNINGS_ON
#endif

}  // namespace nee::cpu::qconv
