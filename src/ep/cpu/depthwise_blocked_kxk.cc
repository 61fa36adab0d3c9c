// BlockedConv's depthwise convolutions with square kernels other than 3x3
// (MobileNetV3's and EfficientNet's 5x5, 7x7), stride 1 or 2, on AVX2 with
// FMA: one output pixel of a channel block is one vector of eight channels.
//
// Why: without them these convs stayed NCHW, and a MobileNetV3 left and
// re-entered the blocked layout around each of them (a FromBlocked and a
// ToBlocked per conv), where ONNX Runtime runs every depthwise conv on its
// NCHWc layout; in NCHW nee's 5x5 ones ran 1.6-4x ONNX Runtime's time.
//
// A strip of output rows first copies the input rows it reads into a
// zero-padded buffer; then every output, border or not, is bias + its KS x KS
// taps in (kh, kw) order (a tap in the padding adds 0 * w), computed eight
// pixels of a row at a time, each tap's weight vector loaded once for the
// eight. So results do not depend on the thread count or on how a strip of
// rows is cut.
#include "ep/cpu/depthwise_blocked_kxk.h"

#include <algorithm>
#include <vector>

#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#define NEE_DW_KXK_X86 1
#endif

namespace nee::cpu {

#ifdef NEE_DW_KXK_X86
namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;  // 8 floats: one pixel of a block

#define NEE_KXK_TARGET __attribute__((target("avx2,fma")))

template <Kind K>
NEE_KXK_TARGET __attribute__((always_inline)) inline void Store(const FusedActivation& act, float* y, const float* z,
                                                                 int64_t at, __m256 v) {
  if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + at));
  _mm256_storeu_ps(y + at, Activate8<K>(act, v));
}

// R outputs of one row, from the output at `at` on: bias + the taps of
// kernel rows [0, KS) in (kh, kw) order, the first output's tap (kh, kw) at
// x + kh * row_step + kw * 8 and the next output's S pixels further. R
// accumulators, each tap's weight vector loaded once for all of them.
template <int KS, int S, int R, Kind K>
NEE_KXK_TARGET void Tile(const float* x, int64_t row_step, const float* w, __m256 b, const FusedActivation& act,
                         float* y, const float* z, int64_t at) {
  __m256 acc[R];
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) acc[j] = b;
  for (int kh = 0; kh < KS; ++kh) {
    const float* r = x + kh * row_step;
    const float* wk = w + kh * KS * kB;
#pragma GCC unroll 7
    for (int kw = 0; kw < KS; ++kw) {
      const __m256 wv = _mm256_loadu_ps(wk + kw * kB);
#pragma GCC unroll 8
      for (int j = 0; j < R; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(r + (kw + j * S) * kB), wv, acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) Store<K>(act, y, z, at + j * kB, acc[j]);
}

constexpr int kTileWidth = 8;  // eight accumulators: two FMA pipes' latency
using TileFn = void (*)(const float*, int64_t, const float*, __m256, const FusedActivation&, float*, const float*,
                        int64_t);
template <int KS, int S, Kind K>
constexpr TileFn kTiles[kTileWidth] = {Tile<KS, S, 1, K>, Tile<KS, S, 2, K>, Tile<KS, S, 3, K>, Tile<KS, S, 4, K>,
                                       Tile<KS, S, 5, K>, Tile<KS, S, 6, K>, Tile<KS, S, 7, K>, Tile<KS, S, 8, K>};

// Output rows [oh0, oh1) of one channel block (see BlockedDepthwiseRowsFn):
// x [H][W][8], w the taps' weights [KS * KS][8], y [OH][OW][8]. The input
// rows the strip reads are first copied into a zero-padded buffer, as wide
// as the output rows' windows reach, so that every output is a plain tile
// (with a 5x5 kernel and pads of 2, 9 of a 7x7 plane's 49 pixels have all
// their taps inside, 100 of a 14x14 plane's 196; checking each tap of the
// others, one pixel at a time, took most of the time).
template <int KS, int S, Kind K>
NEE_KXK_TARGET void Rows(const BlockedConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
                         const float* z, int64_t oh0, int64_t oh1) {
  if (oh1 <= oh0) return;
  const int64_t H = g.H, W = g.W, OW = g.OW;
  const int64_t width = (OW - 1) * S + KS, ih_begin = oh0 * S - g.pt, rows = (oh1 - 1 - oh0) * S + KS;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(rows * width * kB));
  float* padded = buffer.data();
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ih = ih_begin + r;
    float* dst = padded + r * width * kB;
    const bool inside_row = ih >= 0 && ih < H;
    for (int64_t c = 0; c < width; ++c) {
      const int64_t iw = c - g.pl;
      const bool inside = inside_row && iw >= 0 && iw < W;
      _mm256_storeu_ps(dst + c * kB, inside ? _mm256_loadu_ps(x + (ih * W + iw) * kB) : zero);
    }
  }
  const __m256 b = _mm256_loadu_ps(bias);
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const float* row = padded + (oh - oh0) * S * width * kB;
    for (int64_t ow = 0, n; ow < OW; ow += n) {
      n = std::min<int64_t>(kTileWidth, OW - ow);
      kTiles<KS, S, K>[n - 1](row + ow * S * kB, width * kB, w, b, g.act, y, z, (oh * OW + ow) * kB);
    }
  }
}

// The activations finished in registers as the rows are stored: the cheap
// ones; the others leave the sums to the shared finishing pass.
bool FinishesInRegisters(Kind kind) {
  return kind == Kind::kNone || kind == Kind::kRelu || kind == Kind::kClip || kind == Kind::kHardSwish ||
         kind == Kind::kHardSigmoid || kind == Kind::kLeakyRelu;
}

template <int KS, Kind K>
BlockedDepthwiseRowsFn RowsOf(int64_t stride) {
  return stride == 1 ? Rows<KS, 1, K> : Rows<KS, 2, K>;
}

template <Kind K>
BlockedDepthwiseRowsFn RowsFor(int64_t ks, int64_t stride) {
  return ks == 5 ? RowsOf<5, K>(stride) : RowsOf<7, K>(stride);
}

}  // namespace

BlockedDepthwiseRows BlockedDepthwiseKxKFor(const BlockedConvGeometry& g) {
  if (!BlockedDepthwiseKxKShape(g) || SgemmActiveIsa() < SgemmIsa::kAvx2 || SgemmPortableForced()) return {};
  if (!FinishesInRegisters(g.act.kind)) return {RowsFor<Kind::kNone>(g.KH, g.sh), false};
  const BlockedDepthwiseRowsFn fn = ForActivation8(
      g.act.kind, [&](auto k) -> BlockedDepthwiseRowsFn { return RowsFor<decltype(k)::value>(g.KH, g.sh); });
  return {fn, true};
}

#else
BlockedDepthwiseRows BlockedDepthwiseKxKFor(const BlockedConvGeometry&) { return {}; }
#endif

bool BlockedDepthwiseKxKShape(const BlockedConvGeometry& g) {
  if (!g.depthwise() || g.KH != g.KW || (g.KH != 5 && g.KH != 7) || g.dh != 1 || g.dw != 1) return false;
  if ((g.sh != 1 && g.sh != 2) || g.sw != g.sh || g.C % kChannelBlock != 0) return false;
  // Pads of at most half the kernel on each side, the end ones those the output size implies.
  const int64_t half = g.KH / 2;
  const int64_t pad_bottom = (g.OH - 1) * g.sh + g.KH - g.H - g.pt, pad_right = (g.OW - 1) * g.sw + g.KW - g.W - g.pl;
  return g.pt >= 0 && g.pt <= half && g.pl >= 0 && g.pl <= half && pad_bottom <= half && pad_right <= half;
}

}  // namespace nee::cpu
