// Depthwise 2-D convolution, sixteen channels per AVX-512 vector (eight per
// AVX2 vector: the same steps at half the width).
//
// The plane-at-a-time kernel in depthwise_padded.cc vectorizes along output rows,
// which wastes most of each vector on the 7- and 14-wide planes of mobile
// networks and pays per-plane overheads 960 times per layer. Here a task
// takes a block of 16 channels and a strip of output rows:
//  1. the input rows the strip reads are transposed into a scratch buffer in
//     "pixel-major" order (for each padded pixel, its 16 channels side by
//     side), zeros in the padding, so every tap is a plain vector load;
//  2. each output pixel is bias + sum over taps of weights[tap] * input, one
//     vector FMA per tap for all 16 channels, eight pixels at a time;
//  3. each finished output row is transposed back to the 16 NCHW rows. The
//     FusedConv activation is applied in registers before that when there
//     is no residual; otherwise the epilogue
//     (residual, activation) runs over the finished strip.
// The 16x16 transposes are in registers. Blocks past the last channel use
// zero weights and are never stored.
//
// Every output is bias + taps in (kh, kw) order, computed by exactly one
// task, so results do not depend on the thread count.
#include "ep/cpu/depthwise_blocked.h"

#include <algorithm>
#include <vector>

#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/transpose16_avx512.h"
#define NEE_DEPTHWISE_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kLanes = 16;
// Scratch per task: the strip's transposed input rows stay within about
// this many floats (64 KiB: L1 and a bit of L2), at least one output row.
constexpr int64_t kStripFloats = 16 * 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What one task works on.
struct Strip {
  int64_t n, c0, channels;  // image, first channel, channels in the block (<= 16)
  int64_t oh0, oh1;         // output rows [oh0, oh1)
};

// Padded width: the columns the taps of all output columns reach.
int64_t PaddedWidth(const Depthwise2D& g) { return (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1; }

int64_t StripRows(const Depthwise2D& g, int64_t lanes) {
  const int64_t row_floats = PaddedWidth(g) * lanes * g.sh;
  return std::clamp<int64_t>(kStripFloats / std::max<int64_t>(row_floats, 1), 1, g.OH);
}

#ifdef NEE_DEPTHWISE_X86
#define NEE_AVX512 __attribute__((target("avx512f")))

NEE_AVX512 inline __mmask16 FirstLanes(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

// dst[(i * 16) + lane] = src_row(lane)[i] for i in [0, count): `channels`
// source rows (the rest zero) turned into `count` pixel vectors.
NEE_AVX512 void RowsToPixels(const float* const* src_rows, int64_t channels, int64_t count, float* dst) {
  for (int64_t j = 0; j < count; j += kLanes) {
    const int64_t k = std::min(kLanes, count - j);
    const __mmask16 mask = FirstLanes(k);
    __m512 r[16];
    for (int64_t l = 0; l < kLanes; ++l)
      r[l] = l < channels ? _mm512_maskz_loadu_ps(mask, src_rows[l] + j) : _mm512_setzero_ps();
    Transpose16(r);
    for (int64_t i = 0; i < k; ++i) _mm512_storeu_ps(dst + (j + i) * kLanes, r[i]);
  }
}

// The inverse: dst_row(lane)[i] = src[(i * 16) + lane] for the first `channels` lanes.
NEE_AVX512 void PixelsToRows(const float* src, int64_t count, float* const* dst_rows, int64_t channels) {
  for (int64_t j = 0; j < count; j += kLanes) {
    const int64_t k = std::min(kLanes, count - j);
    const __mmask16 mask = FirstLanes(k);
    __m512 r[16];
    for (int64_t i = 0; i < kLanes; ++i) r[i] = i < k ? _mm512_loadu_ps(src + (j + i) * kLanes) : _mm512_setzero_ps();
    Transpose16(r);
    for (int64_t l = 0; l < channels; ++l) _mm512_mask_storeu_ps(dst_rows[l] + j, mask, r[l]);
  }
}

// Output pixels [ow, ow + kPixels) of one row: `rows[kh]` is the transposed
// padded input row tap kh reads, `wt` the weights tap-major (16 per tap).
template <FusedActivation::Kind K, int kPixels>
NEE_AVX512 inline void PixelBlock(const Depthwise2D& g, const float* const* rows, const float* wt, __m512 bias,
                                  const FusedActivation& act, int64_t ow, float* out) {
  // (Every loop over the accumulators is unrolled, so they stay in registers.)
  __m512 acc[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) acc[p] = bias;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const float* row = rows[kh] + ow * g.sw * kLanes;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const __m512 wv = _mm512_loadu_ps(wt + (kh * g.KW + kw) * kLanes);
      const float* tap = row + kw * g.dw * kLanes;
#pragma GCC unroll 8
      for (int p = 0; p < kPixels; ++p)
        acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(tap + p * g.sw * kLanes), wv, acc[p]);
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) _mm512_storeu_ps(out + (ow + p) * kLanes, Activate16<K>(act, acc[p]));
}

// One output row into `out` (pixel-major), with activation K applied (kNone
// when the epilogue runs later or there is none).
template <FusedActivation::Kind K>
NEE_AVX512 void OutputRow(const Depthwise2D& g, const float* const* rows, const float* wt, const float* bias16,
                          const FusedActivation& act, float* out) {
  const __m512 bias = _mm512_loadu_ps(bias16);
  int64_t ow = 0;
  for (; ow + 8 <= g.OW; ow += 8) PixelBlock<K, 8>(g, rows, wt, bias, act, ow, out);
  for (; ow + 2 <= g.OW; ow += 2) PixelBlock<K, 2>(g, rows, wt, bias, act, ow, out);
  for (; ow < g.OW; ++ow) PixelBlock<K, 1>(g, rows, wt, bias, act, ow, out);
}

using OutputRowFn = void (*)(const Depthwise2D&, const float* const*, const float*, const float*,
                             const FusedActivation&, float*);

// The activation applied in registers, or null when it must run after the
// strip (a residual to add first).
OutputRowFn InRegisterActivation(const FusedActivation& act, bool has_residual) {
  using Kind = FusedActivation::Kind;
  if (has_residual) return act.kind == Kind::kNone ? OutputRow<Kind::kNone> : nullptr;
  return ForActivation16(
      act.kind, [](auto k) -> OutputRowFn { return OutputRow<decltype(k)::value>; }, OutputRowFn{nullptr});
}

// Per-thread scratch, grown as needed and kept between calls.
float* TaskScratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// One instruction set's transposes between channel rows and pixel vectors
// of `lanes` channels (RowsToPixels / PixelsToRows and their AVX2 forms).
struct Transposes {
  int64_t lanes;
  void (*rows_to_pixels)(const float* const* src_rows, int64_t channels, int64_t count, float* dst);
  void (*pixels_to_rows)(const float* src, int64_t count, float* const* dst_rows, int64_t channels);
};

// Transposes the input rows the strip reads into `in` (row r: padded row
// oh0 * sh + r), with zeros for padding.
void FillInput(const Depthwise2D& g, const Strip& s, const float* x, int64_t rows, int64_t wp, const Transposes& t,
               float* in) {
  const int64_t lanes = t.lanes;
  const float* planes[kLanes];
  for (int64_t l = 0; l < s.channels; ++l) planes[l] = x + (s.n * g.C + s.c0 + l) * g.H * g.W;
  // Input columns inside the padded width: [0, cols) at padded column pw.
  const int64_t cols = std::clamp<int64_t>(wp - g.pw, 0, g.W);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = in + r * wp * lanes;
    const int64_t ih = s.oh0 * g.sh + r - g.ph;
    if (ih < 0 || ih >= g.H || cols == 0) {
      std::fill(dst, dst + wp * lanes, 0.f);
      continue;
    }
    const int64_t left = std::min(g.pw, wp);
    std::fill(dst, dst + left * lanes, 0.f);
    const float* src[kLanes];
    for (int64_t l = 0; l < s.channels; ++l) src[l] = planes[l] + ih * g.W;
    t.rows_to_pixels(src, s.channels, cols, dst + left * lanes);
    std::fill(dst + (left + cols) * lanes, dst + wp * lanes, 0.f);
  }
}

void RunStrip(const Depthwise2D& g, const Strip& s, const float* x, const float* wt, const float* bias_block,
              OutputRowFn output_row, const FusedActivation& act, const Transposes& t, float* y) {
  const int64_t lanes = t.lanes, wp = PaddedWidth(g);
  const int64_t in_rows = (s.oh1 - 1 - s.oh0) * g.sh + (g.KH - 1) * g.dh + 1;
  const int64_t out_width = CeilDiv(g.OW, lanes) * lanes;
  float* in = TaskScratch(static_cast<size_t>((in_rows * wp + out_width) * lanes));
  float* out = in + in_rows * wp * lanes;
  FillInput(g, s, x, in_rows, wp, t, in);
  std::vector<const float*> rows(static_cast<size_t>(g.KH));
  float* dst[kLanes];
  for (int64_t oh = s.oh0; oh < s.oh1; ++oh) {
    for (int64_t kh = 0; kh < g.KH; ++kh) rows[kh] = in + ((oh - s.oh0) * g.sh + kh * g.dh) * wp * lanes;
    output_row(g, rows.data(), wt, bias_block, act, out);
    for (int64_t l = 0; l < s.channels; ++l) dst[l] = y + ((s.n * g.C + s.c0 + l) * g.OH + oh) * g.OW;
    t.pixels_to_rows(out, g.OW, dst, s.channels);
  }
}

// ---- AVX2: eight channels per vector ------------------------------------------

#define NEE_AVX2 __attribute__((target("avx2,fma")))
constexpr int64_t kLanes8 = 8;

// r[i] becomes column i of the 8x8 matrix whose rows were r[0..7].
__attribute__((target("avx2,fma"), always_inline)) inline void Transpose8(__m256 r[8]) {
  __m256 a[8], b[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + j]: in each 128-bit half H, element 4H + j of rows 4i..4i+3.
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    b[4 * i] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0x44);
    b[4 * i + 1] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0xEE);
    b[4 * i + 2] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0x44);
    b[4 * i + 3] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x31);
  }
}

NEE_AVX2 inline __m256i FirstLanes8(int64_t k) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

NEE_AVX2 void RowsToPixels8(const float* const* src_rows, int64_t channels, int64_t count, float* dst) {
  for (int64_t j = 0; j < count; j += kLanes8) {
    const int64_t k = std::min(kLanes8, count - j);
    const __m256i mask = FirstLanes8(k);
    __m256 r[8];
    for (int64_t l = 0; l < kLanes8; ++l)
      r[l] = l >= channels ? _mm256_setzero_ps()
             : k == kLanes8 ? _mm256_loadu_ps(src_rows[l] + j)
                            : _mm256_maskload_ps(src_rows[l] + j, mask);
    Transpose8(r);
    for (int64_t i = 0; i < k; ++i) _mm256_storeu_ps(dst + (j + i) * kLanes8, r[i]);
  }
}

// A partial last vector goes out through a small buffer: AVX2's masked
// stores are slow on some CPUs.
NEE_AVX2 void PixelsToRows8(const float* src, int64_t count, float* const* dst_rows, int64_t channels) {
  for (int64_t j = 0; j < count; j += kLanes8) {
    const int64_t k = std::min(kLanes8, count - j);
    __m256 r[8];
    for (int64_t i = 0; i < kLanes8; ++i) r[i] = i < k ? _mm256_loadu_ps(src + (j + i) * kLanes8) : _mm256_setzero_ps();
    Transpose8(r);
    for (int64_t l = 0; l < channels; ++l) {
      if (k == kLanes8) {
        _mm256_storeu_ps(dst_rows[l] + j, r[l]);
      } else {
        alignas(32) float part[8];
        _mm256_store_ps(part, r[l]);
        std::copy(part, part + k, dst_rows[l] + j);
      }
    }
  }
}

template <FusedActivation::Kind K, int kPixels>
NEE_AVX2 inline void PixelBlock8(const Depthwise2D& g, const float* const* rows, const float* wt, __m256 bias,
                                 const FusedActivation& act, int64_t ow, float* out) {
  __m256 acc[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) acc[p] = bias;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const float* row = rows[kh] + ow * g.sw * kLanes8;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const __m256 wv = _mm256_loadu_ps(wt + (kh * g.KW + kw) * kLanes8);
      const float* tap = row + kw * g.dw * kLanes8;
#pragma GCC unroll 8
      for (int p = 0; p < kPixels; ++p)
        acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(tap + p * g.sw * kLanes8), wv, acc[p]);
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) _mm256_storeu_ps(out + (ow + p) * kLanes8, Activate8<K>(act, acc[p]));
}

template <FusedActivation::Kind K>
NEE_AVX2 void OutputRow8(const Depthwise2D& g, const float* const* rows, const float* wt, const float* bias8,
                         const FusedActivation& act, float* out) {
  const __m256 bias = _mm256_loadu_ps(bias8);
  int64_t ow = 0;
  for (; ow + 8 <= g.OW; ow += 8) PixelBlock8<K, 8>(g, rows, wt, bias, act, ow, out);
  for (; ow + 2 <= g.OW; ow += 2) PixelBlock8<K, 2>(g, rows, wt, bias, act, ow, out);
  for (; ow < g.OW; ++ow) PixelBlock8<K, 1>(g, rows, wt, bias, act, ow, out);
}

bool UseAvx512() { return SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced(); }

// What one ISA brings: its transposes, and its row kernel with the
// activation in registers (null: the epilogue runs after the strip).
struct BlockedKernels {
  Transposes transposes;
  OutputRowFn plain_row, in_register_row;
};

BlockedKernels KernelsFor(const FusedActivation& act, bool has_residual) {
  using Kind = FusedActivation::Kind;
  if (UseAvx512())
    return {{kLanes, RowsToPixels, PixelsToRows}, OutputRow<Kind::kNone>,
            has_residual ? nullptr : InRegisterActivation(act, false)};
  return {{kLanes8, RowsToPixels8, PixelsToRows8}, OutputRow8<Kind::kNone>,
          has_residual ? nullptr
                       : ForActivation8(act.kind, [](auto k) -> OutputRowFn { return OutputRow8<decltype(k)::value>; })};
}
#endif  // NEE_DEPTHWISE_X86

// The weights of channels [c0, c0 + lanes) tap-major (`lanes` per tap) and
// their bias, zero past the last channel.
void BlockWeights(const Depthwise2D& g, const float* w, const float* bias, int64_t c0, int64_t channels,
                  int64_t lanes, std::vector<float>& wt, float* bias_block) {
  const int64_t taps = g.KH * g.KW;
  wt.assign(static_cast<size_t>(taps * lanes), 0.f);
  for (int64_t l = 0; l < lanes; ++l) bias_block[l] = l < channels && bias ? bias[c0 + l] : 0.f;
  for (int64_t l = 0; l < channels; ++l)
    for (int64_t t = 0; t < taps; ++t) wt[t * lanes + l] = w[(c0 + l) * taps + t];
}

}  // namespace

bool DepthwiseBlockedAvailable() {
#ifdef NEE_DEPTHWISE_X86
  const SgemmIsa isa = SgemmActiveIsa();
  return (isa == SgemmIsa::kAvx512 || isa == SgemmIsa::kAvx2) && !SgemmPortableForced();
#else
  return false;
#endif
}

void DepthwiseBlocked(KernelContext& ctx, const Depthwise2D& g, const float* x, const float* w, const float* bias,
                      const ConvEpilogue* epilogue, const float* z, float* y) {
#ifdef NEE_DEPTHWISE_X86
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const BlockedKernels kernels = KernelsFor(act, z != nullptr);
  const int64_t lanes = kernels.transposes.lanes;
  const int64_t blocks = CeilDiv(g.C, lanes), strip_rows = StripRows(g, lanes), strips = CeilDiv(g.OH, strip_rows);
  // Without an in-register activation, rows are computed plainly and the
  // epilogue (residual, activation) runs over each strip.
  const bool finish_after = !kernels.in_register_row;
  const OutputRowFn output_row = finish_after ? kernels.plain_row : kernels.in_register_row;
  ParallelTasks(ctx, g.N * blocks * strips, [&](int64_t t) {
    const int64_t block = t / strips % blocks;
    Strip s{t / strips / blocks, block * lanes, 0, t % strips * strip_rows, 0};
    s.channels = std::min(lanes, g.C - s.c0);
    s.oh1 = std::min(g.OH, s.oh0 + strip_rows);
    thread_local std::vector<float> wt;
    alignas(64) float bias_block[kLanes];
    BlockWeights(g, w, bias, s.c0, s.channels, lanes, wt, bias_block);
    RunStrip(g, s, x, wt.data(), bias_block, output_row, act, kernels.transposes, y);
    if (!finish_after) return;
    // The strip's rows of each channel are contiguous and still in cache.
    const int64_t offset = ((s.n * g.C + s.c0) * g.OH + s.oh0) * g.OW, plane = g.OH * g.OW;
    BiasResidualActivate(act, nullptr, z ? z + offset : nullptr, plane, y + offset, plane, s.channels,
                         (s.oh1 - s.oh0) * g.OW);
  });
#else
  (void)ctx, (void)g, (void)x, (void)w, (void)bias, (void)epilogue, (void)z, (void)y;
#endif
}

}  // namespace nee::cpu
