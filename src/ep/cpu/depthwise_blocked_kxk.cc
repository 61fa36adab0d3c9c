// BlockedConv's depthwise convolutions with square kernels other than 3x3
// (MobileNetV3's and EfficientNet's 5x5, 7x7), stride 1 or 2, on AVX2 with
// FMA: one output pixel of a channel block is one vector of eight channels.
//
// Why: without them these convs stayed NCHW, and a MobileNetV3 left and
// re-entered the blocked layout around each of them (a FromBlocked and a
// ToBlocked per conv), where ONNX Runtime runs every depthwise conv on its
// NCHWc layout; in NCHW nee's 5x5 ones ran 1.6-4x ONNX Runtime's time.
//
// A row of outputs is its left border, its interior four pixels at a time,
// and its right border. In the interior every tap of a kernel row is inside
// the image, so the four pixels' taps are plain loads along the input row,
// each tap's weight vector loaded once for the four; a border pixel checks
// each tap. Rows of the kernel above or below the image are skipped, for the
// border pixels and the interior alike.
//
// Every output is bias + its taps in (kh, kw) order, whether the interior or
// the border computes it, so results do not depend on the thread count or on
// how a strip of rows is cut.
#include "ep/cpu/depthwise_blocked_kxk.h"

#include <algorithm>

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

// Output rows [oh0, oh1) of one channel block (see BlockedDepthwiseRowsFn):
// x [H][W][8], w the taps' weights [KS * KS][8], y [OH][OW][8].
template <int KS, int S, Kind K>
NEE_KXK_TARGET void Rows(const BlockedConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
                         const float* z, int64_t oh0, int64_t oh1) {
  const __m256 b = _mm256_loadu_ps(bias);
  const int64_t H = g.H, W = g.W, OW = g.OW;
  // Columns whose taps all lie inside a row: ow * S - pl >= 0 and ow * S - pl + KS - 1 < W.
  const int64_t lo = std::min(OW, (g.pl + S - 1) / S);
  const int64_t last = W - KS + g.pl;
  const int64_t hi = last < 0 ? lo : std::clamp(last / S + 1, lo, OW);
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t ih0 = oh * S - g.pt;
    const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min<int64_t>(KS, H - ih0);
    const int64_t yr = oh * OW * kB;
    // One pixel, every tap checked.
    auto border = [&](int64_t ow) NEE_KXK_TARGET {
      __m256 acc = b;
      for (int64_t kh = kh0; kh < kh1; ++kh) {
        const float* r = x + (ih0 + kh) * W * kB;
        for (int kw = 0; kw < KS; ++kw) {
          const int64_t iw = ow * S - g.pl + kw;
          if (iw >= 0 && iw < W)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(r + iw * kB), _mm256_loadu_ps(w + (kh * KS + kw) * kB), acc);
        }
      }
      Store<K>(g.act, y, z, yr + ow * kB, acc);
    };
    int64_t ow = 0;
    for (; ow < lo; ++ow) border(ow);
    for (; ow + 4 <= hi; ow += 4) {
      __m256 a0 = b, a1 = b, a2 = b, a3 = b;
      for (int64_t kh = kh0; kh < kh1; ++kh) {
        const float* r = x + ((ih0 + kh) * W + ow * S - g.pl) * kB;
        const float* wk = w + kh * KS * kB;
#pragma GCC unroll 7
        for (int kw = 0; kw < KS; ++kw) {
          const __m256 wv = _mm256_loadu_ps(wk + kw * kB);
          const float* c = r + kw * kB;
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(c), wv, a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(c + S * kB), wv, a1);
          a2 = _mm256_fmadd_ps(_mm256_loadu_ps(c + 2 * S * kB), wv, a2);
          a3 = _mm256_fmadd_ps(_mm256_loadu_ps(c + 3 * S * kB), wv, a3);
        }
      }
      Store<K>(g.act, y, z, yr + ow * kB, a0);
      Store<K>(g.act, y, z, yr + (ow + 1) * kB, a1);
      Store<K>(g.act, y, z, yr + (ow + 2) * kB, a2);
      Store<K>(g.act, y, z, yr + (ow + 3) * kB, a3);
    }
    for (; ow < OW; ++ow) border(ow);
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
